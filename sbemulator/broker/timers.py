"""The broker's timers: one small class per kind, each knowing when it is due, whether it still
matters and what it does, and the heaps that run them.

Kinds: a lock's expiry (``LockExpiry``; a renewed lock gets a new one), the expiry of the locks one
take made together (``TakeExpiry``, one heap entry per take instead of one per message), a slice of
the locks a closing session receiver returns (``LockReturn``), a session lock's expiry
(``SessionLockExpiry``) and an entity's AutoDeleteOnIdle check (``IdleDeletion``).

The two kinds every stored message may have, its time to live (``EXPIRY``) and a scheduled message's
enqueue time (``ACTIVATION``), are no objects: each is a plain tuple of atoms ``(deadline, kind, entity
key, sequence number)`` in a heap of their own (:meth:`Timers.add_message`). Why: a timer object and its
heap entry were two of the three objects per stored message that the cyclic garbage collector visits in
every full collection (runtime/collector.py: 191 ms of CPU for 100,000 messages). A tuple holding only
ints and a str is untracked by the collector's first young collection, so a stored message costs it the
message alone. The entry finds its message again by key and sequence number when it comes due.

Timers are never cancelled: a settled message, a renewed lock or a deleted entity leaves its timer in
the heap, where :meth:`Timer.valid` says it no longer matters (lazy deletion; ``Timers`` drops such
entries when the heap has doubled, so they do not pin message bodies in memory until their deadline).

What a timer does when it fires is the broker's: the hosts below are Protocols that the message flow
(``flow.MessageFlow``) and the session locks (``sessions.Sessions``) implement. This module imports
only ``entity`` and ``model``.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Mapping
from typing import Protocol

from ..model import BrokerMessage, LockKey, MessageState
from ..scheduling import DEFAULT_SLICES, Budget, Slices
from .entity import Entity, Session

_MIN_COMPACT = 8192
_BY_SEQUENCE = operator.attrgetter("sequence_number")

EXPIRY = 0  # a message's time to live runs out (an entry of the message heap)
ACTIVATION = 1  # a scheduled message's enqueue time comes

MessageEntry = tuple[int, int, str, int]
"""(deadline ms, EXPIRY or ACTIVATION, entity key, sequence number): atoms only, untracked by the collector."""


class LockHost(Protocol):
    """What message timers do: the flow's lock, expiry and activation operations."""

    def lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None: ...

    def expire(self, ent: Entity, msg: BrokerMessage, now: int) -> None: ...

    def activate(self, target: Entity, msg: BrokerMessage, now: int, stored: bool) -> None: ...


class SessionHost(Protocol):
    def lose_session(self, ent: Entity, s: Session, now: int) -> None: ...


class Timer:
    """Due at ``deadline`` (epoch ms on the broker's clock) for something of ``entity``."""

    __slots__ = ("deadline", "entity")

    def __init__(self, deadline: int, entity: Entity) -> None:
        self.deadline = deadline
        self.entity = entity

    def valid(self) -> bool:
        """Whether firing would still do something (the entity exists, the subject is unchanged)."""
        raise NotImplementedError

    def fire(self, now: int) -> None:
        """Do what is due; called only when :meth:`valid` is true."""
        raise NotImplementedError


class LockExpiry(Timer):
    """A message's own lock (a receive by sequence number, a renewed lock) runs out."""

    __slots__ = ("host", "key", "msg")

    def __init__(self, deadline: int, entity: Entity, host: LockHost, msg: BrokerMessage, key: LockKey) -> None:
        super().__init__(deadline, entity)
        self.host = host
        self.msg = msg
        self.key = key

    def valid(self) -> bool:
        ent, msg = self.entity, self.msg
        return ent.live and ent.locks.get(self.key) is msg and msg.locked_until_ms == self.deadline

    def fire(self, now: int) -> None:
        self.host.lock_ended(self.entity, self.msg, now)


