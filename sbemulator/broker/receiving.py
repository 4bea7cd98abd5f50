"""The receiving side of the broker's message flow: receivers opened (plain, on a session, on the next
available session), messages taken under lock or received and deleted, deferred messages received by
sequence number, peeks, lock renewal, and the locks a closing receiver gives back (in slices when they
are many). ``MessageFlow`` takes these methods from ``ReceiveSide``.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from sbemulator.descriptions import STATUS_DISABLED, STATUS_RECEIVE_DISABLED

from ..model import (
    BrokerMessage,
    Delivery,
    LockKey,
    MessageState,
    ReceiveMode,
)
from .entity import DEAD_LETTER, SUBSCRIPTION, TOPIC, TRANSFER_DEAD_LETTER, Entity
from .errors import (
    BrokerError,
    EntityDisabledError,
    InvalidOperationError,
    MessageNotFoundError,
    QuotaExceededError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)
from .paging import NO_EXPIRY
from .receiver import Receiver, ReceiverOps
from .sessions import Sessions
from .timers import LockExpiry, LockReturn, TakeExpiry, Timers
from .wakeups import Operation, Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

_BY_SEQUENCE = operator.attrgetter("sequence_number")
_RECEIVE_SUSPENDED = frozenset({STATUS_DISABLED, STATUS_RECEIVE_DISABLED})


class ReceiveSide:
    """The receiving part of ``MessageFlow`` (a base class of it: one object)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the flow (flow.py)
        store: Store
        receiver_ops: ReceiverOps
        _sessions: Sessions
        _timers: Timers
        _wakeups: Wakeups
        _entity: Callable[[str], Entity]
        _op: Operation
        _return_slice: int
        _lock_keys: list[tuple[LockKey, bytes]]

        def _now(self) -> int: ...

        def _new_lock_key(self) -> tuple[LockKey, bytes]: ...

        def remove(self, ent: Entity, msg: BrokerMessage) -> None: ...

        def _pop(self, ent: Entity, heap: list[int]) -> BrokerMessage | None: ...

        def expire(self, ent: Entity, msg: BrokerMessage, now: int) -> None: ...

        def lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None: ...

        def activate(self, target: Entity, msg: BrokerMessage, now: int, stored: bool) -> None: ...

    # ================================================================= receiving
    def open_receiver(
        self,
        path: str,
        mode: ReceiveMode,
        on_available: Callable[[], None],
        session_id: str | None = None,
        next_available_session: bool = False,
        max_receivers: int | None = None,
    ) -> Receiver:
        """Attach a receiver. Session entities need ``session_id`` or ``next_available_session``;
        a specific session is locked here (SessionCannotBeLockedError if someone holds it).

        ``max_receivers`` bounds the concurrent receive requests on the entity, a topic's subscriptions
        counted together (Service Bus quotas page, "Number of concurrent receive requests on a queue, topic,
        or subscription entity": 5,000, "subsequent receive requests are rejected"): QuotaExceededError."""
        with self._op:
            ent = self._entity(path)
            if ent.kind == TOPIC:
                raise InvalidOperationError(f"Cannot receive from topic '{ent.path}'; use a subscription.")
            self._check_receive_status(ent)
            if max_receivers is not None:
                _check_receivers(ent, max_receivers)
            wants_session = session_id is not None or next_available_session
            if ent.requires_session and not wants_session:
                raise InvalidOperationError(
                    "It is not possible for an entity that requires sessions to create a non-sessionful "
                    "message receiver."
                )
            if wants_session and not ent.requires_session:
                raise InvalidOperationError(
                    f"It is not possible for a session receiver to receive from '{ent.path}': the entity "
                    "does not require sessions."
                )
            r = Receiver(
                self.receiver_ops, ent, mode, on_available, session_id, next_available_session and session_id is None
            )
            if session_id is not None:
                s = ent.sessions.get(session_id)
                now = self._now()
                if s is not None and s.owner is not None and s.locked_until_ms > now:
                    raise SessionCannotBeLockedError(
                        f"The requested session '{session_id}' cannot be accepted. It may be locked by "
                        "another receiver."
                    )
                if s is not None and s.owner is not None:
                    self._sessions.lose_session(ent, s, now)
                self._sessions.lock_session(ent, ent.session(session_id), r, now)
            ent.receivers[id(r)] = r
            if not ent.requires_session:
                ent.waiting[id(r)] = r
            elif r.next_available_session and r.session is None:
                ent.seekers[id(r)] = r
            if not ent.requires_session or r.session is not None:
                self._wakeups.notify_one(ent, r)
            return r

    @staticmethod
    def _check_receive_status(ent: Entity) -> None:
        """"Suspend and reactivate messaging entities": no receiving from a Disabled or ReceiveDisabled
        queue or subscription (their dead-letter queues stay readable)."""
        if ent.status in _RECEIVE_SUSPENDED:
            raise EntityDisabledError(
                f"Messaging entity '{ent.path}' is currently disabled for receiving (status {ent.status})."
            )

    def take(self, r: Receiver, max_count: int) -> list[Delivery]:
        with self._op:
            ent = r.entity
            if ent.requires_session:
                if r.session is None:
                    return []
                heap = r.session.heap
                if r.session.locked_until_ms <= self._now():
                    self._sessions.lose_session(ent, r.session, self._now())
                    raise SessionLockLostError(f"The session lock on {ent.path} was lost.")
            else:
                heap = ent.available
            now = ent.active_ms = self._now()  # a receive is use (AutoDeleteOnIdle)
            out: list[Delivery] = []
            peek_lock = r.mode == ReceiveMode.PEEK_LOCK
            # The locks of one take end together: one timer for all of them, not one per message.
            locks: list[BrokerMessage] | None = [] if r.session is None else None
            while len(out) < max_count:
                msg = self._pop(ent, heap)
                if msg is None:
                    break
                if msg.expires_at_ms is not None and msg.expires_at_ms <= now:
                    self.expire(ent, msg, now)
                    continue
                count_delivery(ent, msg)
                if peek_lock:
                    out.append(self.lock_message(ent, msg, r, now, locks))
                else:
                    self.remove(ent, msg)
                    out.append(Delivery(msg, None, None, header_count(ent, msg)))
            if locks:
                self._timers.add(TakeExpiry(now + ent.lock_duration_ms, ent, self, locks))
            if out:
                # Fairness: the receiver just served is woken last by the next message.
                waiting = ent.waiting
                rid = id(r)
                if waiting.pop(rid, None) is not None:
                    waiting[rid] = r
            return out

    def lock_message(self, ent: Entity, msg: BrokerMessage, owner: Receiver | None, now: int,
                      locks: list[BrokerMessage] | None = None) -> Delivery:
        """Lock ``msg`` for ``owner``. Its expiry timer is its own, or, given ``locks``, the one the
        caller sets for all the locks it appended there (they share ``now`` and so their deadline)."""
        keys = self._lock_keys
        key, token = keys.pop() if keys else self._new_lock_key()
        msg.lock_key = key
        msg.lock_owner = owner
        ent.locks[key] = msg
        if owner is not None:
            owner.locks[key] = None
        session = owner.session if owner is not None else None
        if session is not None:
            msg.locked_until_ms = session.locked_until_ms
        else:
            msg.locked_until_ms = now + ent.lock_duration_ms
            if locks is None:
                self._timers.add(LockExpiry(msg.locked_until_ms, ent, self, msg, key))
            else:
                locks.append(msg)
        self.store.update_message(ent.key, msg)
        return Delivery(msg, key, msg.locked_until_ms, header_count(ent, msg), token)

    def receive_deferred(
        self, path: str, sequence_numbers: Iterable[int], mode: ReceiveMode, session_id: str | None = None
    ) -> list[Delivery]:
        """$management receive-by-sequence-number for deferred messages (all or nothing)."""
        with self._op:
            ent = self._entity(path)
            self._check_receive_status(ent)
            now = ent.active_ms = self._now()
            found = []
            for seq in sequence_numbers:
                msg = ent.messages.get(seq)
                if (
                    msg is None
                    or msg.state != MessageState.DEFERRED
                    or msg.locked
                    or (session_id is not None and msg.session_id != session_id)
                ):
                    raise MessageNotFoundError(
                        f"Failed to lock one or more specified messages: the deferred "
                        f"message with sequence number {seq} was not found."
                    )
                found.append(msg)
            # "Message deferral": a deferred message is not expired until a receive by sequence number
            # asks for it; then an expired one is dead-lettered (or dropped) instead of delivered.
            expired = [m for m in found if m.expires_at_ms is not None and m.expires_at_ms <= now]
            if expired:
                for msg in expired:
                    self.expire(ent, msg, now)
                raise MessageNotFoundError(
                    f"Failed to lock one or more specified messages: the deferred message with sequence "
                    f"number {expired[0].sequence_number} has expired."
                )
            out = []
            for msg in found:
                count_delivery(ent, msg)
                if mode == ReceiveMode.PEEK_LOCK:
                    out.append(self.lock_message(ent, msg, None, now))
                else:
                    self.remove(ent, msg)
                    out.append(Delivery(msg, None, None, header_count(ent, msg)))
            return out

    def peek(
        self, path: str, from_sequence_number: int, count: int, session_id: str | None = None
    ) -> list[BrokerMessage]:
        """Messages in every state from a sequence number on; no lock, no delivery-count change.
        Page through an entity with ``from_sequence_number = last.sequence_number + 1``; ``path`` may be
        a sub-queue (``q/$DeadLetterQueue``, ``t/Subscriptions/s/$DeadLetterQueue``). The messages are
        the broker's own objects: read them, do not change them."""
        ent = self._entity(path)
        ent.active_ms = self._now()  # browsing is use (AutoDeleteOnIdle)
        if count <= 0:
            return []
        if session_id is None:
            seqs = heapq.nsmallest(count, (s for s in ent.messages if s >= from_sequence_number))
        else:
            seqs = heapq.nsmallest(
                count,
                (
                    s
                    for s, m in ent.messages.items()
                    if s >= from_sequence_number and m.session_id == session_id
                ),
            )
        cold = ent.cold
        if session_id is None and cold is not None:
            entries = cold.from_seq(from_sequence_number, count)
            if entries:
                return self._peek_with_paged(ent, seqs, entries, count)
        return [ent.messages[s] for s in seqs]

    def _peek_with_paged(
        self, ent: Entity, seqs: list[int], entries: list[tuple[int, int, int, int, int]], count: int
    ) -> list[BrokerMessage]:
        """Peek across the messages in memory (``seqs``) and paged-out ones (``entries``): the latter are
        read from the store for the answer only, and stay paged out."""
        paged = {e[0]: e for e in entries}
        chosen = sorted({*seqs, *paged})[:count]
        wanted = [paged[s] for s in chosen if s in paged]
        stored = self.store.read_messages(ent.key, wanted[0][0], wanted[-1][0]) if wanted else {}
        out = []
        for s in chosen:
            if s not in paged:
                out.append(ent.messages[s])
                continue
            msg = stored.get(s)
            if msg is None:
                continue
            if msg.sequence_number != s:  # decoded from the store (not the pending write's own object)
                _, count_, enqueued, expires, _size = paged[s]
                msg.sequence_number = s
                msg.delivery_count = count_
                msg.enqueued_time_ms = enqueued
                msg.expires_at_ms = None if expires == NO_EXPIRY else expires
            out.append(msg)
        return out

    def renew(self, ent: Entity, msg: BrokerMessage, key: LockKey, now: int) -> int:
        """A plain lock lasts another lock duration from ``now``; returns its new expiry."""
        msg.locked_until_ms = now + ent.lock_duration_ms
        self._timers.add(LockExpiry(msg.locked_until_ms, ent, self, msg, key))
        return msg.locked_until_ms

    # ================================================================= receivers closing
    def close_receiver(self, r: Receiver) -> None:
        with self._op:
            if r.closed:
                return
            r.closed = True
            ent = r.entity
            rid = id(r)
            ent.receivers.pop(rid, None)
            ent.waiting.pop(rid, None)
            ent.seekers.pop(rid, None)
            self._wakeups.forget(r)
            now = self._now()
            s = r.session
            if s is None:
                # A plain receiver's locks outlive it, as on Service Bus: each message stays locked until
                # its lock lapses (then it returns with the delivery counted) or is renewed, and can be
                # settled by its lock token over $management meanwhile (docs/emulator.md, "Where the
                # docs are terse").
                self.orphan_locks(ent, r)
                return
            # "Message sessions", impact of delivery count: closing a session with messages locked but
            # not settled does not count a delivery (a lapsed session lock does, even if its timer has
            # not run yet): the messages' locks are the session's, which the close gives up.
            counted = s.locked_until_ms <= now
            if len(r.locks) > self._return_slice:
                self._return_in_slices(ent, r, now, counted)
                return
            self.return_locks(ent, r, now, counted=counted)
            self._sessions.release_session(ent, r)

    def _return_in_slices(self, ent: Entity, r: Receiver, now: int, counted: bool) -> None:
        """A session receiver closing with many locks (100,000 took a second of CPU in one go): its locks
        are returned by timers due now, ``Slices.return_locks`` at a time, between which the event loop serves
        every other connection; the session stays the closed receiver's until the last slice, so the
        next receiver of the session gets its messages in order. Here only the lock keys are cut into
        slices (sorting 100,000 messages took 200 ms), in the order they were taken, so that a slice is
        about a run of sequence numbers; ``r.locks`` is emptied, so a session lock lapsing meanwhile has
        nothing left to return."""
        keys = list(r.locks)
        r.locks.clear()
        timers, sessions = self._timers, self._sessions
        size = self._return_slice
        for start in range(0, len(keys), size):
            last = start + size >= len(keys)
            timers.add(LockReturn(now, ent, self, keys[start:start + size], r, counted,
                                  (lambda: sessions.release_session(ent, r)) if last else None))

    def end_receivers(self, ent: Entity, error: BrokerError) -> None:
        """The entity stops serving its receivers: their locks end uncounted (the clients did nothing wrong)
        and each one's next take raises ``error``, so that its link is detached with it."""
        now = self._now()
        for r in list(ent.receivers.values()):
            if r.closed or r.ended_by is not None:
                continue
            r.ended_by = error
            self.return_locks(ent, r, now, counted=False)
            self._wakeups.wake(r)

    @staticmethod
    def orphan_locks(ent: Entity, r: Receiver) -> None:
        """The receiver is gone, its locks stay, as a lock taken over $management does. Its messages keep
        the closed receiver as their ``lock_owner``: only a session's lock compares its owner (and a
        session receiver's close returns its locks instead), so nothing reads it, and no pass over every
        lock is needed (50,000 of them took 50 ms in one callback, ~1 us each on a loaded machine). What
        the closed receiver still holds is cut, so its messages do not keep its link and connection."""
        r.locks = {}
        r.on_available = _nothing

    def return_locks(self, ent: Entity, r: Receiver, now: int, counted: bool = True) -> None:
        msgs = sorted((ent.locks[t] for t in r.locks if t in ent.locks), key=_BY_SEQUENCE)
        for msg in msgs:
            self.lock_ended(ent, msg, now, counted=counted)
        r.locks.clear()


