"""Message sections (spec 3.2): parsing keeps the bare message's bytes, batches split, garbage is refused.

The emulator rebuilds header and annotations but must hand the sender's properties, application
properties and body back byte for byte, so these tests compare raw bytes, not decoded values.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbemulator.amqp import codec
from sbemulator.amqp.message import (
    SECTION_AMQP_VALUE,
    SECTION_DATA,
    MessageDecodeError,
    encode_message,
    parse_message,
    split_batch,
)
from sbemulator.amqp.performatives import Header, Properties
from sbemulator.amqp.types import Described, Int, Symbol, UByte, UInt, ULong


def _section(code: int, value) -> bytes:
    return codec.encode(Described(ULong(code), value))


def test_all_sections_parse_and_raw_bytes_are_kept() -> None:
    props = Properties(message_id="m-1", to="orders", correlation_id=uuid.UUID(int=5), group_id="s1")
    payload = (
        codec.encode(Header(True, UByte(4), UInt(1000), None, UInt(2)))
        + _section(0x71, {Symbol("x-da"): 1})
        + _section(0x72, {Symbol("x-opt-partition-key"): "p"})
        + codec.encode(props)
        + _section(0x74, {"Priority": "High", "n": Int(3)})
        + _section(0x75, b"hello")
        + _section(0x75, b" world")
        + _section(0x78, {Symbol("f"): 1})
    )
    msg = parse_message(payload)
    assert msg.header.durable is True and msg.header.priority == 4 and msg.header.delivery_count == 2
    assert msg.delivery_annotations == {Symbol("x-da"): 1}
    assert msg.message_annotations == {Symbol("x-opt-partition-key"): "p"}
    assert msg.properties.message_id == "m-1" and msg.properties.group_id == "s1"
    assert msg.properties_raw == codec.encode(props)
    assert msg.application_properties == {"Priority": "High", "n": 3}
    assert type(msg.application_properties["n"]) is Int
    assert msg.body_value() == b"hello world"
    assert msg.body_raw == payload[payload.index(_section(0x75, b"hello")):]  # footer included


def test_amqp_value_and_sequence_bodies() -> None:
    msg = parse_message(_section(0x77, {"a": 1}))
    assert msg.body_sections == [(SECTION_AMQP_VALUE, {"a": 1})]
    assert msg.body_value() == {"a": 1}
    seq = parse_message(_section(0x76, [1, 2]) + _section(0x76, [3]))
    assert seq.body_value() == [1, 2]
    assert parse_message(b"").body_value() is None


def test_symbolic_section_descriptors_are_understood() -> None:
    payload = codec.encode(Described(Symbol("amqp:data:binary"), b"x"))
    assert parse_message(payload).body_sections == [(SECTION_DATA, b"x")]


def test_encode_message_copies_raw_sections_and_rebuilds_the_rest() -> None:
    original = encode_message(properties=Properties(message_id="id"), application_properties={"k": "v"},
                              data=b"body")
    parsed = parse_message(original)
    rebuilt = encode_message(
        header=Header(None, None, None, None, UInt(1)),
        message_annotations={Symbol("x-opt-sequence-number"): 7},
        properties_raw=parsed.properties_raw,
        application_properties=parsed.application_properties,
        body_raw=parsed.body_raw,
    )
    again = parse_message(rebuilt)
    assert again.header.delivery_count == 1
    assert again.message_annotations == {Symbol("x-opt-sequence-number"): 7}
    assert again.properties_raw == parsed.properties_raw
    assert again.body_raw == parsed.body_raw == _section(0x75, b"body")
    assert again.application_properties == {"k": "v"}


def test_encode_message_without_body_sends_a_null_amqp_value() -> None:
    assert parse_message(encode_message()).body_sections == [(SECTION_AMQP_VALUE, None)]


def test_split_batch_returns_each_encoded_message() -> None:
    inner = [encode_message(data=f"m{i}".encode()) for i in range(3)]
    batch = encode_message(message_annotations={Symbol("x-opt-partition-key"): "p"}, data=None,
                           body_raw=b"".join(_section(0x75, m) for m in inner))
    assert split_batch(batch) == inner
    with pytest.raises(MessageDecodeError):
        split_batch(_section(0x77, "not a batch"))


@pytest.mark.parametrize(
    "payload",
    [
        b"\x40",  # not a described section
        _section(0x99, 1),  # unknown section
        _section(0x74, [1, 2]),  # application-properties that is not a map
        _section(0x70, 5),  # header that is not a list
        _section(0x73, b"x"),  # properties that is not a list
        b"\x00\x53\x75\xa0\x09short",  # truncated data section
    ],
)
def test_malformed_messages_raise_message_decode_error(payload: bytes) -> None:
    with pytest.raises(MessageDecodeError):
        parse_message(payload)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120))
def test_random_payloads_only_raise_message_decode_error(payload: bytes) -> None:
    try:
        parse_message(payload)
    except MessageDecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78]),
    st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3), st.binary(max_size=3),
              st.lists(st.one_of(st.none(), st.text(max_size=2), st.integers(0, 3)), max_size=14),
              st.dictionaries(st.text(max_size=2), st.integers(0, 3), max_size=2)),
)
def test_sections_with_any_value_only_raise_message_decode_error(code: int, value) -> None:
    try:
        parse_message(_section(code, value))
    except MessageDecodeError:
        pass