class TakeExpiry(Timer):
    """The locks one take made run out together (they share the take's time, so their deadline).

    ``msgs`` holds the messages only, not (message, lock key) pairs: a message still holds the take's
    lock while the entity's lock under its own ``lock_key`` is itself with the take's deadline. One
    object fewer per locked message for the cyclic garbage collector to visit (runtime/collector.py)."""

    __slots__ = ("host", "msgs")

    def __init__(self, deadline: int, entity: Entity, host: LockHost, msgs: list[BrokerMessage]) -> None:
        super().__init__(deadline, entity)
        self.host = host
        self.msgs = msgs

    def valid(self) -> bool:
        ent, deadline = self.entity, self.deadline
        if not ent.live:
            return False
        locks = ent.locks
        return any(msg.locked_until_ms == deadline and locks.get(msg.lock_key) is msg  # type: ignore[arg-type]
                   for msg in self.msgs)

    def fire(self, now: int) -> None:
        ent, deadline, locks = self.entity, self.deadline, self.entity.locks
        for msg in self.msgs:  # in the order they were taken (sequence order)
            if msg.locked_until_ms == deadline and locks.get(msg.lock_key) is msg:  # type: ignore[arg-type]
                self.host.lock_ended(ent, msg, now)


class LockReturn(Timer):
    """A closing session receiver's locks, returned a slice at a time (``keys``: one slice of its lock
    keys, in no order; each slice is returned in sequence order); the last slice's ``then`` frees the
    session, so no other receiver takes a later message of it before the earlier ones are back. Due
    at once: :meth:`Timers.run_due` with a budget runs as many slices as fit, and the event loop runs
    between them."""

    __slots__ = ("counted", "host", "keys", "owner", "then")

    def __init__(self, deadline: int, entity: Entity, host: LockHost, keys: list[LockKey], owner: object,
                 counted: bool, then: Callable[[], None] | None = None) -> None:
        super().__init__(deadline, entity)
        self.host = host
        self.keys = keys
        self.owner = owner
        self.counted = counted
        self.then = then

    def valid(self) -> bool:
        return self.entity.live

    def fire(self, now: int) -> None:
        ent, owner, locks = self.entity, self.owner, self.entity.locks
        msgs = [msg for msg in map(locks.get, self.keys) if msg is not None and msg.lock_owner is owner]
        msgs.sort(key=_BY_SEQUENCE)
        for msg in msgs:
            self.host.lock_ended(ent, msg, now, counted=self.counted)
        if self.then is not None:
            self.then()


class SessionLockExpiry(Timer):
    """A session lock runs out (valid only for the lock it was set for: same generation and deadline)."""

    __slots__ = ("generation", "host", "session")

    def __init__(self, deadline: int, entity: Entity, host: SessionHost, session: Session) -> None:
        super().__init__(deadline, entity)
        self.host = host
        self.session = session
        self.generation = session.generation

    def valid(self) -> bool:
        s = self.session
        return (
            self.entity.live
            and s.owner is not None
            and s.generation == self.generation
            and s.locked_until_ms == self.deadline
        )

    def fire(self, now: int) -> None:
        self.host.lose_session(self.entity, self.session, now)


class IdleHost(Protocol):
    def fired(self, ent: Entity, now: int) -> None: ...


class IdleDeletion(Timer):
    """An entity's AutoDeleteOnIdle interval may have passed (broker/idle.py decides; valid only while it
    is the entity's current idle timer)."""

    __slots__ = ("host",)

    def __init__(self, deadline: int, entity: Entity, host: IdleHost) -> None:
        super().__init__(deadline, entity)
        self.host = host

    def valid(self) -> bool:
        return self.entity.live and self.entity.idle_timer is self

    def fire(self, now: int) -> None:
        self.host.fired(self.entity, now)


