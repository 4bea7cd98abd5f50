"""Which receivers to tell that messages may be waiting, told once the broker's state is consistent.

Every public broker call runs inside :attr:`Wakeups.operation` (a reusable context manager: the SDK's
paths make two broker calls per message, and a generator-based one cost more than the settlement it
wrapped). Receivers marked while it runs are told (``Receiver.on_available``) when the outermost call
ends, each once, so a callback that calls back into the broker finds it consistent. A failing
callback is logged and does not starve the others.

Imports only ``entity`` (and ``receiver`` for types).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .entity import Entity, Session

if TYPE_CHECKING:
    from .receiver import Receiver

log = logging.getLogger(__name__)


class Operation:
    """The context of a public broker call; :class:`Wakeups` flushes when the outermost one ends."""

    __slots__ = ("_wakeups",)

    def __init__(self, wakeups: Wakeups) -> None:
        self._wakeups = wakeups

    def __enter__(self) -> None:
        self._wakeups.depth += 1

    def __exit__(self, *exc: object) -> None:
        w = self._wakeups
        w.depth -= 1
        if w.depth == 0 and w.pending and not w.flushing:
            w.flush()


class Wakeups:
    __slots__ = ("depth", "flushing", "operation", "pending")

    def __init__(self) -> None:
        self.pending: dict[int, Receiver] = {}  # by id(receiver), in the order they were marked
        self.depth = 0
        self.flushing = False
        self.operation = Operation(self)

    def wake(self, r: Receiver) -> None:
        self.pending[id(r)] = r

    def forget(self, r: Receiver) -> None:
        self.pending.pop(id(r), None)

    def notify(self, ent: Entity, session: Session | None = None) -> None:
        """A message became available in ``ent`` (in ``session``): its owner, or every receiver that
        could take it (a plain receiver; for a session without owner, next-available receivers)."""
        receivers = ent.receivers
        if not receivers:
            return
        if session is not None and session.owner is not None:
            self.pending[id(session.owner)] = session.owner
            return
        pending = self.pending
        for rid, r in receivers.items():
            if session is None or (r.session is None and r.next_available_session):
                pending[rid] = r

    def notify_one(self, ent: Entity, r: Receiver) -> None:
        """``r`` was just attached or given a session: tell it if it has messages waiting."""
        heap = r.session.heap if r.session is not None else ent.available
        if heap:
            self.pending[id(r)] = r

    def flush(self) -> None:
        self.flushing = True
        try:
            pending = self.pending
            while pending:
                rid = next(iter(pending))
                r = pending.pop(rid)
                if not r.closed:
                    try:
                        r.on_available()
                    except Exception:  # one failing link must not starve the others
                        log.exception("on_available callback of %r failed", r)
        finally:
            self.flushing = False
