"""Translation between AMQP transfers and broker messages.

Incoming: a transfer payload (one message, or a batch in format 0x80013700) becomes
``IncomingMessage`` objects with the routing fields decoded. Outgoing: a stored message becomes a
delivery whose header and annotations are rebuilt (sequence number, enqueued time, lock, delivery
count) while the sender's properties, application properties and body go back unchanged.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from itertools import islice
from typing import Any

from ..amqp import codec, hotframes
from ..amqp.message import (
    BATCH_MESSAGE_FORMAT,
    SECTION_APPLICATION_PROPERTIES,
    SECTION_DELIVERY_ANNOTATIONS,
    MessageDecodeError,
    ParsedMessage,
    batch_parts,
    parse_message,
    split_batch,
)
from ..amqp.performatives import Properties
from ..amqp.types import Decimal128, Described, Int, Long, Symbol, Timestamp, ULong
from ..model import MAX_PROPERTY_SIZE, BrokerMessage, HeaderFields, IncomingMessage

SEQUENCE_NUMBER = Symbol("x-opt-sequence-number")
ENQUEUED_TIME = Symbol("x-opt-enqueued-time")
LOCKED_UNTIL = Symbol("x-opt-locked-until")
SCHEDULED_ENQUEUE_TIME = Symbol("x-opt-scheduled-enqueue-time")
PARTITION_KEY = Symbol("x-opt-partition-key")
VIA_PARTITION_KEY = Symbol("x-opt-via-partition-key")
DEADLETTER_SOURCE = Symbol("x-opt-deadletter-source")
ENQUEUE_SEQUENCE_NUMBER = Symbol("x-opt-enqueue-sequence-number")
MESSAGE_STATE = Symbol("x-opt-message-state")
LOCK_TOKEN = Symbol("x-opt-lock-token")
# Annotations the broker owns: rebuilt on every delivery, never taken from the sender.
BROKER_ANNOTATIONS = frozenset({
    SEQUENCE_NUMBER, ENQUEUED_TIME, LOCKED_UNTIL, SCHEDULED_ENQUEUE_TIME, PARTITION_KEY, DEADLETTER_SOURCE,
    ENQUEUE_SEQUENCE_NUMBER, MESSAGE_STATE,
})

__all__ = [
    "BATCH_MESSAGE_FORMAT",
    "EMPTY_DELIVERY_ANNOTATIONS",
    "BatchDecoder",
    "MessageDecodeError",
    "encode_delivery",
    "incoming_messages",
    "lock_token_annotations",
    "service_bus_decimal",
    "to_incoming",
]


def _text(value: Any) -> str | None:
    """Service Bus ids are strings; other AMQP id types (uuid, ulong, binary) are shown as text."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return int(value)


def _with_message_id(parsed: ParsedMessage) -> None:
    """Service Bus gives every message a MessageId; some clients (the JS SDK) send none."""
    props = parsed.properties if parsed.properties is not None else Properties()
    props.message_id = uuid.uuid4().hex
    parsed.properties = props
    parsed.properties_raw = codec.encode(props)


def _largest_property(app_props: dict) -> tuple[str, int] | None:
    sizes = [(str(k), len(codec.encode(k)) + len(codec.encode(v))) for k, v in app_props.items()]
    return max(sizes, key=lambda item: item[1], default=None)


_DECIMAL128_BIAS = 6176
_DOTNET_MAX_SCALE = 28
_DOTNET_MAX_SIGNIFICAND = 1 << 96


