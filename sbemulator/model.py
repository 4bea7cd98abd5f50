"""Message model shared by the server (which encodes/decodes AMQP) and the broker (which stores).

The broker never parses the AMQP properties section or the body: they travel as the sender's
encoded bytes so that what a receiver gets is byte-identical to what was sent. The server passes
the fields the broker needs for routing, filters and sessions as already decoded attributes.

A root module below the broker and the store (it imports only the standard library): the broker keeps
these messages, the store writes and reads them, the gateway encodes them, and none of them has to
import another's layer for it (tests/unit/test_import_structure.py).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

LockKey = bytes
"""A lock token as the broker keys it: the 16 bytes of the delivery tag, which is the token's
``uuid.UUID.bytes_le`` (the SDKs read the tag that way). Bytes hash in C; a ``uuid.UUID`` computes
its hash in Python, and a delivery is looked up by its token several times on its way through."""


def lock_key_of(token: uuid.UUID | LockKey) -> LockKey:
    """The broker's key of a lock token given as a UUID (the management API) or as its key already."""
    return token if type(token) is bytes else token.bytes_le  # type: ignore[union-attr]


def lock_token_of(key: LockKey) -> uuid.UUID:
    """The lock token a client sees for a key."""
    return uuid.UUID(bytes_le=key)


class ReceiveMode(enum.Enum):
    PEEK_LOCK = "peek_lock"
    RECEIVE_AND_DELETE = "receive_and_delete"


class Outcome(enum.StrEnum):
    """How a peek-locked message is settled. The values are the disposition statuses of the
    ``$management`` update-disposition operation (``defered`` and ``suspended`` as Service Bus spells
    them), so a status read off the wire converts with ``Outcome(status)``; ``released`` is the AMQP
    outcome of a message the client did not process (its delivery is not counted)."""

    COMPLETED = "completed"
    ABANDONED = "abandoned"
    RELEASED = "released"
    DEFERRED = "defered"
    DEAD_LETTERED = "suspended"


