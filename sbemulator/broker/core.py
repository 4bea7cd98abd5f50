"""The message broker: entities, locks, delivery counts, TTL, scheduling, forwarding, sessions.

Synchronous and single-threaded: the asyncio server calls it from the event loop. It does no
I/O except through the :class:`~sbemulator.store.base.Store` and reads time only from the
injected ``clock`` (seconds, like ``time.time``), so tests move time without sleeping.

Server-facing API (see also :class:`~sbemulator.broker.receiver.Receiver`)::

    broker = Broker(config, store, clock=time.time)
    broker.resolve(path) -> EntityRef                      # EntityNotFoundError
    broker.send(path, [IncomingMessage, ...])              # all-or-nothing per call
    broker.open_receiver(path, ReceiveMode.PEEK_LOCK, on_available, session_id=None,
                         next_available_session=False) -> Receiver
    broker.commit()                                        # group commit, before sending accepts
    broker.next_deadline() -> float | None                 # seconds on the clock's scale
    broker.on_deadline_changed = callback                  # a new earliest timer exists
    broker.tick()                                          # run every timer that is due
    # $management
    broker.peek(path, from_sequence_number, count, session_id=None) -> [BrokerMessage]
    broker.renew_lock(path, [UUID]) -> [locked_until_ms]
    broker.update_disposition(path, [UUID], "completed"|"abandoned"|"defered"|"suspended", ...)
    broker.receive_deferred(path, [seq], mode, session_id=None) -> [Delivery]
    broker.schedule(path, [IncomingMessage]) -> [seq]
    broker.cancel_scheduled(path, [seq])
    broker.get_session_state(path, sid) / set_session_state(path, sid, bytes | None)
    broker.renew_session_lock(path, sid) -> locked_until_ms
    broker.list_sessions(path, skip=0, top=...) -> [sid]
    broker.add_rule / set_rule / remove_rule / list_rules (subscriptions)
    # management plane (persisted; see topology for what survives a restart, inspection for the rest)
    broker.create_queue / create_topic / create_subscription / update_entity / delete_entity
    broker.entity_views(kind=None, topic=None) / entity_view(path) / find_entity(path) -> EntityView
    broker.counts(path) / session_views(path) / now_ms()
    broker.purge(path, sub_queues=True) / reset() / resubmit_dead_lettered(path, seqs=None) -> Resubmission

Module dependencies point one way: ``core`` -> ``topology``, ``sessions``, ``inspection`` (mixins
that declare the broker helpers they use and import nothing from ``core``) -> ``receiver`` ->
``entity`` -> ``model``; ``errors``, ``views`` and ``rules`` (-> ``filters``) are leaves
(tests/unit/test_broker_structure.py checks it).

Delivery counts follow Service Bus: ``BrokerMessage.delivery_count`` counts deliveries made and is
incremented when a receiver takes the message (peek-lock or receive-and-delete, also
receive-by-sequence-number). The AMQP header carries the PREVIOUS deliveries
(``Delivery.header_delivery_count`` = ``delivery_count - 1``), which is what Service Bus sends: the
Python SDK shows 0 on a first receive, .NET adds one. A message whose lock ends by abandon, lock
expiry, session-lock loss or (plain) receiver close while ``delivery_count >= MaxDeliveryCount`` moves
to the dead-letter queue with reason ``MaxDeliveryCountExceeded``: with MaxDeliveryCount=3 a message
can be received three times. ``release`` (the client's ``released`` outcome) and closing a session
receiver ("Message sessions", impact of delivery count) un-count the delivery.

Sequence numbers are per queue and per subscription (each subscription numbers the copies it
receives from 1, as Service Bus documents); a topic numbers only the scheduled messages it holds
until they fan out (the numbers ``schedule`` returns for cancelling). A scheduled message gets a new
number when it becomes active ("Message sequencing and timestamps"). Dead-lettered messages keep
their number, auto-forwarded ones get a new one in the target with ``enqueue_sequence_number`` =
the original.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sbemulator.config import STATUS_DISABLED, STATUS_RECEIVE_DISABLED, STATUS_SEND_DISABLED, NamespaceConfig

from .entity import (
    DEAD_LETTER,
    NO_LIMIT,
    QUEUE,
    TIMER_LOCK,
    TIMER_LOCKS,
    TIMER_SCHEDULED,
    TIMER_SESSION,
    TIMER_TTL,
    TOPIC,
    TRANSFER_DEAD_LETTER,
    Entity,
    EntityRef,
    Session,
)
from .errors import (
    ArgumentError,
    ArgumentOutOfRangeError,
    BrokerError,
    EntityDisabledError,
    EntityNotFoundError,
    InvalidOperationError,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    RuleError,
    SessionCannotBeLockedError,
    SessionLockLostError,
    SessionRequiredError,
)
from .inspection import InspectionMixin
from .model import (
    MAX_HEADER_SIZE,
    MAX_ID_LENGTH,
    MAX_PROPERTY_SIZE,
    BrokerMessage,
    Delivery,
    IncomingMessage,
    LockKey,
    MessageState,
    ReceiveMode,
    lock_key_of,
)
from .receiver import Receiver
from .rules import FilterEvaluationError
from .sessions import SessionsMixin
from .topology import TopologyMixin

if TYPE_CHECKING:
    from sbemulator.store.base import Store

log = logging.getLogger(__name__)

MAX_FORWARD_HOPS = 4
REASON_MAX_DELIVERY = "MaxDeliveryCountExceeded"
REASON_TTL = "TTLExpiredException"
# The system's dead-letter reasons and descriptions, as "Dead-letter queues" lists them.
REASON_SESSION_ID_NULL = "Session ID is null."
DESC_SESSION_ID_NULL = "Session enabled entity doesn't allow a message whose session identifier is null."
REASON_MAX_HOPS = "MaxTransferHopCountExceeded"
DESC_MAX_HOPS = (
    "The maximum number of allowed hops when forwarding between queues has been exceeded. "
    f"This value is set to {MAX_FORWARD_HOPS}."
)
REASON_FILTER_EXCEPTION = "FilterEvaluationException"
REASON_TRANSFER = "MessageTransferFailed"  # a forwarding destination that does not exist
# Set on the copy a rule with an action produced ("Topic filters and actions").
RULE_NAME = "RuleName"

_LOCK, _TTL, _SCHED, _SESSION, _LOCKS = TIMER_LOCK, TIMER_TTL, TIMER_SCHEDULED, TIMER_SESSION, TIMER_LOCKS
_DUP_PRUNE_INTERVAL_MS = 60_000
# Byte maps that set a random UUID's version (4) and variant (RFC 4122) bits.
_VERSION_4 = bytes(b & 0x0F | 0x40 for b in range(256))
_VARIANT_RFC_4122 = bytes(b & 0x3F | 0x80 for b in range(256))
_SEND_SUSPENDED = frozenset({STATUS_DISABLED, STATUS_SEND_DISABLED})
_RECEIVE_SUSPENDED = frozenset({STATUS_DISABLED, STATUS_RECEIVE_DISABLED})
_MIN_COMPACT = 8192



class _Operation:
    """The context of a public broker call (one object, reused: the SDK's paths make two calls per
    message, and a generator-based context manager cost more than the settlement it wrapped)."""

    __slots__ = ("_broker",)

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def __enter__(self) -> None:
        self._broker._depth += 1

    def __exit__(self, *exc: object) -> None:
        broker = self._broker
        broker._depth -= 1
        if broker._depth == 0 and broker._pending and not broker._flushing:
            broker._flush()

class Broker(TopologyMixin, SessionsMixin, InspectionMixin):
    def __init__(self, config: NamespaceConfig, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._entities: dict[str, Entity] = {}  # every addressable container, by lower-case path
        self._timers: list[tuple[int, int, int, Entity, Any, Any]] = []
        self._timer_seq = itertools.count()
        self._compact_at = _MIN_COMPACT
        # Set by the server to wake its timer task when a new timer becomes the earliest one
        # (called synchronously; it must not call back into the broker).
        self.on_deadline_changed: Callable[[], None] | None = None
        self._pending: dict[int, Receiver] = {}
        self._depth = 0
        self._operation = _Operation(self)
        self._lock_keys: list[LockKey] = []
        self._flushing = False
        self._next_dup_prune = 0
        self._init_topology()
        self._load_state()

    # ================================================================= restart
    def _load_state(self) -> None:
        now = self._now()
        for key, last in self.store.load_sequences().items():
            ent = self._entities.get(key)
            if ent is not None:
                ent.last_sequence = max(ent.last_sequence, last)
        for key, msg in self.store.load_messages():
            ent = self._entities.get(key)
            if ent is None:
                continue
            owner = _sequence_owner(ent)
            owner.last_sequence = max(owner.last_sequence, msg.sequence_number)
            self._insert(ent, msg)
            if msg.state == MessageState.SCHEDULED:
                self._timer(msg.scheduled_enqueue_time_ms or 0, _SCHED, ent, msg)
            else:
                if msg.state == MessageState.ACTIVE:
                    self._queue(ent, msg)
                if msg.expires_at_ms is not None:
                    self._timer(msg.expires_at_ms, _TTL, ent, msg)
        for key, sid, state in self.store.load_session_states():
            ent = self._entities.get(key)
            if ent is not None:
                ent.session(sid).state = bytes(state)
        for key, mid, expires in self.store.load_duplicates(now):
            ent = self._entities.get(key)
            if ent is not None:
                ent.duplicates[mid] = expires

    # ================================================================= plumbing
    def _now(self) -> int:
        return int(self.clock() * 1000)

    def _new_lock_key(self) -> LockKey:
        """The key of a random (version 4) lock token. ``uuid4()`` makes a getrandom system call per
        token, one per delivered message; the pool makes one per 256, and sets the version and variant
        bits where ``bytes_le`` has them without building a UUID."""
        keys = self._lock_keys
        if not keys:
            raw = bytearray(os.urandom(16 * 256))
            raw[7::16] = raw[7::16].translate(_VERSION_4)  # byte 6 of the UUID, 7 of bytes_le
            raw[8::16] = raw[8::16].translate(_VARIANT_RFC_4122)
            keys.extend([bytes(raw[i:i + 16]) for i in range(0, len(raw), 16)])
        return keys.pop()

    def _op(self) -> _Operation:
        """Wrap every public call: receiver notifications run after the state is consistent."""
        return self._operation

    def _flush(self) -> None:
        self._flushing = True
        try:
            while self._pending:
                rid = next(iter(self._pending))
                r = self._pending.pop(rid)
                if not r.closed:
                    try:
                        r.on_available()
                    except Exception:  # one failing link must not starve the others
                        log.exception("on_available callback of %r failed", r)
        finally:
            self._flushing = False

    def _notify(self, ent: Entity, session: Session | None = None) -> None:
        if not ent.receivers:
            return
        if session is not None and session.owner is not None:
            self._pending[id(session.owner)] = session.owner
            return
        for rid, r in ent.receivers.items():
            if session is None or (r.session is None and r.next_available_session):
                self._pending[rid] = r

    def _timer(self, deadline_ms: int, kind: int, ent: Entity, obj: Any, extra: Any = None) -> None:
        entry = (deadline_ms, next(self._timer_seq), kind, ent, obj, extra)
        heapq.heappush(self._timers, entry)
        if len(self._timers) > self._compact_at:
            self._compact_timers()
        if self.on_deadline_changed is not None and self._timers[0] is entry:
            self.on_deadline_changed()

    def _compact_timers(self) -> None:
        """Drop stale timers (settled messages, renewed locks): they would pin message bodies in memory
        until their deadline. Amortised O(1) per timer because the threshold doubles with the live size."""
        live = [t for t in self._timers if self._timer_valid(t)]
        heapq.heapify(live)
        self._timers[:] = live  # in place: tick() holds a reference to the list
        self._compact_at = max(_MIN_COMPACT, 2 * len(live))

    def _entity(self, path: str) -> Entity:
        key = _normalize(path)
        ent = self._entities.get(key)
        if ent is None:
            raise EntityNotFoundError(f"The messaging entity '{path}' could not be found.")
        return ent

    def resolve(self, path: str) -> EntityRef:
        """Case-insensitive; accepts "q", "t", "t/Subscriptions/s", "<x>/$DeadLetterQueue",
        "<x>/$Transfer/$DeadLetterQueue" (a leading "/" or "amqps://host/" prefix is stripped)."""
        return self._entity(path).ref()

    def entity_paths(self) -> list[str]:
        return [e.path for e in self._entities.values()]

    def commit(self) -> None:
        """Make every change so far durable (one transaction)."""
        self.store.commit()

    def close(self) -> None:
        self.store.close()

    # --- container primitives ----------------------------------------------------------------
    def _insert(self, ent: Entity, msg: BrokerMessage) -> None:
        ent.messages[msg.sequence_number] = msg
        if ent.requires_session and msg.session_id is not None:
            ent.session(msg.session_id).count += 1

    def _queue(self, ent: Entity, msg: BrokerMessage) -> None:
        """Make an active, unlocked message available to receivers."""
        msg.queued = True
        if ent.requires_session and msg.session_id is not None:
            s = ent.session(msg.session_id)
            heapq.heappush(s.heap, msg.sequence_number)
            self._notify(ent, s)
        else:
            heapq.heappush(ent.available, msg.sequence_number)
            self._notify(ent)

    def _remove(self, ent: Entity, msg: BrokerMessage) -> None:
        if ent.messages.pop(msg.sequence_number, None) is None:
            return
        msg.queued = False
        self._unlock(ent, msg)
        if ent.requires_session and msg.session_id is not None:
            s = ent.sessions.get(msg.session_id)
            if s is not None:
                s.count -= 1
                ent.forget_session_if_idle(s)
        self.store.delete_message(ent.key, msg.sequence_number)

    def _unlock(self, ent: Entity, msg: BrokerMessage) -> None:
        key = msg.lock_key
        if key is not None:
            ent.locks.pop(key, None)
            if msg.lock_owner is not None:
                msg.lock_owner.locks.discard(key)
        msg.lock_key = None
        msg.lock_owner = None
        msg.locked_until_ms = None

    @staticmethod
    def _pop(ent: Entity, heap: list[int]) -> BrokerMessage | None:
        messages = ent.messages
        while heap:
            seq = heapq.heappop(heap)
            msg = messages.get(seq)
            if msg is not None and msg.queued:
                msg.queued = False
                return msg
        return None

    @staticmethod
    def _cap_ttl(ent: Entity, msg: BrokerMessage) -> int | None:
        """The entity's DefaultMessageTimeToLive is a ceiling, applied silently ("Message expiration"):
        the message carries the effective TTL from here on, so receivers see it (and ExpiresAtUtc)."""
        ttl = msg.time_to_live_ms if msg.time_to_live_ms and msg.time_to_live_ms > 0 else None
        if ent.ttl_ms is not None and (ttl is None or ttl > ent.ttl_ms):
            ttl = msg.time_to_live_ms = ent.ttl_ms
        return ttl

    def _set_expiry(self, ent: Entity, msg: BrokerMessage) -> None:
        ttl = self._cap_ttl(ent, msg)
        msg.expires_at_ms = None if ttl is None else msg.enqueued_time_ms + ttl
        if msg.expires_at_ms is not None:
            self._timer(msg.expires_at_ms, _TTL, ent, msg)

    # ================================================================= sending
    def send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Accept a batch (all or nothing). Duplicates (by MessageId, within the window) and topic
        messages no subscription wants are dropped silently, as Service Bus does."""
        with self._op():
            ent, batch = self._check_send(path, messages)
            now = self._now()
            for incoming in batch:
                if self._is_duplicate(ent, incoming, now):
                    continue
                self._accept(ent, BrokerMessage.from_incoming(incoming), now)

    def check_send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Raise what :meth:`send` would refuse these messages with, without sending them (a
        transaction checks its staged sends before applying any)."""
        with self._op():
            self._check_send(path, messages)

    def schedule(self, path: str, messages: Iterable[IncomingMessage]) -> list[int]:
        """$management schedule-message: returns the sequence numbers (usable for cancel). "Duplicate
        detection": scheduled messages are included; a duplicate is dropped, its send still succeeds and
        gets a number (that no message holds, so cancelling it finds nothing)."""
        with self._op():
            ent, batch = self._check_send(path, messages)
            now = self._now()
            return [
                self._next_sequence(ent) if self._is_duplicate(ent, m, now)
                else self._accept(ent, BrokerMessage.from_incoming(m), now)
                for m in batch
            ]

    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        with self._op():
            ent = self._entity(path)
            found = []
            for seq in sequence_numbers:
                msg = ent.messages.get(seq)
                if msg is None or msg.state != MessageState.SCHEDULED:
                    raise MessageNotFoundError(
                        f"The scheduled message with sequence number {seq} was not found."
                    )
                found.append(msg)
            for msg in found:
                self._remove(ent, msg)

    def _check_send(
        self, path: str, messages: Iterable[IncomingMessage]
    ) -> tuple[Entity, list[IncomingMessage]]:
        ent = self._entity(path)
        if ent.kind not in (QUEUE, TOPIC):
            raise InvalidOperationError(
                f"Cannot send to '{ent.path}': sending is only allowed to queues and topics."
            )
        if ent.status in _SEND_SUSPENDED:
            raise EntityDisabledError(
                f"Messaging entity '{ent.path}' is currently disabled for sending (status {ent.status})."
            )
        batch = list(messages)
        for m in batch:
            if m.size > ent.max_message_size:
                raise MessageSizeExceededError(
                    f"The received message (size {m.size} bytes) exceeds the limit "
                    f"({ent.max_message_size} bytes) currently allowed on '{ent.path}'."
                )
            if m.header_size > MAX_PROPERTY_SIZE:  # below that, neither property quota can be exceeded
                self._check_property_sizes(m)
            if len(m.message_id or "") > MAX_ID_LENGTH or len(m.session_id or "") > MAX_ID_LENGTH:
                self._refuse_id_lengths(m)
            if ent.requires_session and not m.session_id:
                raise SessionRequiredError(
                    "The SessionId was not set on a message, and it cannot be sent to the entity. "
                    "Entities that have session support enabled can only receive messages that have the "
                    "SessionId set to a valid value."
                )
        return ent, batch

    @staticmethod
    def _check_property_sizes(m: IncomingMessage) -> None:
        """"Service Bus quotas", Message property size: refused before anything of the batch is stored."""
        if m.largest_property is not None and m.largest_property[1] > MAX_PROPERTY_SIZE:
            name, size = m.largest_property
            raise ArgumentError(
                f"SerializationException: the property '{name}' ({size} bytes) exceeds the maximum message "
                f"property size of {MAX_PROPERTY_SIZE // 1024} KB."
            )
        if m.header_size > MAX_HEADER_SIZE:
            raise ArgumentError(
                f"SerializationException: the message header ({m.header_size} bytes: system and user "
                f"properties) exceeds the maximum of {MAX_HEADER_SIZE // 1024} KB."
            )

    @staticmethod
    def _refuse_id_lengths(m: IncomingMessage) -> None:
        """"Service Bus quotas": a message ID and a session ID are at most 128 characters."""
        for what, value in (("MessageId", m.message_id), ("SessionId", m.session_id)):
            if value is not None and len(value) > MAX_ID_LENGTH:
                raise ArgumentOutOfRangeError(
                    f"The {what} is {len(value)} characters long; the maximum is {MAX_ID_LENGTH}."
                )

    def _is_duplicate(self, ent: Entity, m: IncomingMessage, now: int) -> bool:
        if not ent.requires_duplicate_detection or m.message_id is None:
            return False
        dups = ent.duplicates
        while dups:
            mid, expires = next(iter(dups.items()))
            if expires > now:
                break
            del dups[mid]
        if now >= self._next_dup_prune:
            self._next_dup_prune = now + _DUP_PRUNE_INTERVAL_MS
            self.store.prune_duplicates(now)
        mid = str(m.message_id)
        if mid in dups:
            return True
        expires = now + ent.duplicate_window_ms
        dups[mid] = expires
        self.store.add_duplicate(ent.key, mid, expires)
        return False

    def _next_sequence(self, ent: Entity) -> int:
        ent.last_sequence += 1
        self.store.set_sequence(ent.key, ent.last_sequence)
        return ent.last_sequence

    def _accept(self, target: Entity, msg: BrokerMessage, now: int) -> int:
        """A new message arrives at a queue or topic (from a sender or by forwarding)."""
        msg.sequence_number = self._next_sequence(target)
        scheduled = msg.scheduled_enqueue_time_ms
        if scheduled is not None and scheduled > now:
            msg.state = MessageState.SCHEDULED
            msg.enqueued_time_ms = scheduled
            self._insert(target, msg)
            self.store.put_message(target.key, msg)
            self._timer(scheduled, _SCHED, target, msg)
        else:
            self._activate(target, msg, now, stored=False)
        return msg.sequence_number

    def _activate(self, target: Entity, msg: BrokerMessage, now: int, stored: bool) -> None:
        """``stored``: a scheduled message already held by ``target`` whose time has come."""
        msg.state = MessageState.ACTIVE
        msg.enqueued_time_ms = now
        if target.kind == TOPIC:
            if stored:
                self._remove(target, msg)
            # the topic's TTL applies before the rules run, so sys.TimeToLive/ExpiresAtUtc are known to them
            self._cap_ttl(target, msg)
            self._fan_out(target, msg, now)
        elif target.forward_to:
            if stored:
                self._remove(target, msg)
            self._cap_ttl(target, msg)
            self._forward(target, msg, target.forward_to, now)
        else:
            if stored:
                # A scheduled message is appended as if enqueued now, with a new sequence number
                # ("Message sequencing and timestamps"): the scheduled one is valid only while scheduled.
                self._remove(target, msg)
                msg.sequence_number = self._next_sequence(target)
            self._insert(target, msg)
            self._set_expiry(target, msg)
            self.store.put_message(target.key, msg)
            self._queue(target, msg)

    def _fan_out(self, topic: Entity, msg: BrokerMessage, now: int) -> None:
        """Copies for every subscription ("Topic filters and actions"): the matching rules without an
        action yield one copy between them; every matching rule with an action yields its own copy,
        with that action applied and the application property ``RuleName`` set to the rule's name."""
        for sub in topic.subscriptions.values():
            copies: list[BrokerMessage] = []
            plain = False
            try:
                for _, rule in sub.rules:
                    if not rule.matches(msg):
                        continue
                    if not rule.has_action:
                        if not plain:
                            plain = True
                            copies.append(msg.copy())
                        continue
                    copy = msg.copy()
                    rule.apply_action(copy)
                    copy.application_properties[RULE_NAME] = rule.name
                    copies.append(copy)
            except FilterEvaluationError as exc:
                if sub.dead_lettering_on_filter_exceptions:
                    copy = msg.copy()
                    copy.sequence_number = self._next_sequence(sub)
                    self._insert(sub, copy)
                    self._dead_letter(sub, copy, REASON_FILTER_EXCEPTION, str(exc), now)
                continue
            for copy in copies:
                self._deliver_to_subscription(sub, copy, now)

    def _deliver_to_subscription(self, sub: Entity, msg: BrokerMessage, now: int) -> None:
        # Every subscription numbers its own messages (a new subscription starts at 1).
        msg.sequence_number = self._next_sequence(sub)
        if sub.requires_session and not msg.session_id:
            self._insert(sub, msg)
            self._dead_letter(sub, msg, REASON_SESSION_ID_NULL, DESC_SESSION_ID_NULL, now)
        elif sub.forward_to:
            self._cap_ttl(sub, msg)
            self._forward(sub, msg, sub.forward_to, now)
        else:
            self._insert(sub, msg)
            self._set_expiry(sub, msg)
            self.store.put_message(sub.key, msg)
            self._queue(sub, msg)

    def _forward(self, source: Entity, msg: BrokerMessage, target_name: str, now: int) -> None:
        """Auto-forward (``msg`` is no longer in ``source``); failures land in the transfer DLQ."""
        target = self._entities.get(target_name.lower())
        reason = problem = None
        if target is None or target.kind not in (QUEUE, TOPIC):
            reason, problem = REASON_TRANSFER, f"The forwarding destination '{target_name}' could not be found."
        elif target.status in _SEND_SUSPENDED:
            reason, problem = REASON_TRANSFER, f"The forwarding destination '{target.path}' is disabled."
        elif msg.hops >= MAX_FORWARD_HOPS:
            reason, problem = REASON_MAX_HOPS, DESC_MAX_HOPS
        elif target.requires_session and not msg.session_id:
            reason, problem = REASON_SESSION_ID_NULL, DESC_SESSION_ID_NULL
        if problem is not None:
            tdlq = source.transfer_dlq
            assert tdlq is not None
            msg.state = MessageState.ACTIVE
            self._mark_dead_lettered(msg, reason, problem)
            msg.expires_at_ms = None
            self._insert(tdlq, msg)
            self.store.put_message(tdlq.key, msg)
            self._queue(tdlq, msg)
            return
        fwd = msg.copy()
        fwd.hops = msg.hops + 1
        # "Messages, payloads, and serialization": the number of the original submission, however many hops
        fwd.enqueue_sequence_number = (
            msg.enqueue_sequence_number if msg.enqueue_sequence_number is not None else msg.sequence_number
        )
        fwd.delivery_count = 0
        fwd.scheduled_enqueue_time_ms = None
        fwd.expires_at_ms = None
        assert target is not None
        self._accept(target, fwd, now)

    # ================================================================= dead-lettering, expiry
    @staticmethod
    def _mark_dead_lettered(msg: BrokerMessage, reason: str | None, description: str | None) -> None:
        msg.dead_letter_reason = reason
        msg.dead_letter_description = description
        if reason is not None:
            msg.application_properties["DeadLetterReason"] = reason
        if description is not None:
            msg.application_properties["DeadLetterErrorDescription"] = description

    def _dead_letter(
        self, ent: Entity, msg: BrokerMessage, reason: str | None, description: str | None, now: int
    ) -> None:
        """Move a message of ``ent`` to its dead-letter queue (or to ForwardDeadLetteredMessagesTo)."""
        if ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER):
            # A dead-letter queue has no dead-letter queue: the message simply stays.
            self._unlock(ent, msg)
            msg.state = MessageState.ACTIVE
            self.store.put_message(ent.key, msg)
            self._queue(ent, msg)
            return
        self._remove(ent, msg)
        msg.state = MessageState.ACTIVE
        self._mark_dead_lettered(msg, reason, description)
        if ent.forward_dead_lettered_to:
            msg.dead_letter_source = ent.path
            self._forward(ent, msg, ent.forward_dead_lettered_to, now)
            return
        dlq = ent.dlq
        assert dlq is not None
        msg.expires_at_ms = None  # dead-lettered messages do not expire
        self._insert(dlq, msg)
        self.store.put_message(dlq.key, msg)
        self._queue(dlq, msg)

    def _expire(self, ent: Entity, msg: BrokerMessage, now: int) -> None:
        if ent.dead_lettering_on_expiration:
            self._dead_letter(ent, msg, REASON_TTL, "The message expired and was dead lettered.", now)
        else:
            self._remove(ent, msg)

    def _lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None:
        """A lock ended without settlement (abandon, expiry, close, session loss, release)."""
        self._unlock(ent, msg)
        if not counted:
            msg.delivery_count = max(0, msg.delivery_count - 1)
        elif msg.delivery_count >= ent.max_delivery_count:
            self._dead_letter(
                ent,
                msg,
                REASON_MAX_DELIVERY,
                f"Message could not be consumed after {ent.max_delivery_count} delivery attempts.",
                now,
            )
            return
        if msg.state == MessageState.ACTIVE and msg.expires_at_ms is not None and msg.expires_at_ms <= now:
            self._expire(ent, msg, now)
            return
        self.store.update_message(ent.key, msg)
        if msg.state == MessageState.ACTIVE:
            self._queue(ent, msg)

    # ================================================================= receiving
    def open_receiver(
        self,
        path: str,
        mode: ReceiveMode,
        on_available: Callable[[], None],
        session_id: str | None = None,
        next_available_session: bool = False,
    ) -> Receiver:
        """Attach a receiver. Session entities need ``session_id`` or ``next_available_session``;
        a specific session is locked here (SessionCannotBeLockedError if someone holds it)."""
        with self._op():
            ent = self._entity(path)
            if ent.kind == TOPIC:
                raise InvalidOperationError(f"Cannot receive from topic '{ent.path}'; use a subscription.")
            self._check_receive_status(ent)
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
                self, ent, mode, on_available, session_id, next_available_session and session_id is None
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
                    self._lose_session(ent, s, now)
                self._lock_session(ent, ent.session(session_id), r, now)
            ent.receivers[id(r)] = r
            if not ent.requires_session or r.session is not None:
                self._notify_one(ent, r)
            return r

    @staticmethod
    def _check_receive_status(ent: Entity) -> None:
        """"Suspend and reactivate messaging entities": no receiving from a Disabled or ReceiveDisabled
        queue or subscription (their dead-letter queues stay readable)."""
        if ent.status in _RECEIVE_SUSPENDED:
            raise EntityDisabledError(
                f"Messaging entity '{ent.path}' is currently disabled for receiving (status {ent.status})."
            )

    def _notify_one(self, ent: Entity, r: Receiver) -> None:
        heap = r.session.heap if r.session is not None else ent.available
        if heap:
            self._pending[id(r)] = r

    def _take(self, r: Receiver, max_count: int) -> list[Delivery]:
        with self._op():
            ent = r.entity
            if ent.requires_session:
                if r.session is None:
                    return []
                heap = r.session.heap
                if r.session.locked_until_ms <= self._now():
                    self._lose_session(ent, r.session, self._now())
                    raise SessionLockLostError(f"The session lock on {ent.path} was lost.")
            else:
                heap = ent.available
            now = self._now()
            out: list[Delivery] = []
            peek_lock = r.mode == ReceiveMode.PEEK_LOCK
            # The locks of one take end together: one timer for all of them, not one per message.
            locks: list[tuple[BrokerMessage, LockKey]] | None = [] if r.session is None else None
            while len(out) < max_count:
                msg = self._pop(ent, heap)
                if msg is None:
                    break
                if msg.expires_at_ms is not None and msg.expires_at_ms <= now:
                    self._expire(ent, msg, now)
                    continue
                msg.delivery_count += 1
                if peek_lock:
                    out.append(self._lock_message(ent, msg, r, now, locks))
                else:
                    self._remove(ent, msg)
                    out.append(Delivery(msg, None, None, msg.delivery_count - 1))
            if locks:
                self._timer(now + ent.lock_duration_ms, _LOCKS, ent, locks)
            return out

    def _lock_message(self, ent: Entity, msg: BrokerMessage, owner: Receiver | None, now: int,
                      locks: list[tuple[BrokerMessage, LockKey]] | None = None) -> Delivery:
        """Lock ``msg`` for ``owner``. Its expiry timer is its own, or, given ``locks``, the one the
        caller sets for all the locks it appended there (they share ``now`` and so their deadline)."""
        keys = self._lock_keys
        key = keys.pop() if keys else self._new_lock_key()
        msg.lock_key = key
        msg.lock_owner = owner
        ent.locks[key] = msg
        if owner is not None:
            owner.locks.add(key)
        session = owner.session if owner is not None else None
        if session is not None:
            msg.locked_until_ms = session.locked_until_ms
        else:
            msg.locked_until_ms = now + ent.lock_duration_ms
            if locks is None:
                self._timer(msg.locked_until_ms, _LOCK, ent, msg, key)
            else:
                locks.append((msg, key))
        self.store.update_message(ent.key, msg)
        return Delivery(msg, key, msg.locked_until_ms, msg.delivery_count - 1)

    # ================================================================= settlement
    def _locked_message(
        self, ent: Entity, key: LockKey, receiver: Receiver | None, session_id: str | None, now: int
    ) -> BrokerMessage:
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
                    self._lose_session(ent, s, now)
                raise SessionLockLostError(f"The session lock for session '{msg.session_id}' was lost.")
        elif msg.locked_until_ms is not None and msg.locked_until_ms <= now:
            self._lock_ended(ent, msg, now)
            raise MessageLockLostError("The lock supplied has expired.")
        return msg

    def _settle(
        self,
        ent: Entity,
        token: uuid.UUID | LockKey,
        status: str,
        *,
        receiver: Receiver | None = None,
        reason: str | None = None,
        description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        with self._op():
            now = self._now()
            msg = self._locked_message(ent, lock_key_of(token), receiver, session_id, now)
            if properties_to_modify:
                msg.application_properties.update(properties_to_modify)
                self.store.put_message(ent.key, msg)
            if status == "completed":
                self._remove(ent, msg)
            elif status == "abandoned":
                self._lock_ended(ent, msg, now)
            elif status == "released":
                self._lock_ended(ent, msg, now, counted=False)
            elif status == "defered":
                # "Message deferral": a deferred message is not expired until a receive by sequence
                # number asks for it, even one whose TTL passed while it was locked.
                self._unlock(ent, msg)
                msg.state = MessageState.DEFERRED
                self.store.update_message(ent.key, msg)
            elif status == "suspended":
                self._dead_letter(ent, msg, reason, description, now)
            else:
                raise ArgumentError(f"Unknown disposition status {status!r}.")

    def _check_lock(self, ent: Entity, token: uuid.UUID | LockKey, receiver: Receiver) -> None:
        """Raise the lock error a settlement of ``token`` would raise now, without settling."""
        with self._op():
            self._locked_message(ent, lock_key_of(token), receiver, None, self._now())

    def _complete(self, ent: Entity, token: uuid.UUID | LockKey, receiver: Receiver) -> None:
        """:meth:`_settle` with "completed" for a message whose lock is plainly valid (no session, not
        expired): the settlement of nearly every peek-locked message, without the general checks."""
        key = lock_key_of(token)
        msg = ent.locks.get(key)
        if (
            msg is None
            or ent.requires_session
            or msg.locked_until_ms is None
            or msg.locked_until_ms <= self._now()
        ):
            self._settle(ent, key, "completed", receiver=receiver)
            return
        with self._operation:
            self._remove(ent, msg)

    def update_disposition(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        status: str,
        dead_letter_reason: str | None = None,
        dead_letter_description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        """$management update-disposition: completed, abandoned, defered (sic) or suspended."""
        with self._op():
            ent = self._entity(path)
            for token in lock_tokens:
                self._settle(
                    ent,
                    token,
                    status,
                    reason=dead_letter_reason,
                    description=dead_letter_description,
                    properties_to_modify=properties_to_modify,
                    session_id=session_id,
                )

    def check_locks(self, path: str, lock_tokens: Iterable[uuid.UUID], session_id: str | None = None) -> None:
        """Raise the lock error :meth:`update_disposition` would raise for these tokens now, without
        settling (a transaction checks its staged settlements before applying any)."""
        with self._op():
            ent = self._entity(path)
            now = self._now()
            for token in lock_tokens:
                self._locked_message(ent, lock_key_of(token), None, session_id, now)

    def renew_lock(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> list[int]:
        with self._op():
            ent = self._entity(path)
            now = self._now()
            out = []
            for token in lock_tokens:
                key = lock_key_of(token)
                msg = self._locked_message(ent, key, None, None, now)
                if ent.requires_session and msg.lock_owner is not None and msg.lock_owner.session is not None:
                    out.append(msg.lock_owner.session.locked_until_ms)
                    continue
                msg.locked_until_ms = now + ent.lock_duration_ms
                self._timer(msg.locked_until_ms, _LOCK, ent, msg, key)
                out.append(msg.locked_until_ms)
            return out

    def receive_deferred(
        self, path: str, sequence_numbers: Iterable[int], mode: ReceiveMode, session_id: str | None = None
    ) -> list[Delivery]:
        """$management receive-by-sequence-number for deferred messages (all or nothing)."""
        with self._op():
            ent = self._entity(path)
            self._check_receive_status(ent)
            now = self._now()
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
                    self._expire(ent, msg, now)
                raise MessageNotFoundError(
                    f"Failed to lock one or more specified messages: the deferred message with sequence "
                    f"number {expired[0].sequence_number} has expired."
                )
            out = []
            for msg in found:
                msg.delivery_count += 1
                if mode == ReceiveMode.PEEK_LOCK:
                    out.append(self._lock_message(ent, msg, None, now))
                else:
                    self._remove(ent, msg)
                    out.append(Delivery(msg, None, None, msg.delivery_count - 1))
            return out

    def peek(
        self, path: str, from_sequence_number: int, count: int, session_id: str | None = None
    ) -> list[BrokerMessage]:
        """Messages in every state from a sequence number on; no lock, no delivery-count change.
        Page through an entity with ``from_sequence_number = last.sequence_number + 1``; ``path`` may be
        a sub-queue (``q/$DeadLetterQueue``, ``t/Subscriptions/s/$DeadLetterQueue``). The messages are
        the broker's own objects: read them, do not change them."""
        ent = self._entity(path)
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
        return [ent.messages[s] for s in seqs]

    def message_count(self, path: str) -> int:
        return len(self._entity(path).messages)

    def describe(self, path: str) -> Any:
        """The QueueConfig / TopicConfig / SubscriptionConfig an entity was built from (rules current)."""
        return self._entity(path).config

    # ================================================================= receivers closing
    def _close_receiver(self, r: Receiver) -> None:
        with self._op():
            if r.closed:
                return
            r.closed = True
            ent = r.entity
            ent.receivers.pop(id(r), None)
            self._pending.pop(id(r), None)
            now = self._now()
            s = r.session
            # "Message sessions", impact of delivery count: closing a session with messages locked but
            # not settled does not count a delivery (a lapsed session lock does, even if its timer has
            # not run yet). A plain receiver's locks end as if they had expired: counted, like an abandon.
            self._return_locks(ent, r, now, counted=s is None or s.locked_until_ms <= now)
            if s is not None and s.owner is r:
                s.owner = None
                s.generation += 1
                s.locked_until_ms = 0
                ent.forget_session_if_idle(s)
                if s.heap:
                    self._notify(ent, s)

    def _end_receivers(self, ent: Entity, error: BrokerError) -> None:
        """The entity stops serving its receivers: their locks end uncounted (the clients did nothing wrong)
        and each one's next take raises ``error``, so that its link is detached with it."""
        now = self._now()
        for r in list(ent.receivers.values()):
            if r.closed or r.ended_by is not None:
                continue
            r.ended_by = error
            self._return_locks(ent, r, now, counted=False)
            self._pending[id(r)] = r

    def _return_locks(self, ent: Entity, r: Receiver, now: int, counted: bool = True) -> None:
        msgs = sorted((ent.locks[t] for t in r.locks if t in ent.locks), key=lambda m: m.sequence_number)
        for msg in msgs:
            self._lock_ended(ent, msg, now, counted=counted)
        r.locks.clear()

    # ================================================================= timers
    def _timer_valid(self, entry: tuple[int, int, int, Entity, Any, Any]) -> bool:
        deadline, _, kind, ent, obj, extra = entry
        if self._entities.get(ent.key) is not ent:
            return False
        if kind == _LOCK:
            return ent.locks.get(extra) is obj and obj.locked_until_ms == deadline
        if kind == _LOCKS:
            locks = ent.locks
            return any(locks.get(key) is msg and msg.locked_until_ms == deadline for msg, key in obj)
        if kind == _TTL:
            return ent.messages.get(obj.sequence_number) is obj and obj.expires_at_ms == deadline
        if kind == _SCHED:
            return ent.messages.get(obj.sequence_number) is obj and obj.state == MessageState.SCHEDULED
        if kind == _SESSION:
            return obj.owner is not None and obj.generation == extra and obj.locked_until_ms == deadline
        return False

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has work (clock seconds), or None."""
        timers = self._timers
        while timers and not self._timer_valid(timers[0]):
            heapq.heappop(timers)
        return timers[0][0] / 1000.0 if timers else None

    def tick(self) -> None:
        """Process every due timer: lock expiry, TTL expiry, scheduled activation, session-lock expiry."""
        with self._op():
            now = self._now()
            timers = self._timers
            while timers and timers[0][0] <= now:
                entry = heapq.heappop(timers)
                if not self._timer_valid(entry):
                    continue
                deadline, _, kind, ent, obj, _ = entry
                if kind == _LOCK:
                    self._lock_ended(ent, obj, now)
                elif kind == _LOCKS:
                    for msg, key in obj:  # in the order they were taken (sequence order)
                        if ent.locks.get(key) is msg and msg.locked_until_ms == deadline:
                            self._lock_ended(ent, msg, now)
                elif kind == _TTL:
                    if not obj.locked and obj.state == MessageState.ACTIVE:
                        self._expire(ent, obj, now)
                    # a locked message is checked again when its lock ends; a deferred one when a
                    # receive by sequence number asks for it ("Message deferral")
                elif kind == _SCHED:
                    self._activate(ent, obj, now, stored=True)
                elif kind == _SESSION:
                    self._lose_session(ent, obj, now)


def _normalize(path: str) -> str:
    p = path.strip()
    if "://" in p:
        p = p.split("://", 1)[1]
        p = p.split("/", 1)[1] if "/" in p else ""
    return "/".join(part for part in p.split("/") if part).lower()


def _sequence_owner(ent: Entity) -> Entity:
    """The queue/topic/subscription whose counter assigned this container's sequence numbers."""
    while ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER) and ent.parent is not None:
        ent = ent.parent
    return ent


__all__ = ["NO_LIMIT", "Broker", "EntityRef", "RuleError"]