def service_bus_decimal(raw: bytes) -> bytes:
    """A decimal128 as Service Bus delivers it: the broker reads it into a .NET ``decimal`` and writes
    that back with its own encoder (Microsoft.Azure.Amqp's DecimalEncoding), whose layout the SDKs'
    decoders read: sign and ``6176 - scale`` split as ``biased >> 9`` in the first byte and
    ``(biased & 0x7F) << 1`` in the second, two zero bytes, then the 96-bit integer big-endian.
    The .NET reader takes the exponent from the IEEE 754 bits and the integer from the last 12 bytes.
    A value .NET cannot hold (NaN, infinities, a scale above 28, an integer above 96 bits) is kept."""
    if len(raw) != 16 or raw[0] & 0x60 == 0x60:
        return raw
    exponent = (((raw[0] & 0x7F) << 7) | (raw[1] >> 1)) - _DECIMAL128_BIAS
    significand = int.from_bytes(raw[4:16], "big")
    if exponent > 0:
        significand *= 10 ** exponent
        scale = 0
    else:
        scale = -exponent
    if scale > _DOTNET_MAX_SCALE or significand >= _DOTNET_MAX_SIGNIFICAND:
        return raw
    biased = _DECIMAL128_BIAS - scale
    return Decimal128(bytes(((raw[0] & 0x80) | (biased >> 9), (biased & 0x7F) << 1, 0, 0))
                      + significand.to_bytes(12, "big"))


def _header_fields(header: Any) -> HeaderFields | None:
    """durable, priority and first-acquirer as the sender set them; None when it set none of them."""
    if header is None:
        return None
    durable, priority, first_acquirer = header.durable, header.priority, header.first_acquirer
    if durable is None and priority is None and first_acquirer is None:
        return None
    return (None if durable is None else bool(durable), None if priority is None else int(priority),
            None if first_acquirer is None else bool(first_acquirer))


def to_incoming(parsed: ParsedMessage, size: int) -> IncomingMessage:
    if parsed.properties is None or parsed.properties.message_id is None:
        _with_message_id(parsed)
    props = parsed.properties
    annotations = parsed.message_annotations or {}
    header = parsed.header
    app_props = parsed.application_properties or {}
    header_size = max(0, size - len(parsed.body_raw))
    return IncomingMessage(
        properties_raw=parsed.properties_raw,
        application_properties={str(k): v if type(v) is not Decimal128 else service_bus_decimal(v)
                                for k, v in app_props.items()},
        header_fields=_header_fields(header),
        delivery_annotations=dict(parsed.delivery_annotations) if parsed.delivery_annotations else {},
        body_raw=parsed.body_raw,
        message_id=_text(props.message_id) if props else None,
        correlation_id=_text(props.correlation_id) if props else None,
        session_id=_text(props.group_id) if props else None,
        subject=_text(props.subject) if props else None,
        to=_text(props.to) if props else None,
        reply_to=_text(props.reply_to) if props else None,
        reply_to_session_id=_text(props.reply_to_group_id) if props else None,
        content_type=_text(props.content_type) if props else None,
        partition_key=_text(annotations.get(PARTITION_KEY)),
        time_to_live_ms=int(header.ttl) if header is not None and header.ttl else None,
        scheduled_enqueue_time_ms=_millis(annotations.get(SCHEDULED_ENQUEUE_TIME)),
        size=size,
        annotations={k: v for k, v in annotations.items() if k not in BROKER_ANNOTATIONS},
        header_size=header_size,
        largest_property=_largest_property(app_props) if header_size > MAX_PROPERTY_SIZE else None,
    )


def incoming_messages(payload: bytes, message_format: int) -> list[IncomingMessage]:
    """Decode a transfer's payload into the messages it carries (raises MessageDecodeError)."""
    if message_format == BATCH_MESSAGE_FORMAT:
        parts = split_batch(payload)
        return [to_incoming(parse_message(part), len(part)) for part in parts]
    return [to_incoming(parse_message(payload), len(payload))]


