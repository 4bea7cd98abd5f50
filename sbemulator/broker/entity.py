"""In-memory state of one message container (queue, subscription, dead-letter queue, topic).

Messages in play live in memory (``messages`` by sequence number); SQLite is the durable log behind
them, and a durable queue's or subscription's available messages beyond the read-ahead window are
only an index (``cold``, broker/paging.py) whose bodies the store keeps until they are paged in.
Available messages wait in a heap of sequence numbers (per session on session entities), so receiving
is O(log n) and FIFO by sequence number, and a message returned by abandon or an expired lock goes
back to its original position. Heaps use lazy deletion: an entry is valid only while its message is
still ``queued``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

# The kinds are defined once, in descriptions.py; re-exported for the broker's modules.
from ..descriptions import QUEUE as QUEUE
from ..descriptions import SUBSCRIPTION as SUBSCRIPTION
from ..descriptions import TOPIC as TOPIC
from ..model import BrokerMessage
from ..tracked import TrackedDict
from .paging import ColdIndex
from .views import DEAD_LETTER_QUEUE, TRANSFER_DEAD_LETTER_QUEUE

# Receivers (receiver.Receiver) are typed Any here: receiver depends on this module, not the reverse.
Receiver = Any

DEAD_LETTER = "deadletter"
TRANSFER_DEAD_LETTER = "transfer_deadletter"

DLQ_SUFFIX = DEAD_LETTER_QUEUE
TRANSFER_DLQ_SUFFIX = TRANSFER_DEAD_LETTER_QUEUE
NO_LIMIT = 1 << 62


@dataclass(frozen=True)
class EntityRef:
    """What the server needs to know about a resolved path (attach, max-message-size)."""

    kind: str  # queue, topic, subscription, deadletter, transfer_deadletter
    path: str  # canonical display path, e.g. "orders/$DeadLetterQueue"
    requires_session: bool
    max_message_size: int  # bytes
    lock_duration_ms: int
    can_send: bool
    can_receive: bool


@dataclass(eq=False)
class Session:
    id: str
    heap: list[int] = field(default_factory=list)
    state: bytes | None = None
    # When the state was last set or cleared (ms): get-message-sessions with last-updated-time lists by it.
    state_updated_ms: int | None = None
    owner: Receiver | None = None
    locked_until_ms: int = 0
    generation: int = 0
    count: int = 0  # messages of this session in the container, any state


@dataclass(eq=False)
class Entity:
    key: str  # lower-case path, the store key
    path: str  # display path
    kind: str
    lock_duration_ms: int = 60_000
    max_delivery_count: int = NO_LIMIT
    ttl_ms: int | None = None
    dead_lettering_on_expiration: bool = False
    dead_lettering_on_filter_exceptions: bool = True
    requires_session: bool = False
    forward_to: str | None = None
    forward_dead_lettered_to: str | None = None
    max_message_size: int = 256 * 1024
    # MaxSizeInMegabytes of a queue or topic, in bytes (1 GB: Service Bus's default)
    max_size_bytes: int = 1024 * 1024 * 1024
    requires_duplicate_detection: bool = False
    duplicate_window_ms: int = 20_000
    status: str = "Active"  # "Suspend and reactivate messaging entities" (config.STATUS_*)
    config: Any = None  # the QueueConfig / TopicConfig / SubscriptionConfig it was built from
    live: bool = True  # False once the topology has dropped it (its timers no longer matter)
    # message state
    messages: dict[int, BrokerMessage] = field(default_factory=TrackedDict)
    available: list[int] = field(default_factory=list)
    # Available messages only the store holds (durable queues and subscriptions beyond the read-ahead
    # window, broker/paging.py); None while there are none.
    cold: ColdIndex | None = None
    sessions: dict[str, Session] = field(default_factory=dict)
    locks: dict[bytes, BrokerMessage] = field(default_factory=TrackedDict)  # by lock key (model.LockKey)
    receivers: dict[int, Receiver] = field(default_factory=dict)
    # Who a new message wakes (by id, like ``receivers``; wakeups.py): the plain receivers that can take
    # one now (their link has credit), least recently served first, and the next-available session
    # receivers that have no session yet. Idle receivers are in neither, so a send does not pay for them.
    waiting: dict[int, Receiver] = field(default_factory=dict)
    seekers: dict[int, Receiver] = field(default_factory=dict)
    # relations
    dlq: Entity | None = None
    transfer_dlq: Entity | None = None
    parent: Entity | None = None  # DLQ -> owner; subscription -> topic
    subscriptions: dict[str, Entity] = field(default_factory=dict)  # topics: lower name -> subscription
    rules: list[tuple[Any, Any]] = field(default_factory=list)  # subscriptions: (RuleConfig, compiled rule)
    # The queue or topic whose MaxSizeInMegabytes this container's messages count against (itself, its
    # owner for a dead-letter queue, the topic for a subscription and its sub-queues; set from ``parent``
    # when built), and, on that queue or topic, the bytes all of them hold (its SizeInBytes).
    quota: Entity = field(init=False, repr=False)
    held_bytes: int = 0
    # AutoDeleteOnIdle (broker/idle.py): the interval (None: never), when the container was last used
    # (stamped by the message flow and the facade) and the timer that checks it
    idle_ms: int | None = None
    active_ms: int = 0
    idle_timer: Any = None
    # sequence numbers and duplicate detection (queues and topics)
    last_sequence: int = 0
    duplicates: OrderedDict[str, int] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        self.quota = self if self.parent is None else self.parent.quota

    def ref(self) -> EntityRef:
        return EntityRef(
            kind=self.kind,
            path=self.path,
            requires_session=self.requires_session,
            max_message_size=self.max_message_size,
            lock_duration_ms=self.lock_duration_ms,
            can_send=self.kind in (QUEUE, TOPIC),
            can_receive=self.kind not in (TOPIC,),
        )

    def message_count(self) -> int:
        """Messages in this container, in memory or paged out."""
        cold = self.cold
        return len(self.messages) + (len(cold) if cold is not None else 0)

    def session(self, session_id: str) -> Session:
        s = self.sessions.get(session_id)
        if s is None:
            s = self.sessions[session_id] = Session(session_id)
        return s

    def forget_session_if_idle(self, s: Session) -> None:
        # A session whose state was ever set stays: listing by state time still names it.
        if s.count == 0 and s.owner is None and s.state is None and s.state_updated_ms is None:
            self.sessions.pop(s.id, None)
