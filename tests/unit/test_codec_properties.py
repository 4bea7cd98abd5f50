"""Property-based tests of the AMQP type codec: round trips of every type, and decoding garbage.

The gateway relies on two guarantees: a decoded value re-encodes to the same AMQP type (so a
sender's application properties reach a receiver unchanged), and malformed bytes only ever raise
``codec.DecodeError`` (which becomes ``amqp:decode-error`` instead of a crashed connection).
"""

from __future__ import annotations

import math
import struct
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbemulator.amqp import codec
from sbemulator.amqp.types import (
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def f32(value: float) -> float:
    """What a 32-bit float field can hold: the double rounded through the wire format."""
    return struct.unpack(">f", struct.pack(">f", value))[0]


def same(a: Any, b: Any) -> bool:
    """Deep equality that also requires the exact same Python type and treats NaN as equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, Described):
        return same(a.descriptor, b.descriptor) and same(a.value, b.value)
    if isinstance(a, Array):
        return (
            a.element_type == b.element_type
            and same(a.descriptor, b.descriptor)
            and same(list(a.items), list(b.items))
        )
    return a == b


def roundtrip(value: Any) -> Any:
    data = codec.encode(value)
    decoded, end = codec.decode(data)
    assert end == len(data), "the decoder must consume exactly the encoding"
    return decoded


# ------------------------------------------------------------------ strategies: scalars
def ints(cls: type, low: int, high: int) -> st.SearchStrategy:
    return st.integers(low, high).map(cls)


symbols = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=300).map(Symbol)
strings = st.text(max_size=300)  # hypothesis never produces lone surrogates (not valid UTF-8)
binaries = st.binary(max_size=300)
floats32 = st.floats(width=32, allow_nan=False).map(Float)
doubles = st.floats(allow_nan=True, allow_infinity=True)
chars = st.integers(0, 0x10FFFF).map(lambda cp: Char(chr(cp)))
timestamps = ints(Timestamp, -(2**63), 2**63 - 1)
uuids = st.uuids()

ELEMENT_STRATEGIES: dict[str, st.SearchStrategy] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "ubyte": ints(UByte, 0, 0xFF),
    "ushort": ints(UShort, 0, 0xFFFF),
    "uint": ints(UInt, 0, 0xFFFFFFFF),
    "ulong": ints(ULong, 0, 2**64 - 1),
    "byte": ints(Byte, -128, 127),
    "short": ints(Short, -(2**15), 2**15 - 1),
    "int": ints(Int, -(2**31), 2**31 - 1),
    "long": ints(Long, -(2**63), 2**63 - 1),
    "float": floats32,
    "double": doubles,
    "decimal32": st.binary(min_size=4, max_size=4).map(Decimal32),
    "decimal64": st.binary(min_size=8, max_size=8).map(Decimal64),
    "decimal128": st.binary(min_size=16, max_size=16).map(Decimal128),
    "char": chars,
    "timestamp": timestamps,
    "uuid": uuids,
    "binary": binaries,
    "string": strings,
    "symbol": symbols,
}

scalars = st.one_of(*ELEMENT_STRATEGIES.values())
# Keys that stay hashable and compare reliably after decoding (no NaN, no containers).
map_keys = st.one_of(
    *(s for name, s in ELEMENT_STRATEGIES.items() if name not in ("float", "double", "null"))
)
descriptors = st.one_of(ints(ULong, 0, 2**64 - 1), symbols)


def arrays_of(element: str, items: st.SearchStrategy, max_size: int = 8) -> st.SearchStrategy:
    return st.lists(items, max_size=max_size).map(lambda xs: Array(tuple(xs), element))


def compounds(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(map_keys, children, max_size=6),
        st.builds(Described, descriptors, children),
        arrays_of("list", st.lists(children, max_size=4), max_size=4),
        arrays_of("map", st.dictionaries(map_keys, children, max_size=4), max_size=4),
    )


flat_arrays = st.one_of(*(arrays_of(name, s) for name, s in ELEMENT_STRATEGIES.items()))
values = st.recursive(st.one_of(scalars, flat_arrays), compounds, max_leaves=30)


# ------------------------------------------------------------------ round trips
@FAST
@given(values)
def test_any_value_round_trips_to_the_same_type_and_value(value: Any) -> None:
    assert same(roundtrip(value), value)


@FAST
@given(st.sampled_from(sorted(ELEMENT_STRATEGIES)), st.data())
def test_array_of_every_element_type_round_trips_including_empty(element: str, data: st.DataObject) -> None:
    items = data.draw(st.lists(ELEMENT_STRATEGIES[element], max_size=40))
    for array in (Array(tuple(items), element), Array((), element)):
        decoded = roundtrip(array)
        assert same(decoded, array)
        assert decoded.element_type == element


@FAST
@given(flat_arrays)
def test_arrays_of_arrays_round_trip(inner: Array) -> None:
    outer = Array((inner, inner), "array")
    assert same(roundtrip(outer), outer)


@FAST
@given(descriptors, st.sampled_from(sorted(set(ELEMENT_STRATEGIES) - {"null"})), st.data())
def test_described_array_round_trips(descriptor: Any, element: str, data: st.DataObject) -> None:
    raw = data.draw(st.lists(ELEMENT_STRATEGIES[element], min_size=1, max_size=10))
    array = Array(tuple(Described(descriptor, v) for v in raw), "described", descriptor)
    decoded = roundtrip(array)
    assert same(decoded, array)


@FAST
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_float32_round_trips_through_the_32_bit_wire_format(value: float) -> None:
    try:
        expected = f32(value)
    except OverflowError:
        return  # covered by test_float32_out_of_range_is_an_encode_error
    decoded = roundtrip(Float(value))
    assert type(decoded) is Float
    assert same(float(decoded), expected)


@FAST
@given(doubles)
def test_double_round_trips_bit_exact_nan_aware(value: float) -> None:
    decoded = roundtrip(value)
    assert type(decoded) is float
    assert same(decoded, value)


@FAST
@given(st.integers(-(2**63), 2**63 - 1))
def test_plain_int_is_a_long(value: int) -> None:
    decoded = roundtrip(value)
    assert type(decoded) is Long and decoded == value


@settings(max_examples=60, deadline=None)
@given(values, values)
def test_decode_all_splits_concatenated_values(a: Any, b: Any) -> None:
    decoded = codec.decode_all(codec.encode(a) + codec.encode(b))
    assert len(decoded) == 2 and same(decoded[0], a) and same(decoded[1], b)


# ------------------------------------------------------------------ fuzzing the decoder
def _decode_only_raises_decode_error(data: bytes) -> None:
    try:
        codec.decode(data)
    except codec.DecodeError:
        pass
    try:
        codec.decode_all(data)
    except codec.DecodeError:
        pass


@settings(max_examples=800, deadline=None)
@given(st.binary(max_size=200))
def test_decoding_random_bytes_only_raises_decode_error(data: bytes) -> None:
    _decode_only_raises_decode_error(data)


INTERESTING_CODES = [0x00, 0x40, 0x41, 0x43, 0x45, 0x52, 0x56, 0x70, 0x73, 0x98, 0xA0, 0xA1, 0xA3,
                     0xB0, 0xB1, 0xB3, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(INTERESTING_CODES), st.integers(0, 255)), max_size=120))
def test_decoding_constructor_soup_only_raises_decode_error(codes: list[int]) -> None:
    """Random bytes rarely form compound headers; sequences of real format codes do."""
    _decode_only_raises_decode_error(bytes(codes))


@settings(max_examples=150, deadline=None)
@given(values, st.data())
def test_decoding_corrupted_encodings_only_raises_decode_error(value: Any, data: st.DataObject) -> None:
    encoded = bytearray(codec.encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(encoded) - 1))
        encoded[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    _decode_only_raises_decode_error(bytes(encoded))
    _decode_only_raises_decode_error(bytes(encoded[:cut]))


def test_deep_nesting_is_a_decode_error_not_a_crash() -> None:
    _decode_only_raises_decode_error(b"\x00" * 100_000)
    _decode_only_raises_decode_error(b"\xc0\xff\x01" * 20_000)


def test_uuid_values_are_uuid_instances() -> None:
    value = uuid.uuid4()
    assert roundtrip(value) == value and type(roundtrip(value)) is uuid.UUID
