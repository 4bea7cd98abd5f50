"""A delivery's payload, written section by section, equals the generic encoding of the same message.

``encode_delivery`` writes the header and the message annotations without building a Header object
and an annotation map; this test keeps the straightforward construction as the reference and checks
that both give the same bytes for every combination of the fields that vary per message.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sbemulator.amqp import codec
from sbemulator.amqp.message import encode_message, parse_message
from sbemulator.amqp.performatives import Header, Properties
from sbemulator.amqp.types import Described, Int, Long, Symbol, Timestamp, UByte, UInt, ULong
from sbemulator.gateway.deliveries import (
    DEADLETTER_SOURCE,
    ENQUEUE_SEQUENCE_NUMBER,
    ENQUEUED_TIME,
    LOCK_TOKEN,
    LOCKED_UNTIL,
    MESSAGE_STATE,
    PARTITION_KEY,
    SCHEDULED_ENQUEUE_TIME,
    SEQUENCE_NUMBER,
    encode_delivery,
)
from sbemulator.model import BrokerMessage, MessageState


def reference_delivery(message: BrokerMessage, header_delivery_count: int, locked_until_ms: int | None,
                       lock_key: bytes | None = None, delivered: bool = False) -> bytes:
    """The delivery built the plain way: a Header, the delivery- and message-annotation maps, the generic
    encoder. ``delivered``: a delivery on a link (peek-locked with ``lock_key``, else receive-and-delete)."""
    annotations: dict = dict(message.annotations) if message.annotations else {}
    annotations[ENQUEUED_TIME] = Timestamp(message.enqueued_time_ms)
    annotations[SEQUENCE_NUMBER] = Long(message.sequence_number)
    if locked_until_ms is not None:
        annotations[LOCKED_UNTIL] = Timestamp(locked_until_ms)
    if message.partition_key is not None:
        annotations[PARTITION_KEY] = message.partition_key
    if message.scheduled_enqueue_time_ms is not None:
        annotations[SCHEDULED_ENQUEUE_TIME] = Timestamp(message.scheduled_enqueue_time_ms)
    if message.dead_letter_source is not None:
        annotations[DEADLETTER_SOURCE] = message.dead_letter_source
    if message.enqueue_sequence_number is not None:
        annotations[ENQUEUE_SEQUENCE_NUMBER] = Long(message.enqueue_sequence_number)
    if int(message.state):
        annotations[MESSAGE_STATE] = Int(int(message.state))
    ttl = message.time_to_live_ms
    durable, priority, first_acquirer = message.header_fields or (None, None, None)
    header = Header(durable, None if priority is None else UByte(priority),
                    UInt(ttl) if ttl and ttl <= 0xFFFFFFFF else None, first_acquirer,
                    UInt(max(0, header_delivery_count)))
    payload = encode_message(header=header, message_annotations=annotations, properties_raw=message.properties_raw,
                             application_properties=message.application_properties or None,
                             body_raw=message.body_raw)
    if not delivered:
        return payload
    # encode_message leaves an empty map out; a delivery carries the section even then
    header_bytes = codec.encode(header)
    da = {LOCK_TOKEN: uuid.UUID(bytes_le=lock_key)} if lock_key is not None else {}
    return header_bytes + codec.encode(Described(ULong(0x71), da)) + payload[len(header_bytes):]


def _message(**fields: Any) -> BrokerMessage:
    base: dict[str, Any] = dict(
        properties_raw=encode_message(properties=Properties(message_id="m-1"))[:-4],  # drop the null body
        application_properties={}, body_raw=b"\x00\x53\x75\xa0\x03abc", message_id="m-1", correlation_id=None,
        session_id=None, subject=None, to=None, reply_to=None, reply_to_session_id=None, content_type=None,
        partition_key=None, time_to_live_ms=None, scheduled_enqueue_time_ms=None, size=10,
    )
    base.update(fields)
    return BrokerMessage(**base)


HEADER_FIELDS = st.tuples(st.one_of(st.none(), st.booleans()), st.one_of(st.none(), st.integers(0, 255)),
                          st.one_of(st.none(), st.booleans()))
SMALL_OR_LARGE = st.sampled_from([0, 1, 127, 128, 255, 256, 2**31, 2**40])
TIMES = st.integers(0, 2**45)


@given(
    sequence_number=SMALL_OR_LARGE, enqueued=TIMES, locked=st.one_of(st.none(), TIMES),
    ttl=st.one_of(st.none(), st.sampled_from([0, 1, 255, 256, 0xFFFFFFFF, 0x100000000])),
    partition_key=st.one_of(st.none(), st.text(max_size=20)), scheduled=st.one_of(st.none(), TIMES),
    dead_letter_source=st.one_of(st.none(), st.just("orders")),
    enqueue_sequence_number=st.one_of(st.none(), SMALL_OR_LARGE), state=st.sampled_from(list(MessageState)),
    count=st.integers(-1, 300), sender_annotations=st.booleans(), app_properties=st.booleans(),
    big_annotations=st.booleans(), header_fields=st.one_of(st.none(), HEADER_FIELDS),
    lock_key=st.one_of(st.none(), st.binary(min_size=16, max_size=16)),
)
def test_encode_delivery_equals_the_generic_encoding(
    sequence_number, enqueued, locked, ttl, partition_key, scheduled, dead_letter_source,
    enqueue_sequence_number, state, count, sender_annotations, app_properties, big_annotations, header_fields,
    lock_key,
) -> None:
    annotations = {Symbol("x-custom"): "v", Symbol("x-n"): Int(7)} if sender_annotations else {}
    if big_annotations:
        annotations[Symbol("x-big")] = "b" * 300  # forces the 32-bit map encoding
    message = _message(
        sequence_number=sequence_number, enqueued_time_ms=enqueued, time_to_live_ms=ttl, partition_key=partition_key,
        scheduled_enqueue_time_ms=scheduled, dead_letter_source=dead_letter_source,
        enqueue_sequence_number=enqueue_sequence_number, state=state, annotations=annotations,
        application_properties={"Priority": "High", "n": Int(3), "id": uuid.UUID(int=5)} if app_properties else {},
        header_fields=header_fields,
    )
    payload = encode_delivery(message, header_delivery_count=count, locked_until_ms=locked)
    assert payload == reference_delivery(message, count, locked)
    assert parse_message(payload).body_raw == message.body_raw
    token = uuid.UUID(bytes_le=lock_key).bytes if lock_key is not None else None
    delivered = encode_delivery(message, header_delivery_count=count, locked_until_ms=locked, lock_token=token,
                                delivered=True)
    assert delivered == reference_delivery(message, count, locked, lock_key, delivered=True)
    parsed = parse_message(delivered)
    assert parsed.delivery_annotations == ({LOCK_TOKEN: uuid.UUID(bytes_le=lock_key)} if lock_key is not None else {})
    if header_fields is not None:
        assert (parsed.header.durable, parsed.header.priority, parsed.header.first_acquirer) == header_fields


@given(sequence_number=st.one_of(SMALL_OR_LARGE, st.integers(0, 2**63 - 1)), enqueued=TIMES, locked=TIMES,
       ttl=st.one_of(st.none(), st.integers(0, 2**33)), count=st.integers(-1, 1000))
def test_a_plain_locked_delivery_equals_the_generic_encoding(sequence_number, enqueued, locked, ttl, count) -> None:
    # The shape of nearly every peek-lock delivery (no sender annotations, no optional broker ones),
    # which encode_delivery writes with one struct; the general test above reaches it only by chance.
    message = _message(sequence_number=sequence_number, enqueued_time_ms=enqueued, time_to_live_ms=ttl)
    key = uuid.UUID(int=sequence_number).bytes_le
    for _ in range(2):  # the second time the header comes from the (fields, ttl, count) cache
        payload = encode_delivery(message, header_delivery_count=count, locked_until_ms=locked,
                                  lock_token=uuid.UUID(bytes_le=key).bytes, delivered=True)
        assert payload == reference_delivery(message, count, locked, key, delivered=True)


def test_a_management_reply_message_carries_its_lock_token_as_a_delivery_annotation() -> None:
    # receive-by-sequence-number hands a deferred message back inside a $management reply, with no
    # delivery tag: the Go SDK reads its lock token only from the x-opt-lock-token delivery annotation
    # (tests/interop/go TestDeferAndReceiveDeferred). The sections stay in the order AMQP 1.0 part 3,
    # 3.2 gives them: header, delivery-annotations, message-annotations, properties, ...
    token = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    message = _message(sequence_number=7, enqueued_time_ms=1000, state=MessageState.DEFERRED)
    payload = encode_delivery(message, header_delivery_count=1, locked_until_ms=5000, lock_token=token.bytes,
                              delivered=True)
    parsed = parse_message(payload)
    assert parsed.delivery_annotations == {Symbol("x-opt-lock-token"): token}
    assert parsed.message_annotations is not None and parsed.message_annotations[SEQUENCE_NUMBER] == 7
    assert parsed.body_raw == message.body_raw
    without = encode_delivery(message, header_delivery_count=1, locked_until_ms=5000)
    assert parse_message(without).delivery_annotations is None
    assert without == reference_delivery(message, 1, 5000)