class MessageState(enum.IntEnum):
    """Values are the ``x-opt-message-state`` annotation values."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


# "Service Bus quotas", Message property size: at most 32 KB per property, and 64 KB for the whole header
# (user and system properties together); a larger one is refused with a SerializationException.
MAX_PROPERTY_SIZE = 32 * 1024
MAX_HEADER_SIZE = 64 * 1024
# "Service Bus quotas": maximum size of a message ID, and of a message session ID.
MAX_ID_LENGTH = 128


HeaderFields = tuple[bool | None, int | None, bool | None]
"""The header fields a sender sets and Service Bus delivers as sent: durable, priority, first-acquirer
(each None when absent). The broker sets the others (ttl, delivery-count)."""


@dataclass(slots=True)
class IncomingMessage:
    """A message as the server decoded it from a transfer (or a $management schedule request)."""

    properties_raw: bytes = b""
    application_properties: dict[str, Any] = field(default_factory=dict)
    body_raw: bytes = b""
    message_id: str | None = None
    correlation_id: str | None = None
    session_id: str | None = None
    subject: str | None = None
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    content_type: str | None = None
    partition_key: str | None = None
    time_to_live_ms: int | None = None
    scheduled_enqueue_time_ms: int | None = None
    size: int = 0
    # The sender's own message annotations (those the broker does not set itself), kept as sent.
    annotations: dict[Any, Any] = field(default_factory=dict)
    # Encoded size of everything but the body (header, annotations, properties, application properties).
    header_size: int = 0
    # The largest application property (name, encoded size of name and value); only worked out when the
    # header is larger than MAX_PROPERTY_SIZE, the one case where a property can exceed it.
    largest_property: tuple[str, int] | None = None
    # durable, priority, first-acquirer as sent (None: the sender set none of them)
    header_fields: HeaderFields | None = None
    # The sender's delivery annotations, passed on to the receiver as Service Bus does (the Go SDK's
    # TestSender_SendAMQPMessageWithMultipleByteSlicesInData reads them back beside x-opt-lock-token).
    delivery_annotations: dict[Any, Any] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class BrokerMessage:
    """A stored message. One object per copy: every subscription gets its own.

    ``delivery_count`` is the number of deliveries made so far (incremented when a receiver takes
    the message). The AMQP header ``delivery-count`` that Service Bus sends is the number of
    PREVIOUS deliveries, i.e. ``delivery_count - 1`` on a delivery and ``delivery_count`` on a peek;
    use :meth:`header_delivery_count` / ``Delivery.header_delivery_count``.
    """

    properties_raw: bytes
    application_properties: dict[str, Any]
    body_raw: bytes
    message_id: str | None
    correlation_id: str | None
    session_id: str | None
    subject: str | None
    to: str | None
    reply_to: str | None
    reply_to_session_id: str | None
    content_type: str | None
    partition_key: str | None
    time_to_live_ms: int | None
    scheduled_enqueue_time_ms: int | None
    size: int
    sequence_number: int = 0
    enqueued_time_ms: int = 0
    enqueue_sequence_number: int | None = None
    expires_at_ms: int | None = None
    delivery_count: int = 0
    state: MessageState = MessageState.ACTIVE
    dead_letter_source: str | None = None
    dead_letter_reason: str | None = None
    dead_letter_description: str | None = None
    locked_until_ms: int | None = None
    lock_key: LockKey | None = None
    # Auto-forwarding hops taken so far (Service Bus stops at 4).
    hops: int = 0
    # True when a rule action changed a system property (server must re-encode the properties section).
    properties_changed: bool = False
    # The sender's own message annotations, delivered back beside the ones the broker sets.
    annotations: dict[Any, Any] = field(default_factory=dict)
    # durable, priority, first-acquirer as the sender set them (None: none of them)
    header_fields: HeaderFields | None = None
    # The sender's delivery annotations, delivered with every delivery of the message.
    delivery_annotations: dict[Any, Any] = field(default_factory=dict)
    # --- broker bookkeeping, not part of the message -----------------------------------------
    queued: bool = False  # present in an available-heap
    lock_owner: Any = None  # the Receiver holding the lock (None: via $management; or a closed one's)

    @classmethod
    def from_incoming(cls, msg: IncomingMessage) -> BrokerMessage:
        return cls(
            properties_raw=msg.properties_raw,
            application_properties=dict(msg.application_properties),
            body_raw=msg.body_raw,
            message_id=msg.message_id,
            correlation_id=msg.correlation_id,
            session_id=msg.session_id,
            subject=msg.subject,
            to=msg.to,
            reply_to=msg.reply_to,
            reply_to_session_id=msg.reply_to_session_id,
            content_type=msg.content_type,
            partition_key=msg.partition_key,
            time_to_live_ms=msg.time_to_live_ms,
            scheduled_enqueue_time_ms=msg.scheduled_enqueue_time_ms,
            size=msg.size,
            annotations=dict(msg.annotations),
            header_fields=msg.header_fields,
            delivery_annotations=dict(msg.delivery_annotations),
        )

    def copy(self) -> BrokerMessage:
        """An independent copy (own application_properties dict) without lock state."""
        return BrokerMessage(
            properties_raw=self.properties_raw,
            application_properties=dict(self.application_properties),
            body_raw=self.body_raw,
            message_id=self.message_id,
            correlation_id=self.correlation_id,
            session_id=self.session_id,
            subject=self.subject,
            to=self.to,
            reply_to=self.reply_to,
            reply_to_session_id=self.reply_to_session_id,
            content_type=self.content_type,
            partition_key=self.partition_key,
            time_to_live_ms=self.time_to_live_ms,
            scheduled_enqueue_time_ms=self.scheduled_enqueue_time_ms,
            size=self.size,
            sequence_number=self.sequence_number,
            enqueued_time_ms=self.enqueued_time_ms,
            enqueue_sequence_number=self.enqueue_sequence_number,
            expires_at_ms=self.expires_at_ms,
            delivery_count=self.delivery_count,
            state=self.state,
            dead_letter_source=self.dead_letter_source,
            dead_letter_reason=self.dead_letter_reason,
            dead_letter_description=self.dead_letter_description,
            hops=self.hops,
            properties_changed=self.properties_changed,
            annotations=dict(self.annotations),
            header_fields=self.header_fields,
            delivery_annotations=dict(self.delivery_annotations),
        )

    @property
    def system_properties_changed(self) -> bool:
        """Alias the filter actions set (``sbemulator.filters`` API)."""
        return self.properties_changed

    @system_properties_changed.setter
    def system_properties_changed(self, value: bool) -> None:
        self.properties_changed = bool(value)

    @property
    def locked(self) -> bool:
        return self.lock_key is not None

    @property
    def lock_token(self) -> uuid.UUID | None:
        """The token of the lock a receiver holds on this message, as clients see it."""
        return None if self.lock_key is None else lock_token_of(self.lock_key)

    def header_delivery_count(self, delivering: bool) -> int:
        """The AMQP header delivery-count: previous deliveries (what the SDKs report/convert)."""
        return max(0, self.delivery_count - 1) if delivering else self.delivery_count


@dataclass(slots=True)
class Delivery:
    """A message handed to a receiver. ``lock_key`` (and ``lock_token``) is None in receive-and-delete
    mode; the server sends the key as the delivery tag, so no UUID is built per delivery."""

    message: BrokerMessage
    lock_key: LockKey | None
    locked_until_ms: int | None
    header_delivery_count: int
    # The lock token's own 16 bytes (``lock_token.bytes``), as a delivery's x-opt-lock-token carries it.
    lock_token_bytes: bytes | None = None

    @property
    def lock_token(self) -> uuid.UUID | None:
        return None if self.lock_key is None else lock_token_of(self.lock_key)

    def __iter__(self):  # allows ``msg, token = delivery``
        yield self.message
        yield self.lock_token