class BatchDecoder:
    """An SDK batch's messages decoded a slice at a time (the gateway's ``backlog.EventBacklog``).

    Why: decoding one 256 KB batch of 100-byte messages (~1,500) took 70-100 ms in one event-loop
    callback, during which no other connection was served. The batch stays atomic: nothing is sent to
    the broker until every message is decoded, and then all of them go in one call. A decode error in
    any slice leaves ``failed`` set; the link handler then decodes the batch whole and refuses it with
    that error, as it refuses a batch decoded in one go."""

    __slots__ = ("_parts", "done", "failed", "messages", "payload")

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self._parts = batch_parts(payload)
        self.messages: list[IncomingMessage] = []
        self.done = False
        self.failed = False

    def step(self, count: int) -> bool:
        """Split off and decode up to ``count`` more messages; True once all are (or one failed)."""
        messages = self.messages
        before = len(messages)
        try:
            messages.extend(to_incoming(parse_message(part), len(part)) for part in islice(self._parts, count))
        except MessageDecodeError:
            self.failed = True
        if self.failed or len(messages) - before < count:  # the parts ran out: every message is decoded
            self.done = True
        return self.done


def _properties_section(message: BrokerMessage) -> bytes:
    if not message.properties_changed:
        return message.properties_raw
    parsed = parse_message(message.properties_raw) if message.properties_raw else None
    props = parsed.properties if parsed and parsed.properties else Properties()
    props.message_id = message.message_id
    props.correlation_id = message.correlation_id
    props.subject = message.subject
    props.to = message.to
    props.reply_to = message.reply_to
    props.content_type = Symbol(message.content_type) if message.content_type is not None else None
    props.group_id = message.session_id
    props.reply_to_group_id = message.reply_to_session_id
    return codec.encode(props)


_HEADER_PREFIX = b"\x00\x53\x70"  # described by 0x70: the header section
_ANNOTATIONS_PREFIX = b"\x00\x53\x72"  # message-annotations
_KEY = {key: codec.encode(key) for key in BROKER_ANNOTATIONS}
_NULL, _TRUE = b"\x40", b"\x41"
_UINT = [hotframes.uint(value) for value in range(256)]  # the delivery counts nearly every header carries
_HEADERS: dict[tuple[HeaderFields | None, int | None, int], bytes] = {}  # (fields, ttl, count) -> section
_HEADERS_MAX = 4096
_FLAG = {None: _NULL, True: _TRUE, False: b"\x42"}


def _header(fields_set: HeaderFields | None, ttl: int | None, delivery_count: int) -> bytes:
    """Header(durable, priority, ttl, first-acquirer, delivery-count), the bytes ``codec.encode(Header(...))``
    gives: durable, priority and first-acquirer as the sender set them (absent stays absent), the TTL
    and the delivery count the broker sets.

    Kept by (fields, ttl, count): an entity's messages share a few of each, so nearly every delivery
    finds its header already written."""
    key = (fields_set, ttl, delivery_count)
    cached = _HEADERS.get(key)
    if cached is not None:
        return cached
    ttl_bytes = hotframes.uint(ttl) if ttl and ttl <= 0xFFFFFFFF else _NULL
    count = max(0, delivery_count)
    durable, priority, first_acquirer = fields_set if fields_set is not None else (None, None, None)
    fields = b"".join((_FLAG[durable], _NULL if priority is None else bytes((0x50, priority & 0xFF)), ttl_bytes,
                       _FLAG[first_acquirer], _UINT[count] if count < 256 else hotframes.uint(count)))
    header = _HEADER_PREFIX + bytes((0xC0, len(fields) + 1, 5)) + fields
    if len(_HEADERS) >= _HEADERS_MAX:
        _HEADERS.clear()
    _HEADERS[key] = header
    return header


# Delivery annotations ("Service Bus AMQP" message mapping): a peek-locked delivery carries its lock
# token as x-opt-lock-token (a uuid, the token the delivery tag holds as bytes_le); a receive-and-delete
# delivery an empty section.
EMPTY_DELIVERY_ANNOTATIONS = b"\x00\x53\x71\xc1\x01\x00"
_LOCK_TOKEN_KEY = codec.encode(LOCK_TOKEN)
_LOCK_TOKEN_HEAD = b"\x00\x53\x71" + bytes((0xC1, 1 + len(_LOCK_TOKEN_KEY) + 17, 2)) + _LOCK_TOKEN_KEY + b"\x98"


