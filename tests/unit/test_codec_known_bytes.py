"""The codec against byte sequences written down from the AMQP 1.0 spec (part 1, section 1.6).

Round trips cannot catch an encoder and decoder that agree on a wrong encoding; these can. They also
pin the size thresholds (8-bit vs 32-bit widths) the spec requires for the compact forms.
"""

from __future__ import annotations

import math
import tracemalloc
import uuid

import pytest

from sbemulator.amqp import codec
from sbemulator.amqp.types import (
    Array,
    Byte,
    Char,
    Decimal32,
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


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, b"\x40"),
        (True, b"\x41"),
        (False, b"\x42"),
        (UByte(0xAB), b"\x50\xab"),
        (UShort(0x1234), b"\x60\x12\x34"),
        (UInt(0), b"\x43"),  # uint0
        (UInt(1), b"\x52\x01"),  # smalluint
        (UInt(255), b"\x52\xff"),
        (UInt(256), b"\x70\x00\x00\x01\x00"),
        (ULong(0), b"\x44"),  # ulong0
        (ULong(0x10), b"\x53\x10"),  # smallulong: how performative descriptors go on the wire
        (ULong(2**64 - 1), b"\x80" + b"\xff" * 8),
        (Byte(-1), b"\x51\xff"),
        (Short(-2), b"\x61\xff\xfe"),
        (Int(-128), b"\x54\x80"),  # smallint
        (Int(128), b"\x71\x00\x00\x00\x80"),
        (Long(127), b"\x55\x7f"),  # smalllong
        (Long(-129), b"\x81\xff\xff\xff\xff\xff\xff\xff\x7f"),
        (Float(1.5), b"\x72\x3f\xc0\x00\x00"),
        (1.5, b"\x82\x3f\xf8\x00\x00\x00\x00\x00\x00"),
        (Char("€"), b"\x73\x00\x00\x20\xac"),  # UTF-32BE code point
        (Timestamp(1), b"\x83\x00\x00\x00\x00\x00\x00\x00\x01"),
        (uuid.UUID(int=1), b"\x98" + b"\x00" * 15 + b"\x01"),
        (b"ab", b"\xa0\x02ab"),
        ("ab", b"\xa1\x02ab"),
        (Symbol("ab"), b"\xa3\x02ab"),
        (Decimal32(b"\x01\x02\x03\x04"), b"\x74\x01\x02\x03\x04"),
        ([], b"\x45"),  # list0
        ([True], b"\xc0\x02\x01\x41"),  # size counts the count byte
        ({Symbol("k"): None}, b"\xc1\x05\x02\xa3\x01k\x40"),  # map count = keys + values
        (Described(ULong(0x24), []), b"\x00\x53\x24\x45"),  # accepted outcome
    ],
)
def test_encoding_matches_the_spec(value, expected: bytes) -> None:
    assert codec.encode(value) == expected
    decoded, end = codec.decode(expected)
    assert end == len(expected)
    assert type(decoded) is type(value) and decoded == value


@pytest.mark.parametrize(
    ("size", "code", "header"),
    [(255, 0xA1, b"\xff"), (256, 0xB1, b"\x00\x00\x01\x00")],
)
def test_str8_vs_str32_threshold_at_256_bytes(size: int, code: int, header: bytes) -> None:
    text = "x" * size
    assert codec.encode(text) == bytes([code]) + header + text.encode()
    # the threshold counts UTF-8 bytes, not characters: 128 two-byte characters need str32
    assert codec.encode("é" * 128)[0] == 0xB1
    assert codec.encode("é" * 127)[0] == 0xA1


def test_vbin8_vs_vbin32_and_sym8_vs_sym32() -> None:
    assert codec.encode(b"\x00" * 255)[:2] == b"\xa0\xff"
    assert codec.encode(b"\x00" * 256)[:5] == b"\xb0\x00\x00\x01\x00"
    assert codec.encode(Symbol("s" * 256))[:5] == b"\xb3\x00\x00\x01\x00"


def test_list8_vs_list32_threshold() -> None:
    # list8's size byte covers the count byte plus the elements: at most 254 bytes of elements.
    fits = [b"\x00" * 252]  # one vbin8 element: 2 + 252 = 254 bytes
    assert codec.encode(fits)[:3] == b"\xc0\xff\x01"
    too_big = [b"\x00" * 253]  # 255 bytes of elements -> size 256 does not fit a byte
    assert codec.encode(too_big)[:9] == b"\xd0\x00\x00\x01\x03\x00\x00\x00\x01"
    assert codec.decode(codec.encode(too_big))[0] == too_big
    many = [None] * 256  # 256 elements: the count does not fit a byte either
    encoded = codec.encode(many)
    assert encoded[:9] == b"\xd0\x00\x00\x01\x04\x00\x00\x01\x00"
    assert codec.decode(encoded)[0] == many


def test_map32_when_large() -> None:
    big = {Symbol(f"k{i}"): Int(i) for i in range(100)}
    encoded = codec.encode(big)
    assert encoded[0] == 0xD1
    assert codec.decode(encoded)[0] == big


