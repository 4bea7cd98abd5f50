"""Where messages go: sending and scheduling, topic fan-out, auto-forwarding, dead-lettering, expiry,
receivers taking messages under lock and giving them back.

A component of the broker (:class:`~sbemulator.broker.core.Broker` builds and wires it). It reads the
entities the topology owns (``entities``, ``lookup``), writes through the ``store``, sets its timers on
``timers`` (it is their :class:`~sbemulator.broker.timers.LockHost`), tells receivers through
``wakeups`` and owns the session locks (``sessions``, whose
:class:`~sbemulator.broker.sessions.LockReturner` it is). Settling is ``settlement``'s; it calls
:meth:`remove`, :meth:`unlock`, :meth:`lock_ended`, :meth:`dead_letter` and :meth:`renew` here.

``MessageFlow`` is one object made of parts, each in a module of its own: this one (sending, fan-out,
forwarding, dead-lettering, expiry), ``available`` (the available index and paging), ``admission``
(what a send is checked against) and ``receiving`` (receivers, takes, peeks, lock return).

Delivery counts follow Service Bus: ``BrokerMessage.delivery_count`` counts deliveries made and is
incremented when a receiver takes the message (peek-lock or receive-and-delete, also
receive-by-sequence-number). The AMQP header carries the PREVIOUS deliveries
(``Delivery.header_delivery_count`` = ``delivery_count - 1``), which is what Service Bus sends: the
Python SDK shows 0 on a first receive, .NET adds one. A message whose lock ends by abandon, lock
expiry (a closed plain receiver's locks included) or session-lock loss while
``delivery_count >= MaxDeliveryCount`` moves to the dead-letter queue with reason
``MaxDeliveryCountExceeded``: with MaxDeliveryCount=3 a message can be received three times.
``release`` (the client's ``released`` outcome) and closing a session receiver ("Message sessions",
impact of delivery count) un-count the delivery. A dead-letter queue counts nothing: a message there
carries the count Service Bus shows for it (its failed deliveries: the abandons and lock expiries, so a
receiver's explicit dead-letter does not count its own delivery, and MaxDeliveryCountExceeded comes with
MaxDeliveryCount), in the header as it is, however often it is received, abandoned or peeked there
(the Go SDK's TestMessageSettlementUsingReceiver: 2 after receive, abandon, receive, dead-letter;
still 2 after an abandon and a receive in the dead-letter queue).

Sequence numbers are per queue and per subscription (each subscription numbers the copies it
receives from 1, as Service Bus documents); a topic numbers only the scheduled messages it holds
until they fan out (the numbers ``schedule`` returns for cancelling). A scheduled message gets a new
number when it becomes active ("Message sequencing and timestamps"). Dead-lettered messages keep
their number, auto-forwarded ones get a new one in the target with ``enqueue_sequence_number`` =
the original.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from ..model import (
    BrokerMessage,
    IncomingMessage,
    LockKey,
    MessageState,
)
from ..scheduling import DEFAULT_SLICES, Slices
from .admission import SEND_SUSPENDED, SendAdmission
from .available import AvailableIndex
from .entity import DEAD_LETTER, QUEUE, SUBSCRIPTION, TOPIC, TRANSFER_DEAD_LETTER, Entity
from .errors import (
    BrokerError,
    MessageNotFoundError,
)
from .paging import ColdIndex
from .receiver import ReceiverOps
from .receiving import DEAD_LETTER_KINDS, ReceiveSide
from .rules import FilterEvaluationError
from .sessions import Sessions
from .timers import ACTIVATION, EXPIRY, Timers
from .wakeups import Wakeups

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

# Byte maps that set a random UUID's version (4) and variant (RFC 4122) bits.
_VERSION_4 = bytes(b & 0x0F | 0x40 for b in range(256))
_VARIANT_RFC_4122 = bytes(b & 0x3F | 0x80 for b in range(256))
# UUID.bytes[to] == UUID.bytes_le[frm]: the first three fields are little-endian in bytes_le.
_BYTES_LE_ORDER = ((0, 3), (1, 2), (2, 1), (3, 0), (4, 5), (5, 4), (6, 7), (7, 6))
_LOCK_POOL = 256  # lock tokens made per getrandom call
_SPLIT_POOL = struct.Struct("16s" * _LOCK_POOL).unpack  # 256 bytes objects of 16, cut in C


class MessageFlow(AvailableIndex, SendAdmission, ReceiveSide):
    receiver_ops: ReceiverOps  # what the receivers it opens call; set by the broker once settlement exists

    def __init__(
        self,
        store: Store,
        clock: Callable[[], float],
        entities: dict[str, Entity],
        lookup: Callable[[str], Entity],
        timers: Timers,
        wakeups: Wakeups,
        slices: Slices = DEFAULT_SLICES,
    ) -> None:
        self.store = store
        # A session receiver closing with more locks than Slices.return_locks returns them in slices of
        # this many (timers due now, each a slice of the broker's timer run).
        self._return_slice = slices.return_locks
        self.clock = clock
        self._entities = entities
        self._entity = lookup
        self._timers = timers
        timers.bind_messages(entities, self)  # TTL and schedule entries find their message by key
        self._wakeups = wakeups
        self._op = wakeups.operation
        self._lock_keys: list[tuple[LockKey, bytes]] = []  # (key, the token's uuid bytes)
        self._next_dup_prune = 0
        self.namespace = "sbemulatorns"  # the broker sets its namespace's name (QuotaExceeded names it)
        # Available messages a queue or subscription holds in memory before the rest wait in the store
        # only (broker/paging.py); 0 (the in-memory store) keeps them all.
        self._window: int = getattr(store, "page_window", 0)
        self._page_in_rows = slices.page_in_rows  # paged-out messages read back per range scan
        self.sessions = self._sessions = Sessions(store, clock, lookup, timers, wakeups, self)

    def load(self, source: Store | None = None, *, persist: bool = False) -> None:
        """Restart: the stored messages, sequence numbers, session states and duplicate-detection
        entries of the entities that exist (the topology was built first). ``source``: another store
        to load from (a snapshot imported into the running broker, runtime/snapshot.py); ``persist``:
        write what it loads to this broker's own store too."""
        now = self._now()
        store = self.store
        source = source or store
        for key, last in source.load_sequences().items():
            ent = self._entities.get(key)
            if ent is not None:
                ent.last_sequence = max(ent.last_sequence, last)
                if persist:
                    store.set_sequence(key, ent.last_sequence)
        paged = [key for key, ent in self._entities.items() if self._window and _pages(ent)]
        for key, msg in source.load_messages(paged) if paged else source.load_messages():
            ent = self._entities.get(key)
            if ent is None:
                continue
            if persist:
                assert isinstance(msg, BrokerMessage)  # another store's index entries have no data here
                store.put_message(key, msg)
            if type(msg) is array:  # available messages of a paging container: their index entries only
                cold = ent.cold
                if cold is None:
                    cold = ent.cold = ColdIndex()
                ent.quota.held_bytes += cold.extend(msg)
                continue
            if type(msg) is tuple:  # one such entry (a store that loads them one by one)
                cold = ent.cold
                if cold is None:
                    cold = ent.cold = ColdIndex()
                cold.append(*msg)
                ent.quota.held_bytes += msg[4]
                continue
            assert isinstance(msg, BrokerMessage)
            owner = _sequence_owner(ent)
            owner.last_sequence = max(owner.last_sequence, msg.sequence_number)
            self.insert(ent, msg)
            if msg.state == MessageState.SCHEDULED:
                self._timers.add_message(ACTIVATION, msg.scheduled_enqueue_time_ms or 0, ent, msg.sequence_number)
            else:
                if msg.state == MessageState.ACTIVE:
                    self.queue(ent, msg)
                if msg.expires_at_ms is not None:
                    self._timers.add_message(EXPIRY, msg.expires_at_ms, ent, msg.sequence_number)
        for ent in self._entities.values():
            if ent.cold is not None:
                owner = _sequence_owner(ent)
                owner.last_sequence = max(owner.last_sequence, ent.cold.seqs[-1])
        for key, sid, state in source.load_session_states():
            ent = self._entities.get(key)
            if ent is not None:
                ent.session(sid).state = bytes(state)
                if persist:
                    store.set_session_state(key, sid, bytes(state), now)
        for key, sid, updated_ms in source.load_session_state_times():
            ent = self._entities.get(key)
            if ent is not None:
                ent.session(sid).state_updated_ms = int(updated_ms)
        for key, mid, expires in source.load_duplicates(now):
            ent = self._entities.get(key)
            if ent is not None:
                ent.duplicates[mid] = expires

    def forget_history(self) -> None:
        """Drop every session state and duplicate-detection entry (a snapshot import that replaces the
        namespace: the entities that stay start without the history a snapshot does not carry)."""
        store = self.store
        for ent in list(self._entities.values()):
            for mid in ent.duplicates:
                store.add_duplicate(ent.key, mid, 0)  # expired: not loaded at the next start, then pruned
            ent.duplicates.clear()
            for s in list(ent.sessions.values()):
                if s.state is not None or s.state_updated_ms is not None:
                    s.state = None
                    s.state_updated_ms = None
                    store.set_session_state(ent.key, s.id, None)
                ent.forget_session_if_idle(s)

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def _new_lock_key(self) -> tuple[LockKey, bytes]:
        """The key of a random (version 4) lock token, and the token's own 16 bytes (``UUID.bytes``, what
        a delivery's x-opt-lock-token annotation carries). ``uuid4()`` makes a getrandom system call per
        token, one per delivered message; the pool makes one per 256, sets the version and variant bits
        where ``bytes_le`` has them without building a UUID, and reorders all 256 keys into token bytes
        with eight slice assignments instead of per delivery."""
        keys = self._lock_keys
        if not keys:
            raw = bytearray(os.urandom(16 * _LOCK_POOL))
            raw[7::16] = raw[7::16].translate(_VERSION_4)  # byte 6 of the UUID, 7 of bytes_le
            raw[8::16] = raw[8::16].translate(_VARIANT_RFC_4122)
            token = bytearray(raw)
            for to, frm in _BYTES_LE_ORDER:
                token[to::16] = raw[frm::16]
            keys.extend(zip(_SPLIT_POOL(raw), _SPLIT_POOL(token), strict=True))
        return keys.pop()

    def _enqueue(self, ent: Entity, msg: BrokerMessage) -> None:
        """A new active message is available in ``ent``: in memory while the read-ahead window has room,
        else only in the store and ``ent``'s index (its row is written here, before it is indexed)."""
        window = self._window
        if window and (ent.cold is not None or len(ent.available) >= window) and _pages(ent):
            ttl = self._cap_ttl(ent, msg)
            msg.expires_at_ms = None if ttl is None else msg.enqueued_time_ms + ttl
            self.store.put_message(ent.key, msg)
            cold = ent.cold
            if cold is None:
                cold = ent.cold = ColdIndex()
            cold.append(msg.sequence_number, msg.delivery_count, msg.enqueued_time_ms, msg.expires_at_ms, msg.size)
            ent.quota.held_bytes += msg.size  # as insert counts it; a paged-in message is not counted again
            self._wakeups.notify(ent)
            return
        self.insert(ent, msg)
        self._set_expiry(ent, msg)
        self.store.put_message(ent.key, msg)
        self.queue(ent, msg)

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
            self._timers.add_message(EXPIRY, msg.expires_at_ms, ent, msg.sequence_number)

    # ================================================================= sending
    def send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Accept a batch (all or nothing). Duplicates (by MessageId, within the window) and topic
        messages no subscription wants are dropped silently, as Service Bus does."""
        with self._op:
            ent, batch = self._check_send(path, messages)
            now = self._now()
            for incoming in batch:
                if self._is_duplicate(ent, incoming, now):
                    continue
                self.accept(ent, BrokerMessage.from_incoming(incoming), now)

    def withdraw(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Take back a send whose messages the store could not write (its commit failed): the copies it
        made (in the queue, each subscription, a forwarding target or a dead-letter queue) leave memory
        and the store's pending writes, and their MessageIds leave duplicate detection, so the refused
        send is neither delivered, nor written when the store has room again, nor taken for a duplicate
        when the sender tries it again. A copy shares its sender's encoded properties (the bytes object
        itself, which the broker never replaces), so they are found among the store's pending writes
        by identity. Called before anything could receive them (the gateway commits before it pumps)."""
        by_properties = {id(m.properties_raw): m for m in messages}
        withdrawn: set[str] = set()
        with self._op:
            for key, seq, msg in list(self.store.pending_messages()):
                incoming = by_properties.get(id(msg.properties_raw))
                if incoming is None or incoming.properties_raw is not msg.properties_raw:
                    continue
                ent = self._entities.get(key)
                if ent is not None:
                    self.take_back(ent, msg)
                self.store.discard(key, seq)
                if incoming.message_id is not None:
                    withdrawn.add(str(incoming.message_id))
            try:
                target: Entity | None = self._entity(path)
            except BrokerError:  # deleted meanwhile: its duplicate detection went with it
                target = None
            if target is not None and target.requires_duplicate_detection:
                for mid in withdrawn:
                    target.duplicates.pop(mid, None)
                    self.store.discard_duplicate(target.key, mid)

    def take_back(self, ent: Entity, msg: BrokerMessage) -> None:
        """Take ``msg`` out of ``ent`` wherever it is there: in memory, or paged out, only in the store and
        ``ent``'s index (a backlog beyond the read-ahead window, broker/paging.py). For a write taken back
        before its commit (a withdrawn send, a settlement or resubmission undone), whose row the caller
        then forgets: an index entry left behind would name a row that was never written."""
        seq = msg.sequence_number
        if ent.messages.get(seq) is msg:
            self.remove(ent, msg)
            return
        cold = ent.cold
        if cold is not None and cold.pop_seq(seq) is not None:
            if not len(cold):
                ent.cold = None
            ent.quota.held_bytes -= msg.size
            self.store.delete_message(ent.key, seq)

    def schedule(self, path: str, messages: Iterable[IncomingMessage]) -> list[int]:
        """$management schedule-message: returns the sequence numbers (usable for cancel). "Duplicate
        detection": scheduled messages are included; a duplicate is dropped, its send still succeeds and
        gets a number (that no message holds, so cancelling it finds nothing)."""
        with self._op:
            ent, batch = self._check_send(path, messages)
            now = self._now()
            return [
                self.next_sequence(ent) if self._is_duplicate(ent, m, now)
                else self.accept(ent, BrokerMessage.from_incoming(m), now)
                for m in batch
            ]

    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        with self._op:
            ent = self._entity(path)
            ent.active_ms = self._now()
            found = []
            for seq in sequence_numbers:
                msg = ent.messages.get(seq)
                if msg is None or msg.state != MessageState.SCHEDULED:
                    raise MessageNotFoundError(
                        f"The scheduled message with sequence number {seq} was not found."
                    )
                found.append(msg)
            for msg in found:
                self.remove(ent, msg)

    def next_sequence(self, ent: Entity) -> int:
        ent.last_sequence += 1
        self.store.set_sequence(ent.key, ent.last_sequence)
        return ent.last_sequence

    def accept(self, target: Entity, msg: BrokerMessage, now: int) -> int:
        """A new message arrives at a queue or topic (from a sender or by forwarding)."""
        target.active_ms = now  # a send is use (AutoDeleteOnIdle, broker/idle.py)
        msg.sequence_number = self.next_sequence(target)
        scheduled = msg.scheduled_enqueue_time_ms
        if scheduled is not None and scheduled > now:
            msg.state = MessageState.SCHEDULED
            msg.enqueued_time_ms = scheduled
            self.insert(target, msg)
            self.store.put_message(target.key, msg)
            self._timers.add_message(ACTIVATION, scheduled, target, msg.sequence_number)
        else:
            self.activate(target, msg, now, stored=False)
        return msg.sequence_number

    def activate(self, target: Entity, msg: BrokerMessage, now: int, stored: bool) -> None:
        """``stored``: a scheduled message already held by ``target`` whose time has come."""
        msg.state = MessageState.ACTIVE
        msg.enqueued_time_ms = now
        if target.kind == TOPIC:
            if stored:
                self.remove(target, msg)
            # the topic's TTL applies before the rules run, so sys.TimeToLive/ExpiresAtUtc are known to them
            self._cap_ttl(target, msg)
            self._fan_out(target, msg, now)
        elif target.forward_to:
            if stored:
                self.remove(target, msg)
            self._cap_ttl(target, msg)
            self._forward(target, msg, target.forward_to, now)
        else:
            if stored:
                # A scheduled message is appended as if enqueued now, with a new sequence number
                # ("Message sequencing and timestamps"): the scheduled one is valid only while scheduled.
                self.remove(target, msg)
                msg.sequence_number = self.next_sequence(target)
            self._enqueue(target, msg)

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
                    copy.sequence_number = self.next_sequence(sub)
                    self.insert(sub, copy)
                    self.dead_letter(sub, copy, REASON_FILTER_EXCEPTION, str(exc), now)
                continue
            for copy in copies:
                self.deliver_to_subscription(sub, copy, now)

    def deliver_to_subscription(self, sub: Entity, msg: BrokerMessage, now: int) -> None:
        # Every subscription numbers its own messages (a new subscription starts at 1).
        msg.sequence_number = self.next_sequence(sub)
        if sub.requires_session and msg.session_id is None:
            self.insert(sub, msg)
            self.dead_letter(sub, msg, REASON_SESSION_ID_NULL, DESC_SESSION_ID_NULL, now)
        elif sub.forward_to:
            self._cap_ttl(sub, msg)
            self._forward(sub, msg, sub.forward_to, now)
        else:
            self._enqueue(sub, msg)

    def _forward(self, source: Entity, msg: BrokerMessage, target_name: str, now: int) -> None:
        """Auto-forward (``msg`` is no longer in ``source``); failures land in the transfer DLQ."""
        target = self._entities.get(target_name.lower())
        reason = problem = None
        if target is None or target.kind not in (QUEUE, TOPIC):
            reason, problem = REASON_TRANSFER, f"The forwarding destination '{target_name}' could not be found."
        elif target.status in SEND_SUSPENDED:
            reason, problem = REASON_TRANSFER, f"The forwarding destination '{target.path}' is disabled."
        elif target.held_bytes >= target.max_size_bytes:
            # "Chaining Service Bus entities with autoforwarding": a destination over its quota leaves the
            # message in the source's dead-letter queue until there is room (a direct send is refused).
            reason, problem = REASON_TRANSFER, (
                f"The forwarding destination '{target.path}' is full: size of entity in bytes:"
                f"{target.held_bytes}, max entity size in bytes: {target.max_size_bytes}. QuotaType: EntitySize")
        elif msg.hops >= MAX_FORWARD_HOPS:
            reason, problem = REASON_MAX_HOPS, DESC_MAX_HOPS
        elif target.requires_session and msg.session_id is None:
            reason, problem = REASON_SESSION_ID_NULL, DESC_SESSION_ID_NULL
        if problem is not None:
            tdlq = source.transfer_dlq
            assert tdlq is not None
            msg.state = MessageState.ACTIVE
            self._mark_dead_lettered(msg, reason, problem)
            msg.expires_at_ms = None
            self._enqueue_dead_lettered(tdlq, msg)
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
        self.accept(target, fwd, now)

    # ================================================================= dead-lettering, expiry
    @staticmethod
    def _mark_dead_lettered(msg: BrokerMessage, reason: str | None, description: str | None) -> None:
        msg.dead_letter_reason = reason
        msg.dead_letter_description = description
        if reason is not None:
            msg.application_properties["DeadLetterReason"] = reason
        if description is not None:
            msg.application_properties["DeadLetterErrorDescription"] = description

    def dead_letter(
        self, ent: Entity, msg: BrokerMessage, reason: str | None, description: str | None, now: int
    ) -> None:
        """Move a message of ``ent`` to its dead-letter queue (or to ForwardDeadLetteredMessagesTo)."""
        if ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER):
            # A dead-letter queue has no dead-letter queue: the message simply stays.
            self.unlock(ent, msg)
            msg.state = MessageState.ACTIVE
            self.store.put_message(ent.key, msg)
            self.queue(ent, msg)
            return
        if msg.locked:  # its receiver dead-letters it: this delivery did not fail (header_count)
            msg.delivery_count = max(0, msg.delivery_count - 1)
        self.remove(ent, msg)
        msg.state = MessageState.ACTIVE
        self._mark_dead_lettered(msg, reason, description)
        if ent.forward_dead_lettered_to:
            msg.dead_letter_source = ent.path
            self._forward(ent, msg, ent.forward_dead_lettered_to, now)
            return
        dlq = ent.dlq
        assert dlq is not None
        msg.expires_at_ms = None  # dead-lettered messages do not expire
        self._enqueue_dead_lettered(dlq, msg)

    def _enqueue_dead_lettered(self, dlq: Entity, msg: BrokerMessage) -> None:
        """A message arrives, active, in a dead-letter queue: in memory while its read-ahead window has
        room, else only in the store and the queue's index, at its place by sequence number (a
        dead-lettered message keeps its number, so they do not arrive in order; broker/paging.py). A
        poison flood that fills a dead-letter queue holds 40 bytes a message in memory, as a backlog of
        its entity does."""
        window = self._window
        self.store.put_message(dlq.key, msg)
        if window and (dlq.cold is not None or len(dlq.available) >= window):
            cold = dlq.cold
            if cold is None:
                cold = dlq.cold = ColdIndex()
            cold.insert(msg.sequence_number, msg.delivery_count, msg.enqueued_time_ms, msg.expires_at_ms, msg.size)
            dlq.quota.held_bytes += msg.size
            self._wakeups.notify(dlq)
            return
        self.insert(dlq, msg)
        self.queue(dlq, msg)

    def expire(self, ent: Entity, msg: BrokerMessage, now: int) -> None:
        if ent.dead_lettering_on_expiration:
            self.dead_letter(ent, msg, REASON_TTL, "The message expired and was dead lettered.", now)
        else:
            self.remove(ent, msg)

    def lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None:
        """A lock ended without settlement (abandon, expiry, close, session loss, release)."""
        self.unlock(ent, msg)
        if not counted:
            if ent.kind not in DEAD_LETTER_KINDS:  # a sub-queue's receive did not count (count_delivery)
                msg.delivery_count = max(0, msg.delivery_count - 1)
        elif msg.delivery_count >= ent.max_delivery_count:
            self.dead_letter(
                ent,
                msg,
                REASON_MAX_DELIVERY,
                f"Message could not be consumed after {ent.max_delivery_count} delivery attempts.",
                now,
            )
            return
        if msg.state == MessageState.ACTIVE and msg.expires_at_ms is not None and msg.expires_at_ms <= now:
            self.expire(ent, msg, now)
            return
        self.store.update_message(ent.key, msg)
        if msg.state == MessageState.ACTIVE:
            self.queue(ent, msg)

def _pages(ent: Entity) -> bool:
    """Whether a container's available messages may wait in the store only: queues and subscriptions
    without sessions and every dead-letter queue (a session's messages, deferred and scheduled ones stay
    in memory)."""
    return ent.kind in _PAGED_KINDS and not ent.requires_session


def _sequence_owner(ent: Entity) -> Entity:
    """The queue/topic/subscription whose counter assigned this container's sequence numbers."""
    while ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER) and ent.parent is not None:
        ent = ent.parent
    return ent


_PAGED_KINDS = frozenset({QUEUE, SUBSCRIPTION, DEAD_LETTER, TRANSFER_DEAD_LETTER})