def lock_token_annotations(lock_token: bytes) -> bytes:
    """The delivery-annotations section {x-opt-lock-token: uuid} for a lock token's 16 bytes
    (``UUID.bytes``, not the delivery tag's bytes_le): the bytes ``codec.encode`` gives for that map."""
    return _LOCK_TOKEN_HEAD + lock_token


# The annotations of a plain locked delivery (no sender annotations, no optional broker ones) in one
# struct: map8 of 3 pairs, enqueued time (timestamp), sequence number (long, > 127 so not smalllong),
# locked until (timestamp). _annotations writes the same bytes field by field for every other case.
_ENQUEUED_KEY, _SEQUENCE_KEY, _LOCKED_KEY = _KEY[ENQUEUED_TIME], _KEY[SEQUENCE_NUMBER], _KEY[LOCKED_UNTIL]
_PLAIN_LOCKED = struct.Struct(f">3sBBB{len(_ENQUEUED_KEY)}sBq{len(_SEQUENCE_KEY)}sBq{len(_LOCKED_KEY)}sBq")
_PLAIN_LOCKED_SIZE = _PLAIN_LOCKED.size - 3 - 2  # the map8's size byte counts from its count byte


# A peek-locked delivery's delivery annotations and the plain locked message annotations in one struct:
# the lock token's fields turned from the key's little-endian order into a uuid's big-endian one, then
# the map above.
_TOKEN_AND_PLAIN_LOCKED = struct.Struct(f">{len(_LOCK_TOKEN_HEAD)}s16s" + _PLAIN_LOCKED.format[1:])


def _annotations(message: BrokerMessage, locked_until_ms: int | None, lock_token: bytes | None = None) -> bytes:
    """The message-annotations section: the sender's own, then the ones the broker sets, in the order
    the generic encoder of the equivalent map would write them. With ``lock_token`` (its 16 bytes): the
    lock token's delivery-annotations section before it."""
    if (
        locked_until_ms is not None
        and message.sequence_number > 127
        and not message.annotations
        and message.partition_key is None
        and message.scheduled_enqueue_time_ms is None
        and message.dead_letter_source is None
        and message.enqueue_sequence_number is None
        and not message.state
    ):
        if lock_token is not None:
            return _TOKEN_AND_PLAIN_LOCKED.pack(_LOCK_TOKEN_HEAD, lock_token,
                                                _ANNOTATIONS_PREFIX, 0xC1, _PLAIN_LOCKED_SIZE, 6,
                                                _ENQUEUED_KEY, 0x83, message.enqueued_time_ms,
                                                _SEQUENCE_KEY, 0x81, message.sequence_number,
                                                _LOCKED_KEY, 0x83, locked_until_ms)
        return _PLAIN_LOCKED.pack(_ANNOTATIONS_PREFIX, 0xC1, _PLAIN_LOCKED_SIZE, 6,
                                  _ENQUEUED_KEY, 0x83, message.enqueued_time_ms,
                                  _SEQUENCE_KEY, 0x81, message.sequence_number,
                                  _LOCKED_KEY, 0x83, locked_until_ms)
    if lock_token is not None:
        return lock_token_annotations(lock_token) + _annotations(message, locked_until_ms)
    body = bytearray()
    count = 0
    encode = codec.encode_into
    if message.annotations:
        for key, value in message.annotations.items():
            encode(body, key)
            encode(body, value)
            count += 1
    body += _KEY[ENQUEUED_TIME]
    encode(body, Timestamp(message.enqueued_time_ms))
    body += _KEY[SEQUENCE_NUMBER]
    encode(body, Long(message.sequence_number))
    count += 2
    if locked_until_ms is not None:
        body += _KEY[LOCKED_UNTIL]
        encode(body, Timestamp(locked_until_ms))
        count += 1
    if message.partition_key is not None:
        body += _KEY[PARTITION_KEY]
        encode(body, message.partition_key)
        count += 1
    if message.scheduled_enqueue_time_ms is not None:
        body += _KEY[SCHEDULED_ENQUEUE_TIME]
        encode(body, Timestamp(message.scheduled_enqueue_time_ms))
        count += 1
    if message.dead_letter_source is not None:
        body += _KEY[DEADLETTER_SOURCE]
        encode(body, message.dead_letter_source)
        count += 1
    if message.enqueue_sequence_number is not None:
        body += _KEY[ENQUEUE_SEQUENCE_NUMBER]
        encode(body, Long(message.enqueue_sequence_number))
        count += 1
    state = int(message.state)
    if state:
        # An AMQP int, as Service Bus sends it: the Java SDK reads the state only from an Integer
        # (ServiceBusReceivedMessage.getState) and reports ACTIVE for anything else.
        body += _KEY[MESSAGE_STATE]
        encode(body, Int(state))
        count += 1
    out = bytearray(_ANNOTATIONS_PREFIX)
    size, items = len(body), 2 * count
    if size + 1 < 256 and items < 256:
        out += bytes((0xC1, size + 1, items))
    else:
        out += b"\xd1" + struct.pack(">II", size + 4, items)
    out += body
    return bytes(out)


