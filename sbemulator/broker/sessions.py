"""Message sessions: exclusive session locks (by id or next-available), renewal, expiry and
failover of unsettled messages, session state.

A component of the broker (:class:`~sbemulator.broker.core.Broker` builds it): it reads entities
through ``entities`` (the topology's lookup), sets its timers on ``timers``, tells receivers through
``wakeups``, and hands a lost session's locks back through ``locks`` (the message flow, which owns
what happens to an unsettled message). Imports ``entity``, ``errors``, ``timers``, ``wakeups`` and
``store.base`` (for the type), nothing from ``core`` or ``flow``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .entity import Entity, Session
from .errors import InvalidOperationError, MessageSizeExceededError, SessionLockLostError
from .timers import SessionLockExpiry, Timers
from .wakeups import Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

    from .receiver import Receiver


class LockReturner(Protocol):
    def return_locks(self, ent: Entity, r: Receiver, now: int, counted: bool = True) -> None:
        """End every lock ``r`` holds on ``ent`` without settlement (counted: like an expiry)."""
        ...


class Sessions:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        entities: Callable[[str], Entity],
        timers: Timers,
        wakeups: Wakeups,
        locks: LockReturner,
    ) -> None:
        self.store = store
        self.clock = clock
        self._entity = entities
        self._timers = timers
        self._wakeups = wakeups
        self._locks = locks
        self._op = wakeups.operation

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def lock_session(self, ent: Entity, s: Session, r: Receiver, now: int) -> None:
        s.owner = r
        s.generation += 1
        s.locked_until_ms = now + ent.lock_duration_ms
        r.session = s
        ent.seekers.pop(id(r), None)  # it has a session now: other sessions' messages are not for it
        self._timers.add(SessionLockExpiry(s.locked_until_ms, ent, self, s))

    def lose_session(self, ent: Entity, s: Session, now: int) -> None:
        r = s.owner
        s.owner = None
        s.generation += 1
        s.locked_until_ms = 0
        if r is not None:
            r.session_lost = True
            self._locks.return_locks(ent, r, now)
            if not r.closed:
                self._wakeups.wake(r)
        ent.forget_session_if_idle(s)
        if s.heap:
            self._wakeups.notify(ent, s)

    def release_session(self, ent: Entity, r: Receiver) -> None:
        """``r`` closes: the session it holds is free for others (its locks were returned already)."""
        s = r.session
        if s is not None and s.owner is r:
            s.owner = None
            s.generation += 1
            s.locked_until_ms = 0
            ent.forget_session_if_idle(s)
            if s.heap:
                self._wakeups.notify(ent, s)

    def try_acquire_session(self, r: Receiver) -> str | None:
        with self._op:
            if r.session is not None:
                return r.session.id
            if r.closed or not r.next_available_session:
                return None
            ent = r.entity
            now = self._now()
            best: Session | None = None
            best_seq = 0
            for s in ent.sessions.values():
                if s.owner is not None and s.locked_until_ms > now:
                    continue
                seq = _first_available(ent, s)
                if seq is not None and (best is None or seq < best_seq):
                    best, best_seq = s, seq
            if best is None:
                return None
            if best.owner is not None:
                self.lose_session(ent, best, now)
            self.lock_session(ent, best, r, now)
            self._wakeups.notify_one(ent, r)
            return best.id

    def held_session(self, ent: Entity, session_id: str, now: int) -> Session:
        if not ent.requires_session:
            raise InvalidOperationError(f"'{ent.path}' does not require sessions.")
        s = ent.sessions.get(session_id)
        if s is None or s.owner is None:
            raise SessionLockLostError(
                f"The session lock for session '{session_id}' was lost or is not held."
            )
        if s.locked_until_ms <= now:
            self.lose_session(ent, s, now)
            raise SessionLockLostError(f"The session lock for session '{session_id}' has expired.")
        return s

    def renew_session_lock(self, path: str, session_id: str) -> int:
        with self._op:
            ent = self._entity(path)
            now = self._now()
            s = self.held_session(ent, session_id, now)
            s.locked_until_ms = now + ent.lock_duration_ms
            self._timers.add(SessionLockExpiry(s.locked_until_ms, ent, self, s))
            for token in s.owner.locks if s.owner else ():
                m = ent.locks.get(token)
                if m is not None:
                    m.locked_until_ms = s.locked_until_ms
            return s.locked_until_ms

    def get_session_state(self, path: str, session_id: str) -> bytes | None:
        with self._op:
            ent = self._entity(path)
            return self.held_session(ent, session_id, self._now()).state

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None:
        with self._op:
            ent = self._entity(path)
            s = self.held_session(ent, session_id, self._now())
            if state is not None and len(state) > ent.max_message_size:
                # "Message sessions", Message session state: it can hold data of the size of one message
                raise MessageSizeExceededError(
                    f"The session state ({len(state)} bytes) exceeds the limit ({ent.max_message_size} bytes) "
                    f"of one message on '{ent.path}'."
                )
            # An empty state is no state: Service Bus reads it back as null (the Go SDK's
            # TestSessionReceiver_acceptSession sets nil, which goes as an empty binary, and expects nil).
            s.state = bytes(state) if state else None
            s.state_updated_ms = self._now()
            self.store.set_session_state(ent.key, session_id, s.state, s.state_updated_ms)

    def state_undo_point(self, path: str, session_id: str) -> Callable[[], None]:
        """What puts a session's state (and when it was set) back as it is now: a transaction's
        set-session-state taken back with its commit (Settlement.undo_point says when this may run)."""
        ent = self._entity(path)
        s = ent.sessions.get(session_id)
        state, updated = (s.state, s.state_updated_ms) if s is not None else (None, None)

        def undo() -> None:
            current = ent.sessions.get(session_id)
            if current is not None:
                current.state, current.state_updated_ms = state, updated

        return undo

    def list_sessions(self, path: str, skip: int = 0, top: int = 2**31 - 1,
                      updated_after_ms: int | None = None) -> list[str]:
        """get-message-sessions: without ``updated_after_ms``, the sessions that have messages or state;
        with it, the sessions whose state was set (or cleared) after that time, as Service Bus lists them
        for a ``last-updated-time`` other than DateTime.MaxValue."""
        ent = self._entity(path)
        if updated_after_ms is None:
            ids = [s.id for s in ent.sessions.values() if s.count > 0 or s.state is not None]
        else:
            ids = [s.id for s in ent.sessions.values()
                   if s.state_updated_ms is not None and s.state_updated_ms > updated_after_ms]
        return ids[skip : skip + top]


def _first_available(ent: Entity, s: Session) -> int | None:
    heap = s.heap
    while heap:
        msg = ent.messages.get(heap[0])
        if msg is not None and msg.queued:
            return heap[0]
        heapq.heappop(heap)
    return None
