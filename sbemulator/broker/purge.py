"""A purge in slices: every message of some containers is taken out at once, then dropped a slice at a time.

Why: dropping 100,000 messages (their objects, their locks, their rows in a durable store) in one call held
the event loop for 90-170 ms (issue #19, ``python -m bench.purge_hold``). A purge therefore has two parts:

* :meth:`PurgeJob.detach` (one call, its cost the number of containers, receivers and sessions, not of
  messages) takes every message out of each container: the container gets fresh, empty structures, so
  from that moment no receiver can take, peek, settle or renew any of them (a lock on one is lost: a
  settlement finds no lock and gets ``MessageLockLostError``, as for a message no longer in the queue),
  counts leave them out, and a message sent, scheduled or dead-lettered into the container afterwards is
  kept. A purge removes exactly what was there when it began.
* :meth:`PurgeJob.step` (a job of the scheduler, sbemulator/scheduling/) drops the detached messages a chunk
  of ``Slices.purge_items`` at a time until its slice's budget is spent: their objects, the bytes
  they held against their entity's quota, and their stored rows (``Store.delete_messages`` with exactly
  those sequence numbers, written with the next commit). Between steps the runtime's driver commits and lets
  the event loop run (``runtime.jobs.JobDriver.run``); :meth:`run` does all steps in one go for callers
  that cannot wait.

Durability: the rows of a slice go with the commit after it, so a process killed mid-purge loses only rows
of messages the purge had already taken out (the rest, and everything sent meanwhile, stay); the purge's
answer (its count) is given only after the last slice's commit, so no message reported purged comes back.
Imports ``entity``, ``model`` and the scheduler's core only; the store is reached through the Store protocol.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import Protocol

from ..model import BrokerMessage
from ..scheduling import Budget, run_to_end
from ..tracked import TrackedDict
from .entity import Entity


class MessageStore(Protocol):
    """What a purge needs from the store."""

    def delete_messages(self, entity: str, sequence_numbers: Iterable[int]) -> None: ...


class _Detached:
    """One container's messages as they were when the purge began, and where its drop has got to."""

    __slots__ = ("cold", "cold_pos", "ent", "locked", "messages")

    def __init__(self, ent: Entity, messages: dict[int, BrokerMessage], locked: dict[bytes, BrokerMessage],
                 cold: array | None, cold_pos: int) -> None:
        self.ent = ent
        self.messages = messages
        self.locked = locked
        self.cold = cold
        self.cold_pos = cold_pos


class PurgeJob:
    """Every message of ``containers`` purged: :meth:`detach` at once, then dropped by :meth:`step`."""

    def __init__(self, store: MessageStore, containers: list[Entity]) -> None:
        self._store = store
        self._containers = containers
        self._todo: list[_Detached] = []
        self.removed = 0  # how many messages the purge removes (known from detach on)

    def detach(self) -> int:
        """Take every message out of the containers (see the module docstring); returns how many."""
        for ent in self._containers:
            messages, locked = ent.messages, ent.locks
            ent.messages, ent.locks = TrackedDict(), TrackedDict()
            for r in ent.receivers.values():  # a receiver's locks are all of its one container
                r.locks = {}
            ent.available.clear()
            cold = ent.cold
            seqs: array | None = None
            pos = 0
            if cold is not None:
                ent.cold = None
                ent.quota.held_bytes -= cold.bytes
                seqs, pos = cold.seqs, cold.head
                self.removed += len(cold)
            for s in list(ent.sessions.values()):
                s.count = 0
                s.heap = []
                ent.forget_session_if_idle(s)
            self.removed += len(messages)
            if messages or seqs is not None:
                self._todo.append(_Detached(ent, messages, locked, seqs, pos))
        return self.removed

    @property
    def done(self) -> bool:
        return not self._todo

    def step(self, budget: Budget) -> bool:
        """One slice (a Job of sbemulator/scheduling/): chunks of ``budget.slices.purge_items`` detached
        messages dropped until the budget is spent (at least one chunk); True once none is left."""
        chunk = budget.slices.purge_items
        while not self._drop(chunk):
            if budget.spent():
                return False
        return True

    def _drop(self, count: int) -> bool:
        """Drop at most ``count`` detached messages; True once none is left."""
        budget = max(1, count)
        store = self._store
        while self._todo and budget > 0:
            part = self._todo[-1]
            ent = part.ent
            locked = part.locked
            n = min(budget, len(locked))
            for _ in range(n):  # their locks end with them (a gateway may still hold the message object)
                _, msg = locked.popitem()
                msg.lock_key = msg.lock_owner = msg.locked_until_ms = None
                # The take's lock timer holds the message until the lock would have ended, and frees every
                # message of its take at once (50,000 in one tick: 51 ms of CPU): what the message carries
                # goes here, a slice at a time, so the timer frees bare objects. Nothing reads it again: its
                # delivery was encoded when it was taken, and it is in no entity and under no lock.
                msg.body_raw = msg.properties_raw = b""
                msg.application_properties = {}
                msg.annotations = msg.delivery_annotations = {}
                msg.header_fields = None
            messages = part.messages
            n = min(budget, len(messages))
            seqs: list[int] = []
            freed = 0
            if n:
                pop = messages.popitem
                for _ in range(n):
                    seq, msg = pop()
                    freed += msg.size
                    seqs.append(seq)
                ent.quota.held_bytes -= freed
                budget -= n
            cold = part.cold
            if cold is not None and budget > 0:
                end = min(len(cold), part.cold_pos + budget)
                seqs.extend(cold[part.cold_pos:end])
                budget -= end - part.cold_pos
                part.cold_pos = end
                if end >= len(cold):
                    part.cold = None
            if seqs and ent.live:  # a deleted entity's rows went with it (and its name may be a new one's)
                store.delete_messages(ent.key, seqs)
            if not messages and not locked and part.cold is None:
                self._todo.pop()
        return not self._todo

    def run(self) -> int:
        """Every remaining slice in one go (a caller that cannot let the event loop run between them)."""
        run_to_end(self)
        return self.removed