def test_array8_of_symbols() -> None:
    # What we send (sasl-server-mechanisms): array8 with one sym32 constructor shared by all items.
    array = Array((Symbol("ANONYMOUS"), Symbol("PLAIN")), "symbol")
    expected = b"\xe0\x18\x02\xb3" + b"\x00\x00\x00\x09ANONYMOUS" + b"\x00\x00\x00\x05PLAIN"
    assert codec.encode(array) == expected
    # What other peers send: the same array with sym8 elements.
    peer = b"\xe0\x12\x02\xa3\x09ANONYMOUS\x05PLAIN"
    decoded, end = codec.decode(peer)
    assert end == len(peer)
    assert decoded == array and decoded.element_type == "symbol"
    assert all(type(item) is Symbol for item in decoded)


def test_array_of_uint_uses_one_constructor() -> None:
    assert codec.encode(Array((UInt(1), UInt(2)), "uint")) == (
        b"\xe0\x0a\x02\x70\x00\x00\x00\x01\x00\x00\x00\x02"
    )
    # smalluint as the element constructor is legal too
    decoded, _ = codec.decode(b"\xe0\x04\x02\x52\x01\x02")
    assert decoded == Array((UInt(1), UInt(2)), "uint")


def test_empty_array_keeps_its_element_type() -> None:
    assert codec.encode(Array((), "long")) == b"\xe0\x02\x00\x81"
    decoded, _ = codec.decode(b"\xe0\x02\x00\x81")
    assert decoded == Array((), "long")


def test_described_array_decodes_each_item_as_described() -> None:
    data = b"\xe0\x08\x02\x00\xa3\x01d\x52\x01\x02"
    decoded, end = codec.decode(data)
    assert end == len(data)
    assert decoded.element_type == "described"
    assert decoded.items == (Described(Symbol("d"), UInt(1)), Described(Symbol("d"), UInt(2)))
    assert codec.decode(codec.encode(decoded))[0] == decoded


def test_boolean_with_explicit_byte_and_zero_width_booleans_in_arrays() -> None:
    assert codec.decode(b"\x56\x01")[0] is True
    assert codec.decode(b"\x56\x00")[0] is False
    with pytest.raises(codec.DecodeError):
        codec.decode(b"\x56\x02")
    decoded, _ = codec.decode(b"\xe0\x02\x03\x41")  # three 'true' elements of zero width
    assert list(decoded) == [True, True, True]


def test_double_nan_and_float32_special_values() -> None:
    assert math.isnan(codec.decode(codec.encode(float("nan")))[0])
    assert codec.decode(codec.encode(Float(float("-inf"))))[0] == float("-inf")


@pytest.mark.parametrize(
    "value",
    [UByte(256), UShort(-1), UInt(2**32), ULong(-1), Byte(128), Short(2**15), Int(2**31), Long(2**63),
     2**63, Timestamp(2**63), Char("ab"), Decimal32(b"\x00"), object(),
     Array((UInt(2**32),), "uint"), Array((1,), "no-such-type"), Array((b"\x00",), "decimal32")],
)
def test_values_without_an_encoding_raise_encode_error(value) -> None:
    with pytest.raises(codec.EncodeError):
        codec.encode(value)


def test_float32_out_of_range_is_an_encode_error() -> None:
    with pytest.raises(codec.EncodeError):
        codec.encode(Float(1e300))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x01",  # unassigned format code
        b"\xa1\x05ab",  # str8 longer than the data
        b"\xa1\x02\xff\xfe",  # invalid UTF-8
        b"\x73\x00\x11\x00\x00",  # char above U+10FFFF
        b"\xc0\x05\x03\x40",  # list size beyond the data
        b"\xc0\x02\x02\x40\x40",  # list count beyond its size
        b"\xc0\x03\x01\x40\x40",  # list size larger than its content
        b"\xc1\x02\x01\x40",  # map with an odd number of elements
        b"\xc1\x04\x02\xc0\x01\x00\x40",  # unhashable map key (a list)
        b"\xe0\x03\x02\x01\x00",  # array with an unknown element constructor
        b"\xe0\x02\x02\x52\x01\x02",  # array elements beyond its size
        b"\x00",  # descriptor missing
        b"\x00\x53\x10",  # described value missing
    ],
)
def test_malformed_encodings_raise_decode_error(data: bytes) -> None:
    with pytest.raises(codec.DecodeError):
        codec.decode(data)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("element", [0x40, 0x41, 0x42, 0x43, 0x44, 0x45])
def test_huge_count_of_zero_width_array_elements_is_refused_quickly(element: int) -> None:
    """An 11-byte array claiming 4 billion empty elements must not make the decoder loop or allocate."""
    data = b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff" + bytes([element])
    # Refused before any element is made: no allocation to speak of (a list of 4 billion would need
    # 32 GB), and the timeout above ends a loop over them. No clock is read: a loaded machine must
    # not fail this (tests/README.md, no timed asserts).
    tracemalloc.start()
    try:
        with pytest.raises(codec.DecodeError):
            codec.decode(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_array_of_nulls_with_a_sane_count_still_decodes() -> None:
    decoded, _ = codec.decode(b"\xe0\x02\x0a\x40")
    assert list(decoded) == [None] * 10 and decoded.element_type == "null"
