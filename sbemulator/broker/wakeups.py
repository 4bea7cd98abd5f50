"""Which receivers to tell that messages may be waiting, told once the broker's state is consistent.

Every public broker call runs inside :attr:`Wakeups.operation` (a reusable context manager: the SDK's
paths make two broker calls per message, and a generator-based one cost more than the settlement it
wrapped). Receivers marked while it runs are told (``Receiver.on_available``) when the outermost call
ends, each once, so a callback that calls back into the broker finds it consistent. A failing
callback is logged and does not starve the others.

Only receivers that can take a message now are marked by a new message (``Entity.waiting`` and
``Entity.seekers``, kept by the message flow, the sessions and ``Receiver.set_waiting``).

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
        """A message became available in ``ent`` (in ``session``): wake who can take it now, the
        session's owner, or for a session without owner the next-available receivers still seeking
        one, or for a plain message the receivers whose links have credit (``Entity.waiting``, least
        recently served first). Receivers without credit are not in those sets, so the cost of a
        send does not grow with idle receivers; they take when their next flow comes."""
        if session is not None:
            owner = session.owner
            if owner is not None:
                self.pending[id(owner)] = owner
            elif ent.seekers:
                self.pending.update(ent.seekers)
            return
        if ent.waiting:
            self.pending.update(ent.waiting)

    def notify_one(self, ent: Entity, r: Receiver) -> None:
        """``r`` was just attached or given a session: tell it if it has messages waiting."""
        heap = r.session.heap if r.session is not None else ent.available
        if heap or (r.session is None and ent.cold is not None):  # cold: paged-out messages (broker/paging.py)
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
