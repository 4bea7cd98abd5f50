"""Message sessions: exclusive session locks (by id or next-available), renewal, expiry and
failover of unsettled messages, session state.

A mixin of :class:`~sbemulator.broker.core.Broker` sharing its state and helpers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .entity import TIMER_SESSION, Entity, Session
from .errors import InvalidOperationError, MessageSizeExceededError, SessionLockLostError

if TYPE_CHECKING:
    from .receiver import Receiver


class SessionsMixin:
    _pending: dict[int, Any]
    # provided by the broker (this module imports nothing from core)
    _op: Callable[[], AbstractContextManager[None]]
    _now: Callable[[], int]
    _entity: Callable[[str], Entity]
    _timer: Callable[..., None]
    _notify: Callable[..., None]
    _notify_one: Callable[[Entity, Receiver], None]
    _return_locks: Callable[..., None]
    store: Any

    def _lock_session(self, ent: Entity, s: Session, r: Receiver, now: int) -> None:
        s.owner = r
        s.generation += 1
        s.locked_until_ms = now + ent.lock_duration_ms
        r.session = s
        self._timer(s.locked_until_ms, TIMER_SESSION, ent, s, s.generation)

    def _lose_session(self, ent: Entity, s: Session, now: int) -> None:
        r = s.owner
        s.owner = None
        s.generation += 1
        s.locked_until_ms = 0
        if r is not None:
            r.session_lost = True
            self._return_locks(ent, r, now)
            if not r.closed:
                self._pending[id(r)] = r
        ent.forget_session_if_idle(s)
        if s.heap:
            self._notify(ent, s)

    def _try_acquire_session(self, r: Receiver) -> str | None:
        with self._op():
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
                seq = self._first_available(ent, s)
                if seq is not None and (best is None or seq < best_seq):
                    best, best_seq = s, seq
            if best is None:
                return None
            if best.owner is not None:
                self._lose_session(ent, best, now)
            self._lock_session(ent, best, r, now)
            self._notify_one(ent, r)
            return best.id

    @staticmethod
    def _first_available(ent: Entity, s: Session) -> int | None:
        heap = s.heap
        while heap:
            msg = ent.messages.get(heap[0])
            if msg is not None and msg.queued:
                return heap[0]
            heapq.heappop(heap)
        return None

    def _held_session(self, ent: Entity, session_id: str, now: int) -> Session:
        if not ent.requires_session:
            raise InvalidOperationError(f"'{ent.path}' does not require sessions.")
        s = ent.sessions.get(session_id)
        if s is None or s.owner is None:
            raise SessionLockLostError(
                f"The session lock for session '{session_id}' was lost or is not held."
            )
        if s.locked_until_ms <= now:
            self._lose_session(ent, s, now)
            raise SessionLockLostError(f"The session lock for session '{session_id}' has expired.")
        return s

    def renew_session_lock(self, path: str, session_id: str) -> int:
        with self._op():
            ent = self._entity(path)
            now = self._now()
            s = self._held_session(ent, session_id, now)
            s.locked_until_ms = now + ent.lock_duration_ms
            self._timer(s.locked_until_ms, TIMER_SESSION, ent, s, s.generation)
            for token in s.owner.locks if s.owner else ():
                m = ent.locks.get(token)
                if m is not None:
                    m.locked_until_ms = s.locked_until_ms
            return s.locked_until_ms

    def get_session_state(self, path: str, session_id: str) -> bytes | None:
        with self._op():
            ent = self._entity(path)
            return self._held_session(ent, session_id, self._now()).state

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None:
        with self._op():
            ent = self._entity(path)
            s = self._held_session(ent, session_id, self._now())
            if state is not None and len(state) > ent.max_message_size:
                # "Message sessions", Message session state: it can hold data of the size of one message
                raise MessageSizeExceededError(
                    f"The session state ({len(state)} bytes) exceeds the limit ({ent.max_message_size} bytes) "
                    f"of one message on '{ent.path}'."
                )
            s.state = bytes(state) if state is not None else None
            self.store.set_session_state(ent.key, session_id, s.state)

    def list_sessions(self, path: str, skip: int = 0, top: int = 2**31 - 1) -> list[str]:
        """Sessions that have messages or state (get-message-sessions)."""
        ent = self._entity(path)
        ids = [s.id for s in ent.sessions.values() if s.count > 0 or s.state is not None]
        return ids[skip : skip + top]
