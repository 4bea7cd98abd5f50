"""Settling peek-locked messages: the outcomes, the lock checks that come first, and lock renewal.

The outcomes are :class:`~sbemulator.model.Outcome` (a leaf module, so that receivers name
them without depending on this one); a ``$management`` status converts with :func:`outcome_of`.

:meth:`Settlement.complete` is the settlement of nearly every peek-locked message: for a lock that is
plainly valid (no session, not expired) it removes the message without the general checks, and
otherwise it is :meth:`Settlement.settle` with ``COMPLETED`` (tests/unit/test_broker_settlement.py
checks the two agree, with Hypothesis).

A component of the broker: what a settlement does to a message (remove it, return it, dead-letter it)
is the message flow's (``flow``, through the ``Messages`` Protocol below), what a lost session lock
does is the sessions component's. Imports ``entity``, ``errors``, ``model``, ``wakeups``, and for types
``receiver``, ``sessions`` and ``store.base``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..model import BrokerMessage, LockKey, MessageState, Outcome, lock_key_of
from .entity import Entity
from .errors import ArgumentError, BrokerError, MessageLockLostError, SessionLockLostError
from .wakeups import Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

    from .receiver import Receiver
    from .sessions import Sessions


class Messages(Protocol):
    """What settling needs from the message flow."""

    def remove(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def unlock(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None: ...

    def dead_letter(
        self, ent: Entity, msg: BrokerMessage, reason: str | None, description: str | None, now: int
    ) -> None: ...

    def renew(self, ent: Entity, msg: BrokerMessage, key: LockKey, now: int) -> int: ...

    def insert(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def take_back(self, ent: Entity, msg: BrokerMessage) -> None: ...


def outcome_of(status: str | Outcome) -> Outcome:
    try:
        return Outcome(status)
    except ValueError:
        raise ArgumentError(f"Unknown disposition status {status!r}.") from None


class Settlement:
    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        entities: Callable[[str], Entity],
        messages: Messages,
        sessions: Sessions,
        wakeups: Wakeups,
    ) -> None:
        self.store = store
        self.clock = clock
        self._entity = entities
        self._messages = messages
        self._sessions = sessions
        self._op = wakeups.operation

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def locked_message(
        self, ent: Entity, key: LockKey, receiver: Receiver | None, session_id: str | None, now: int
    ) -> BrokerMessage:
        """The message ``key`` locks, if its lock (and its session's) still holds; the lock error otherwise."""
        msg = ent.locks.get(key)
        if msg is None:
            if receiver is not None and receiver.session_lost:
                raise SessionLockLostError(f"The session lock on {ent.path} was lost.")
            if session_id is not None and ent.requires_session:
                s = ent.sessions.get(session_id)
                if s is None or s.owner is None or s.locked_until_ms <= now:
                    raise SessionLockLostError(f"The session lock for session '{session_id}' was lost.")
            raise MessageLockLostError(
                "The lock supplied is invalid. Either the lock expired, or the message has already been "
                "removed from the queue."
            )
        if ent.requires_session and msg.session_id is not None and msg.lock_owner is not None:
            s = ent.sessions.get(msg.session_id)
            if s is None or s.owner is not msg.lock_owner or s.locked_until_ms <= now:
                if s is not None and s.owner is msg.lock_owner:
                    self._sessions.lose_session(ent, s, now)
                raise SessionLockLostError(f"The session lock for session '{msg.session_id}' was lost.")
        elif msg.locked_until_ms is not None and msg.locked_until_ms <= now:
            self._messages.lock_ended(ent, msg, now)
            raise MessageLockLostError("The lock supplied has expired.")
        return msg

    def settle(
        self,
        ent: Entity,
        token: uuid.UUID | LockKey,
        outcome: Outcome,
        *,
        receiver: Receiver | None = None,
        reason: str | None = None,
        description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        with self._op:
            now = self._now()
            messages = self._messages
            msg = self.locked_message(ent, lock_key_of(token), receiver, session_id, now)
            if properties_to_modify:
                msg.application_properties.update(properties_to_modify)
                self.store.put_message(ent.key, msg)
            if outcome is Outcome.COMPLETED:
                messages.remove(ent, msg)
            elif outcome is Outcome.ABANDONED:
                messages.lock_ended(ent, msg, now)
            elif outcome is Outcome.RELEASED:
                messages.lock_ended(ent, msg, now, counted=False)
            elif outcome is Outcome.DEFERRED:
                # "Message deferral": a deferred message is not expired until a receive by sequence
                # number asks for it, even one whose TTL passed while it was locked.
                messages.unlock(ent, msg)
                msg.state = MessageState.DEFERRED
                self.store.update_message(ent.key, msg)
            elif outcome is Outcome.DEAD_LETTERED:
                messages.dead_letter(ent, msg, reason, description, now)
            else:  # pragma: no cover - the enum has no other member
                raise ArgumentError(f"Unknown disposition status {outcome!r}.")

    def check_lock(self, ent: Entity, token: uuid.UUID | LockKey, receiver: Receiver) -> None:
        """Raise the lock error a settlement of ``token`` would raise now, without settling."""
        with self._op:
            self.locked_message(ent, lock_key_of(token), receiver, None, self._now())

    def check_locks(self, path: str, lock_tokens: Iterable[uuid.UUID], session_id: str | None = None) -> None:
        """Raise the lock error :meth:`update_disposition` would raise for these tokens now, without
        settling (a transaction checks its staged settlements before applying any)."""
        with self._op:
            ent = self._entity(path)
            now = self._now()
            for token in lock_tokens:
                self.locked_message(ent, lock_key_of(token), None, session_id, now)

    def complete(self, ent: Entity, token: uuid.UUID | LockKey, receiver: Receiver) -> None:
        """:meth:`settle` with COMPLETED for a message whose lock is plainly valid (no session, not
        expired): the settlement of nearly every peek-locked message, without the general checks."""
        key = lock_key_of(token)
        msg = ent.locks.get(key)
        if (
            msg is None
            or ent.requires_session
            or msg.locked_until_ms is None
            or msg.locked_until_ms <= int(self.clock() * 1000)
        ):
            self.settle(ent, key, Outcome.COMPLETED, receiver=receiver)
            return
        with self._op:
            self._messages.remove(ent, msg)

    def update_disposition(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        status: str | Outcome,
        dead_letter_reason: str | None = None,
        dead_letter_description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        """$management update-disposition: completed, abandoned, defered (sic) or suspended."""
        with self._op:
            ent = self._entity(path)
            outcome = None
            for token in lock_tokens:
                if outcome is None:  # an unknown status with no tokens settles nothing and is no error
                    outcome = outcome_of(status)
                self.settle(
                    ent,
                    token,
                    outcome,
                    reason=dead_letter_reason,
                    description=dead_letter_description,
                    properties_to_modify=properties_to_modify,
                    session_id=session_id,
                )

    def undo_point(self, path: str, lock_tokens: Iterable[uuid.UUID | LockKey]) -> Callable[[], None]:
        """What puts the messages these tokens lock back as they are now, locked by their receivers: the
        settlements of a transaction whose commit could not be written are taken back with it, and
        Service Bus leaves a message settled in a transaction that did not commit locked by its receiver
        (its .NET tests settle it again after a rollback). Meant for an undo before anything else runs:
        the commit is one synchronous call, so the locks' timers still hold, and what the settlements
        buffered in the store is still pending there (where copies are found; the caller's store
        rollback then forgets all of it)."""
        with self._op:
            ent = self._entity(path)
            saved = [(msg, _Held.of(msg)) for msg in (ent.locks.get(lock_key_of(t)) for t in lock_tokens)
                     if msg is not None]

        def undo() -> None:
            with self._op:
                for msg, held in reversed(saved):
                    self._put_back(ent, msg, held)

        return undo

    def _put_back(self, ent: Entity, msg: BrokerMessage, held: _Held) -> None:
        # Wherever the settlement put the message or a copy of it (a dead-letter queue, a forwarding
        # target; sharing its encoded properties, as a withdrawn send's copies do), it leaves.
        props = msg.properties_raw
        for key, _, pending in list(self.store.pending_messages()):
            if pending.properties_raw is not props or (pending is msg and key == ent.key):
                continue
            try:
                where = self._entity(key)
            except BrokerError:
                continue
            self._messages.take_back(where, pending)  # in memory, or only indexed (a paged dead-letter queue)
        if ent.messages.get(msg.sequence_number) is not msg:
            self._messages.insert(ent, msg)
        msg.queued = False  # off the available heap if it was returned there (the heap skips it)
        held.restore(msg)
        ent.locks[held.lock_key] = msg
        if held.lock_owner is not None:
            held.lock_owner.locks[held.lock_key] = None

    def renew_lock(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> list[int]:
        with self._op:
            ent = self._entity(path)
            now = self._now()
            out = []
            for token in lock_tokens:
                key = lock_key_of(token)
                msg = self.locked_message(ent, key, None, None, now)
                owner = msg.lock_owner
                if ent.requires_session and owner is not None and owner.session is not None:
                    out.append(owner.session.locked_until_ms)
                    continue
                out.append(self._messages.renew(ent, msg, key, now))
            return out


@dataclass(slots=True)
class _Held:
    """What a settlement may change of a locked message (undo_point)."""

    lock_key: LockKey
    lock_owner: Receiver | None
    locked_until_ms: int | None
    state: MessageState
    delivery_count: int
    application_properties: dict[str, Any]
    dead_letter_reason: str | None
    dead_letter_description: str | None
    dead_letter_source: str | None
    expires_at_ms: int | None

    @classmethod
    def of(cls, msg: BrokerMessage) -> _Held:
        assert msg.lock_key is not None
        return cls(msg.lock_key, msg.lock_owner, msg.locked_until_ms, msg.state, msg.delivery_count,
                   dict(msg.application_properties), msg.dead_letter_reason, msg.dead_letter_description,
                   msg.dead_letter_source, msg.expires_at_ms)

    def restore(self, msg: BrokerMessage) -> None:
        msg.lock_key, msg.lock_owner, msg.locked_until_ms = self.lock_key, self.lock_owner, self.locked_until_ms
        msg.state, msg.delivery_count = self.state, self.delivery_count
        msg.application_properties = dict(self.application_properties)
        msg.dead_letter_reason, msg.dead_letter_description = self.dead_letter_reason, self.dead_letter_description
        msg.dead_letter_source, msg.expires_at_ms = self.dead_letter_source, self.expires_at_ms