def encode_delivery(
    message: BrokerMessage,
    *,
    header_delivery_count: int,
    locked_until_ms: int | None,
    lock_token: bytes | None = None,
    delivered: bool = False,
) -> bytes:
    """Encode a stored message as the payload of a delivery (or a peek/deferred response entry).

    ``delivered``: a delivery, which carries delivery annotations: ``lock_token`` (the token's 16
    bytes, ``Delivery.lock_token_bytes``) when locked, else an empty section (a peeked message has none).
    Written section by section with the annotation keys pre-encoded: this runs for every delivery,
    and building the annotation map and a Header object to hand to the generic encoder cost more
    than the bytes it produced (the result is the same, byte for byte).

    A locked delivery's ``{x-opt-lock-token: uuid}`` matters most inside a ``$management`` reply, which has
    no delivery tag: the Go SDK takes a deferred message's lock token from that annotation only
    (azservicebus ``newReceivedMessage``), as Service Bus sends it.
    """
    if message.delivery_annotations and (delivered or lock_token is not None):
        return _with_delivery_annotations(message, header_delivery_count, locked_until_ms, lock_token)
    parts = [_header(message.header_fields, message.time_to_live_ms, header_delivery_count),
             _annotations(message, locked_until_ms, lock_token) if lock_token is not None
             else EMPTY_DELIVERY_ANNOTATIONS + _annotations(message, locked_until_ms) if delivered
             else _annotations(message, locked_until_ms),
             _properties_section(message)]
    if message.application_properties:
        parts.append(codec.encode(Described(ULong(SECTION_APPLICATION_PROPERTIES), message.application_properties)))
    parts.append(message.body_raw)
    return b"".join(parts)


def _with_delivery_annotations(message: BrokerMessage, header_delivery_count: int, locked_until_ms: int | None,
                               lock_token: bytes | None) -> bytes:
    """A delivery of a message whose sender set delivery annotations: Service Bus passes them on, in
    one section with the lock token's ``x-opt-lock-token`` (which the broker's value wins). Rare, so
    built with the generic encoder."""
    annotations = {k: v for k, v in message.delivery_annotations.items() if k != LOCK_TOKEN}
    if lock_token is not None:
        annotations[LOCK_TOKEN] = uuid.UUID(bytes=lock_token)
    parts = [_header(message.header_fields, message.time_to_live_ms, header_delivery_count),
             codec.encode(Described(ULong(SECTION_DELIVERY_ANNOTATIONS), annotations)),
             _annotations(message, locked_until_ms), _properties_section(message)]
    if message.application_properties:
        parts.append(codec.encode(Described(ULong(SECTION_APPLICATION_PROPERTIES), message.application_properties)))
    parts.append(message.body_raw)
    return b"".join(parts)