def _nothing() -> None:
    """A closed receiver's wake-up: it is never woken (see MessageFlow.orphan_locks)."""


def _check_receivers(ent: Entity, most: int) -> None:
    """Refuse one more receiver once ``most`` are attached (on a subscription: on all of its topic's)."""
    scope = ent.parent if ent.kind == SUBSCRIPTION and ent.parent is not None else ent
    topic = scope.kind == TOPIC
    count = sum(len(s.receivers) for s in scope.subscriptions.values()) if topic else len(ent.receivers)
    if count >= most:
        raise QuotaExceededError(
            f"The number of concurrent receive requests on '{scope.path}' has reached its limit of {most:,}: "
            "close a receiver first (Service Bus quotas: concurrent receive requests per entity)."
        )


# The container kinds of the two dead-letter sub-queues (broker/entity.py), where a receive counts no delivery.
DEAD_LETTER_KINDS = frozenset({DEAD_LETTER, TRANSFER_DEAD_LETTER})


def count_delivery(ent: Entity, msg: BrokerMessage) -> None:
    """A receiver takes ``msg``: one more delivery, except in a dead-letter queue, where the count
    stays what it was when the message was dead-lettered."""
    if ent.kind not in DEAD_LETTER_KINDS:
        msg.delivery_count += 1


def header_count(ent: Entity, msg: BrokerMessage) -> int:
    """The header delivery-count of a delivery of ``msg`` from ``ent``: the deliveries before this one,
    or in a dead-letter queue the count it was dead-lettered with."""
    return msg.delivery_count if ent.kind in DEAD_LETTER_KINDS else msg.delivery_count - 1