class Timers:
    """Two heaps by deadline (ties in the order they were added): timer objects, and the message
    entries (:data:`MessageEntry`) of TTLs and scheduled enqueue times, run together in deadline order.

    Stale message entries (a completed message's TTL) stay until their deadline, so the message heap is
    compacted when it has doubled since the last compaction. With 100,000s of entries that is too long
    for one go (a send that crossed the threshold with 262,000 entries took 145 ms), so a compaction runs
    in slices in :meth:`run_due`: the full heap is set aside (new entries go to a fresh one), scanned
    ``Slices.compact_chunk`` entries at a time, and what still matters is merged back with one ``heapify`` (when
    more than half still matters, the set-aside heap is kept instead and the new entries pushed into it).
    The set-aside entries do not fire meanwhile (a TTL or scheduled time is honoured a few event-loop
    iterations late, never early); :meth:`next_deadline` says 0 (due now) until the merge."""

    def __init__(self, slices: Slices = DEFAULT_SLICES) -> None:
        # Slices.compact_chunk: message entries a slice of the message heap's compaction looks at.
        # Slices.stale_pops: stale entries next_deadline drops from the heaps' fronts per call (4,096 pops
        # from a heap of 100,000 took 10-15 ms, run in the same timer-task step as a 10 ms tick).
        self._compact_chunk = slices.compact_chunk
        self._stale_pops = slices.stale_pops
        self._heap: list[tuple[int, int, Timer]] = []
        self._messages: list[MessageEntry] = []
        self._seq = itertools.count()
        self._compact_at = _MIN_COMPACT
        self._compact_messages_at = _MIN_COMPACT
        self._compact_wanted = False
        self._set_aside: list[MessageEntry] | None = None  # the message heap being compacted
        self._scanned = 0
        self._survivors: list[MessageEntry] = []
        self._entities: Mapping[str, Entity] = {}
        self._host: LockHost | None = None
        # Set by the server to wake its timer task when a new timer becomes the earliest one
        # (called synchronously; it must not call back into the broker).
        self.on_deadline_changed: Callable[[], None] | None = None

    def bind_messages(self, entities: Mapping[str, Entity], host: LockHost) -> None:
        """Where message entries find their entity (by key) and who expires or activates the message."""
        self._entities = entities
        self._host = host

    def __len__(self) -> int:
        aside = self._set_aside
        waiting = 0 if aside is None else len(aside) - self._scanned + len(self._survivors)
        return len(self._heap) + len(self._messages) + waiting

    def add(self, timer: Timer) -> None:
        entry = (timer.deadline, next(self._seq), timer)
        heap = self._heap
        heapq.heappush(heap, entry)
        if len(heap) > self._compact_at:
            self._compact()
        if self.on_deadline_changed is not None and heap[0] is entry and (
                not self._messages or self._messages[0][0] > timer.deadline):
            self.on_deadline_changed()

    def add_message(self, kind: int, deadline: int, ent: Entity, seq: int) -> None:
        """A message's TTL (``EXPIRY``) or scheduled enqueue time (``ACTIVATION``) at ``deadline``."""
        entry = (deadline, kind, ent.key, seq)
        heap = self._messages
        heapq.heappush(heap, entry)
        if len(heap) > self._compact_messages_at and self._set_aside is None and not self._compact_wanted:
            self._compact_wanted = True  # started by the next run_due, in slices
            if self.on_deadline_changed is not None:
                self.on_deadline_changed()
        elif self.on_deadline_changed is not None and heap[0] is entry and (
                not self._heap or self._heap[0][0] > deadline):
            self.on_deadline_changed()

    def _compact(self) -> None:
        """Drop timers that no longer matter. Amortised O(1) per timer: the threshold doubles with the
        live size."""
        live = [e for e in self._heap if e[2].valid()]
        heapq.heapify(live)
        self._heap[:] = live  # in place: run_due holds a reference to the list
        self._compact_at = max(_MIN_COMPACT, 2 * len(live))

    def _compact_messages_step(self) -> bool:
        """One slice of the message heap's compaction (started if wanted); whether it is finished."""
        aside = self._set_aside
        if aside is None:
            self._compact_wanted = False
            aside = self._set_aside = self._messages
            self._messages = []
            self._scanned = 0
        start = self._scanned
        chunk = aside[start:start + self._compact_chunk]
        self._scanned = start + len(chunk)
        message_of = self._message_of
        self._survivors.extend([e for e in chunk if message_of(e) is not None])
        if self._scanned < len(aside):
            return False
        merged = self._survivors
        if 2 * len(merged) > len(aside):
            # mostly still live (the heap grew with live messages): a rebuild would free little and its
            # heapify is the one step of a compaction that cannot be sliced, so keep the set-aside heap
            merged = aside
            for entry in self._messages:
                heapq.heappush(merged, entry)
        else:
            merged.extend(self._messages)
            heapq.heapify(merged)
        self._messages = merged
        self._set_aside, self._survivors = None, []
        self._compact_messages_at = max(_MIN_COMPACT, 2 * len(merged))
        return True

    def _message_of(self, entry: MessageEntry) -> tuple[Entity, BrokerMessage] | None:
        """The entity and message an entry is for while it still matters (the entity exists, the
        message is there with that deadline, or still scheduled), else None."""
        deadline, kind, key, seq = entry
        ent = self._entities.get(key)
        if ent is None or not ent.live:
            return None
        msg = ent.messages.get(seq)
        if msg is None:
            return None
        if kind == EXPIRY:
            return (ent, msg) if msg.expires_at_ms == deadline else None
        return (ent, msg) if msg.state == MessageState.SCHEDULED else None

    def _fire_message(self, entry: MessageEntry, now: int) -> bool:
        """Fire a message entry if it still matters; whether it did anything."""
        target = self._message_of(entry)
        if target is None:
            return False
        ent, msg = target
        host = self._host
        assert host is not None, "bind_messages was not called"
        if entry[1] == EXPIRY:
            # a locked message is checked again when its lock ends; a deferred one when a receive by
            # sequence number asks for it ("Message deferral")
            if not msg.locked and msg.state == MessageState.ACTIVE:
                host.expire(ent, msg, now)
        else:
            host.activate(ent, msg, now, stored=True)
        return True

    def next_deadline(self) -> int | None:
        """The earliest deadline of a timer that still matters (ms), or None; 0 while the message
        heap's compaction has slices to run, or when ``Slices.stale_pops`` stale entries were dropped from the
        front and more may follow (the caller asks again after yielding)."""
        if self._compact_wanted or self._set_aside is not None:
            return 0
        pops = self._stale_pops  # a purge leaves 100,000 stale entries at the front: 400 ms to pop in one go
        heap = self._heap
        while heap and not heap[0][2].valid():
            heapq.heappop(heap)
            pops -= 1
            if not pops:
                return 0  # due now: the timer task ticks (nothing), yields, and asks again
        messages = self._messages
        while messages and self._message_of(messages[0]) is None:
            heapq.heappop(messages)
            pops -= 1
            if not pops:
                return 0
        if heap and messages:
            return min(heap[0][0], messages[0][0])
        if heap:
            return heap[0][0]
        return messages[0][0] if messages else None

    def run_due(self, now: int, budget: Budget | None = None) -> bool:
        """Fire the valid timers due at ``now``, earliest first (timers they add are run too if due).

        With a ``budget`` (a slice of the scheduler's, sbemulator/scheduling/), stop after the timer (or
        the compaction slice) during which its time (real time, whatever the broker's clock) ran out, or
        once it says the store holds enough to commit, and return True if due work remains: the driver
        commits, lets the event loop run and calls again, so 100,000 locks lapsing at once are returned in
        slices instead of one stall. Without a budget, everything due runs and False is returned."""
        if budget is not None and not budget.bounded:
            budget = None  # unbounded: everything due runs
        if self._compact_wanted or self._set_aside is not None:
            while not self._compact_messages_step():
                if budget is not None and budget.time_spent():
                    return True
            if budget is not None and budget.time_spent():
                return True
        heap, messages = self._heap, self._messages  # a compaction starts only above, never in this loop
        while True:
            if messages and messages[0][0] <= now and not (heap and heap[0][0] < messages[0][0]):
                fired = self._fire_message(heapq.heappop(messages), now)
            elif heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[2]
                fired = timer.valid()
                if fired:
                    timer.fire(now)
            else:
                return False
            if fired and budget is not None and budget.spent():
                return bool((heap and heap[0][0] <= now) or (messages and messages[0][0] <= now)
                            or self._compact_wanted)

