"""Encoder and decoder for the AMQP 1.0 type system (spec part 1, "Types").

Pure functions over bytes: no I/O, no protocol state. Decoding dispatches on the format code
through a 256-entry table, and encoding on the exact Python class, because these two functions
run for every frame and every message the emulator handles.

Why one file of more than 800 lines: the type system is one table (a format code's decoder beside its
encoder, the constructors both sides share), read and checked against part 1 of the specification
section by section; the two halves are marked below. The per-call paths use this module's globals
directly, which a split behind a facade would turn into imports of imports.
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable
from typing import Any

from .types import (
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


class DecodeError(ValueError):
    """The bytes are not a valid AMQP encoding (maps to ``amqp:decode-error``)."""


class EncodeError(ValueError):
    """The value has no AMQP encoding (out of range, unsupported type)."""


_u8 = struct.Struct(">B")
_u16 = struct.Struct(">H")
_u32 = struct.Struct(">I")
_u64 = struct.Struct(">Q")
_i8 = struct.Struct(">b")
_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_f32 = struct.Struct(">f")
_f64 = struct.Struct(">d")
_u8u8 = struct.Struct(">BB")
_u32u32 = struct.Struct(">II")

# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

Decoder = Callable[[bytes, int], tuple[Any, int]]
_DECODERS: list[Decoder | None] = [None] * 256


def _register(*codes: int):
    def wrap(fn: Decoder) -> Decoder:
        for code in codes:
            _DECODERS[code] = fn
        return fn

    return wrap


def _fixed(code: int, unpacker: struct.Struct, wrapper: type) -> None:
    size = unpacker.size
    unpack = unpacker.unpack_from

    def decode(data: bytes, off: int) -> tuple[Any, int]:
        end = off + size
        if end > len(data):
            raise DecodeError(f"truncated value for format code 0x{code:02x}")
        return wrapper(unpack(data, off)[0]), end

    _DECODERS[code] = decode


_fixed(0x50, _u8, UByte)
_fixed(0x60, _u16, UShort)
_fixed(0x70, _u32, UInt)
_fixed(0x52, _u8, UInt)
_fixed(0x80, _u64, ULong)
_fixed(0x53, _u8, ULong)
_fixed(0x51, _i8, Byte)
_fixed(0x61, _i16, Short)
_fixed(0x71, _i32, Int)
_fixed(0x54, _i8, Int)
_fixed(0x81, _i64, Long)
_fixed(0x55, _i8, Long)
_fixed(0x72, _f32, Float)
_fixed(0x82, _f64, float)
_fixed(0x83, _i64, Timestamp)

_UINT0 = UInt(0)
_ULONG0 = ULong(0)


@_register(0x40)
def _d_null(data: bytes, off: int) -> tuple[Any, int]:
    return None, off


@_register(0x41)
def _d_true(data: bytes, off: int) -> tuple[Any, int]:
    return True, off


@_register(0x42)
def _d_false(data: bytes, off: int) -> tuple[Any, int]:
    return False, off


@_register(0x43)
def _d_uint0(data: bytes, off: int) -> tuple[Any, int]:
    return _UINT0, off


@_register(0x44)
def _d_ulong0(data: bytes, off: int) -> tuple[Any, int]:
    return _ULONG0, off


@_register(0x45)
def _d_list0(data: bytes, off: int) -> tuple[Any, int]:
    return [], off


@_register(0x56)
def _d_boolean(data: bytes, off: int) -> tuple[Any, int]:
    if off >= len(data):
        raise DecodeError("truncated boolean")
    byte = data[off]
    if byte > 1:
        raise DecodeError(f"invalid boolean byte 0x{byte:02x}")
    return byte == 1, off + 1


def _raw(size: int, wrapper: type) -> Decoder:
    def decode(data: bytes, off: int) -> tuple[Any, int]:
        end = off + size
        if end > len(data):
            raise DecodeError("truncated fixed-width value")
        return wrapper(data[off:end]), end

    return decode


_DECODERS[0x74] = _raw(4, Decimal32)
_DECODERS[0x84] = _raw(8, Decimal64)
_DECODERS[0x94] = _raw(16, Decimal128)


@_register(0x98)
def _d_uuid(data: bytes, off: int) -> tuple[Any, int]:
    end = off + 16
    if end > len(data):
        raise DecodeError("truncated uuid")
    return uuid.UUID(bytes=bytes(data[off:end])), end


@_register(0x73)
def _d_char(data: bytes, off: int) -> tuple[Any, int]:
    end = off + 4
    if end > len(data):
        raise DecodeError("truncated char")
    try:
        return Char(chr(_u32.unpack_from(data, off)[0])), end
    except (ValueError, OverflowError) as exc:
        raise DecodeError(f"invalid char: {exc}") from None


def _variable(width: struct.Struct, convert: Callable[[bytes], Any]) -> Decoder:
    wsize = width.size
    unpack = width.unpack_from

    def decode(data: bytes, off: int) -> tuple[Any, int]:
        if off + wsize > len(data):
            raise DecodeError("truncated length")
        (length,) = unpack(data, off)
        start = off + wsize
        end = start + length
        if end > len(data):
            raise DecodeError(f"value length {length} exceeds the available {len(data) - start} bytes")
        return convert(data[start:end]), end

    return decode


def _to_str(raw: bytes) -> str:
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string: {exc}") from None


def _to_symbol(raw: bytes) -> Symbol:
    try:
        return Symbol(bytes(raw).decode("ascii"))
    except UnicodeDecodeError:
        # Some clients put non-ASCII into symbols; be lenient like most brokers.
        return Symbol(bytes(raw).decode("utf-8", "replace"))


_DECODERS[0xA0] = _variable(_u8, bytes)
_DECODERS[0xB0] = _variable(_u32, bytes)
_DECODERS[0xA1] = _variable(_u8, _to_str)
_DECODERS[0xB1] = _variable(_u32, _to_str)
_DECODERS[0xA3] = _variable(_u8, _to_symbol)
_DECODERS[0xB3] = _variable(_u32, _to_symbol)


def _compound(width: struct.Struct, as_map: bool) -> Decoder:
    wsize = width.size
    unpack = width.unpack_from

    def decode(data: bytes, off: int) -> tuple[Any, int]:
        if off + 2 * wsize > len(data):
            raise DecodeError("truncated compound header")
        size = unpack(data, off)[0]
        count = unpack(data, off + wsize)[0]
        end = off + wsize + size
        if size < wsize or end > len(data):
            raise DecodeError(f"compound size {size} exceeds the available bytes")
        pos = off + 2 * wsize
        items: list[Any] = []
        append = items.append
        for _ in range(count):
            if pos >= end:
                raise DecodeError("compound count exceeds its size")
            code = data[pos]
            decoder = _DECODERS[code]
            if decoder is None:
                raise DecodeError(f"unknown format code 0x{code:02x}")
            value, pos = decoder(data, pos + 1)
            append(value)
        if pos != end:
            raise DecodeError("compound size does not match its content")
        if not as_map:
            return items, end
        if count % 2:
            raise DecodeError("map with an odd number of elements")
        try:
            return dict(zip(items[::2], items[1::2], strict=True)), end
        except TypeError:
            raise DecodeError("map key is not hashable") from None

    return decode


_DECODERS[0xC0] = _compound(_u8, False)
_DECODERS[0xD0] = _compound(_u32, False)
_DECODERS[0xC1] = _compound(_u8, True)
_DECODERS[0xD1] = _compound(_u32, True)


@_register(0x00)
def _d_described(data: bytes, off: int) -> tuple[Any, int]:
    descriptor, off = _decode_at(data, off)
    value, off = _decode_at(data, off)
    return Described(descriptor, value), off


_ELEMENT_NAMES = {
    0x40: "null", 0x41: "boolean", 0x42: "boolean", 0x56: "boolean", 0x50: "ubyte", 0x60: "ushort",
    0x70: "uint", 0x52: "uint", 0x43: "uint", 0x80: "ulong", 0x53: "ulong", 0x44: "ulong",
    0x51: "byte", 0x61: "short", 0x71: "int", 0x54: "int", 0x81: "long", 0x55: "long", 0x72: "float",
    0x82: "double", 0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128", 0x73: "char",
    0x83: "timestamp", 0x98: "uuid", 0xA0: "binary", 0xB0: "binary", 0xA1: "string", 0xB1: "string",
    0xA3: "symbol", 0xB3: "symbol", 0x45: "list", 0xC0: "list", 0xD0: "list", 0xC1: "map",
    0xD1: "map", 0xE0: "array", 0xF0: "array",
}


_ZERO_WIDTH = frozenset((0x40, 0x41, 0x42, 0x43, 0x44, 0x45))
_MAX_ZERO_WIDTH_ELEMENTS = 65536


def _array(width: struct.Struct) -> Decoder:
    wsize = width.size
    unpack = width.unpack_from

    def decode(data: bytes, off: int) -> tuple[Any, int]:
        if off + 2 * wsize + 1 > len(data):
            raise DecodeError("truncated array header")
        size = unpack(data, off)[0]
        count = unpack(data, off + wsize)[0]
        end = off + wsize + size
        if end > len(data):
            raise DecodeError(f"array size {size} exceeds the available bytes")
        pos = off + 2 * wsize
        descriptor = None
        code = data[pos]
        pos += 1
        if code == 0x00:
            descriptor, pos = _decode_at(data, pos)
            code = data[pos]
            pos += 1
        decoder = _DECODERS[code]
        name = _ELEMENT_NAMES.get(code)
        if decoder is None or name is None:
            raise DecodeError(f"unknown array element format code 0x{code:02x}")
        if code in _ZERO_WIDTH and count > _MAX_ZERO_WIDTH_ELEMENTS:
            # Nothing bounds these by the array's size: refuse rather than loop over a 32-bit count.
            raise DecodeError(f"array of {count} zero-width elements is too large")
        items = []
        for _ in range(count):
            value, pos = decoder(data, pos)
            if pos > end:
                raise DecodeError("array content exceeds its size")
            items.append(Described(descriptor, value) if descriptor is not None else value)
        if pos != end:
            raise DecodeError("array size does not match its content")
        if descriptor is not None:
            return Array(tuple(items), "described", descriptor), end
        return Array(tuple(items), name), end

    return decode


_DECODERS[0xE0] = _array(_u8)
_DECODERS[0xF0] = _array(_u32)


def _decode_at(data: bytes, off: int) -> tuple[Any, int]:
    if off >= len(data):
        raise DecodeError("unexpected end of data")
    code = data[off]
    decoder = _DECODERS[code]
    if decoder is None:
        raise DecodeError(f"unknown format code 0x{code:02x}")
    return decoder(data, off + 1)


def decode(data: bytes, offset: int = 0) -> tuple[Any, int]:
    """Decode one value at ``offset``; returns the value and the offset just past it."""
    try:
        return _decode_at(data, offset)
    except DecodeError:
        raise
    except (struct.error, IndexError, RecursionError, OverflowError) as exc:
        raise DecodeError(f"malformed encoding: {exc}") from None


def decode_all(data: bytes) -> list[Any]:
    """Decode a concatenation of values (a message is a sequence of described sections)."""
    values = []
    off = 0
    end = len(data)
    while off < end:
        value, off = decode(data, off)
        values.append(value)
    return values


# ---------------------------------------------------------------------------------------------
# Encoding
# ---------------------------------------------------------------------------------------------

Encoder = Callable[[bytearray, Any], None]


def _e_null(out: bytearray, value: Any) -> None:
    out.append(0x40)


def _e_bool(out: bytearray, value: bool) -> None:
    out.append(0x41 if value else 0x42)


def _range_check(value: int, low: int, high: int, name: str) -> None:
    if not low <= value <= high:
        raise EncodeError(f"{value} is out of range for AMQP {name}")


def _e_ubyte(out: bytearray, value: int) -> None:
    _range_check(value, 0, 0xFF, "ubyte")
    out.append(0x50)
    out.append(value)


def _e_ushort(out: bytearray, value: int) -> None:
    _range_check(value, 0, 0xFFFF, "ushort")
    out.append(0x60)
    out += _u16.pack(value)


def _e_uint(out: bytearray, value: int) -> None:
    if value == 0:
        out.append(0x43)
    elif 0 < value < 256:
        out.append(0x52)
        out.append(value)
    else:
        _range_check(value, 0, 0xFFFFFFFF, "uint")
        out.append(0x70)
        out += _u32.pack(value)


def _e_ulong(out: bytearray, value: int) -> None:
    if value == 0:
        out.append(0x44)
    elif 0 < value < 256:
        out.append(0x53)
        out.append(value)
    else:
        _range_check(value, 0, 0xFFFFFFFFFFFFFFFF, "ulong")
        out.append(0x80)
        out += _u64.pack(value)


def _e_byte(out: bytearray, value: int) -> None:
    _range_check(value, -128, 127, "byte")
    out.append(0x51)
    out += _i8.pack(value)


def _e_short(out: bytearray, value: int) -> None:
    _range_check(value, -32768, 32767, "short")
    out.append(0x61)
    out += _i16.pack(value)


def _e_int(out: bytearray, value: int) -> None:
    if -128 <= value <= 127:
        out.append(0x54)
        out += _i8.pack(value)
    else:
        _range_check(value, -(2**31), 2**31 - 1, "int")
        out.append(0x71)
        out += _i32.pack(value)


def _e_long(out: bytearray, value: int) -> None:
    if -128 <= value <= 127:
        out.append(0x55)
        out += _i8.pack(value)
    else:
        _range_check(value, -(2**63), 2**63 - 1, "long")
        out.append(0x81)
        out += _i64.pack(value)


def _e_timestamp(out: bytearray, value: int) -> None:
    _range_check(value, -(2**63), 2**63 - 1, "timestamp")
    out.append(0x83)
    out += _i64.pack(value)


def _e_float(out: bytearray, value: float) -> None:
    try:
        packed = _f32.pack(value)
    except OverflowError:
        raise EncodeError(f"{value} is out of range for AMQP float") from None
    out.append(0x72)
    out += packed


def _e_double(out: bytearray, value: float) -> None:
    out.append(0x82)
    out += _f64.pack(value)


def _e_char(out: bytearray, value: str) -> None:
    if len(value) != 1:
        raise EncodeError("AMQP char holds exactly one code point")
    out.append(0x73)
    out += _u32.pack(ord(value))


def _e_decimal(code: int, size: int) -> Encoder:
    def encode(out: bytearray, value: bytes) -> None:
        if len(value) != size:
            raise EncodeError(f"decimal needs {size} bytes")
        out.append(code)
        out += value

    return encode


def _e_uuid(out: bytearray, value: uuid.UUID) -> None:
    out.append(0x98)
    out += value.bytes


def _e_variable(code8: int, code32: int, raw: bytes, out: bytearray) -> None:
    n = len(raw)
    if n < 256:
        out.append(code8)
        out.append(n)
    else:
        out.append(code32)
        out += _u32.pack(n)
    out += raw


def _e_binary(out: bytearray, value: bytes) -> None:
    _e_variable(0xA0, 0xB0, value, out)


def _e_string(out: bytearray, value: str) -> None:
    _e_variable(0xA1, 0xB1, value.encode("utf-8"), out)


def _e_symbol(out: bytearray, value: str) -> None:
    _e_variable(0xA3, 0xB3, value.encode("ascii", "replace"), out)


def _e_list(out: bytearray, value: list | tuple) -> None:
    if not value:
        out.append(0x45)
        return
    body = bytearray()
    for item in value:
        _encode_into(body, item)
    _e_compound(out, 0xC0, 0xD0, len(value), body)


def _e_map(out: bytearray, value: dict) -> None:
    body = bytearray()
    for key, item in value.items():
        _encode_into(body, key)
        _encode_into(body, item)
    _e_compound(out, 0xC1, 0xD1, 2 * len(value), body)


def _e_compound(out: bytearray, code8: int, code32: int, count: int, body: bytearray) -> None:
    if len(body) + 1 < 256 and count < 256:
        out.append(code8)
        out += _u8u8.pack(len(body) + 1, count)
    else:
        out.append(code32)
        out += _u32u32.pack(len(body) + 4, count)
    out += body


def _e_described(out: bytearray, value: Described) -> None:
    out.append(0x00)
    _encode_into(out, value.descriptor)
    _encode_into(out, value.value)


# Element encoders for arrays: one constructor, then each element without it.
def _elem_fixed(code: int, packer: struct.Struct) -> tuple[int, Callable[[bytearray, Any], None]]:
    def put(out: bytearray, value: Any) -> None:
        out += packer.pack(value)

    return code, put


def _elem_bool(out: bytearray, value: Any) -> None:
    out.append(1 if value else 0)


def _elem_var(encoding: str | None) -> Callable[[bytearray, Any], None]:
    def put(out: bytearray, value: Any) -> None:
        raw = value.encode(encoding) if encoding else bytes(value)
        out += _u32.pack(len(raw))
        out += raw

    return put


def _elem_compound(kind: str) -> Callable[[bytearray, Any], None]:
    def put(out: bytearray, value: Any) -> None:
        body = bytearray()
        if kind == "map":
            for key, item in value.items():
                _encode_into(body, key)
                _encode_into(body, item)
            count = 2 * len(value)
        else:
            for item in value:
                _encode_into(body, item)
            count = len(value)
        out += _u32u32.pack(len(body) + 4, count)
        out += body

    return put


def _elem_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def _elem_raw(size: int) -> Callable[[bytearray, Any], None]:
    def put(out: bytearray, value: bytes) -> None:
        if len(value) != size:
            raise EncodeError(f"decimal needs {size} bytes")
        out += value

    return put


def _elem_char(out: bytearray, value: str) -> None:
    out += _u32.pack(ord(value))


def _elem_array(out: bytearray, value: Array) -> None:
    tmp = bytearray()
    _e_array(tmp, value, wide=True)
    out += tmp[1:]


def _elem_null(out: bytearray, value: Any) -> None:
    return None


_ARRAY_ELEMENTS: dict[str, tuple[int, Callable[[bytearray, Any], None]]] = {
    "null": (0x40, _elem_null),
    "boolean": (0x56, _elem_bool),
    "ubyte": _elem_fixed(0x50, _u8),
    "ushort": _elem_fixed(0x60, _u16),
    "uint": _elem_fixed(0x70, _u32),
    "ulong": _elem_fixed(0x80, _u64),
    "byte": _elem_fixed(0x51, _i8),
    "short": _elem_fixed(0x61, _i16),
    "int": _elem_fixed(0x71, _i32),
    "long": _elem_fixed(0x81, _i64),
    "float": _elem_fixed(0x72, _f32),
    "double": _elem_fixed(0x82, _f64),
    "timestamp": _elem_fixed(0x83, _i64),
    "decimal32": (0x74, _elem_raw(4)),
    "decimal64": (0x84, _elem_raw(8)),
    "decimal128": (0x94, _elem_raw(16)),
    "char": (0x73, _elem_char),
    "uuid": (0x98, _elem_uuid),
    "binary": (0xB0, _elem_var(None)),
    "string": (0xB1, _elem_var("utf-8")),
    "symbol": (0xB3, _elem_var("ascii")),
    "list": (0xD0, _elem_compound("list")),
    "map": (0xD1, _elem_compound("map")),
    "array": (0xF0, _elem_array),
}


def _e_array(out: bytearray, value: Array, wide: bool = False) -> None:
    body = bytearray()
    if value.element_type == "described":
        body.append(0x00)
        _encode_into(body, value.descriptor)
        inner = [item.value if isinstance(item, Described) else item for item in value.items]
        kind = _infer_element_type(inner)
        code, put = _ARRAY_ELEMENTS[kind]
        body.append(code)
        for item in inner:
            put(body, item)
    else:
        try:
            code, put = _ARRAY_ELEMENTS[value.element_type]
        except KeyError:
            raise EncodeError(f"unknown array element type {value.element_type!r}") from None
        body.append(code)
        try:
            for item in value.items:
                put(body, item)
        except (struct.error, AttributeError, TypeError, OverflowError, UnicodeEncodeError) as exc:
            raise EncodeError(f"array element does not fit {value.element_type}: {exc}") from None
    count = len(value.items)
    if not wide and len(body) + 1 < 256 and count < 256:
        out.append(0xE0)
        out += _u8u8.pack(len(body) + 1, count)
    else:
        out.append(0xF0)
        out += _u32u32.pack(len(body) + 4, count)
    out += body


_TYPE_NAMES: dict[type, str] = {
    bool: "boolean", UByte: "ubyte", UShort: "ushort", UInt: "uint", ULong: "ulong", Byte: "byte",
    Short: "short", Int: "int", Long: "long", int: "long", Float: "float", float: "double",
    Timestamp: "timestamp", Char: "char", uuid.UUID: "uuid", bytes: "binary", bytearray: "binary",
    str: "string", Symbol: "symbol", list: "list", dict: "map", Array: "array",
    Decimal32: "decimal32", Decimal64: "decimal64", Decimal128: "decimal128",
}


def _infer_element_type(items: list) -> str:
    if not items:
        return "null"
    return _TYPE_NAMES.get(type(items[0]), "null")


def array_of(items: list | tuple, element_type: str | None = None) -> Array:
    """Build an Array, inferring the element type from the first item when not given."""
    items = tuple(items)
    return Array(items, element_type or _infer_element_type(list(items)))


_ENCODERS: dict[type, Encoder] = {
    type(None): _e_null,
    bool: _e_bool,
    UByte: _e_ubyte,
    UShort: _e_ushort,
    UInt: _e_uint,
    ULong: _e_ulong,
    Byte: _e_byte,
    Short: _e_short,
    Int: _e_int,
    Long: _e_long,
    int: _e_long,
    Timestamp: _e_timestamp,
    Float: _e_float,
    float: _e_double,
    Char: _e_char,
    Decimal32: _e_decimal(0x74, 4),
    Decimal64: _e_decimal(0x84, 8),
    Decimal128: _e_decimal(0x94, 16),
    uuid.UUID: _e_uuid,
    bytes: _e_binary,
    bytearray: _e_binary,
    memoryview: lambda out, v: _e_binary(out, bytes(v)),
    str: _e_string,
    Symbol: _e_symbol,
    list: _e_list,
    tuple: _e_list,
    dict: _e_map,
    Described: _e_described,
    Array: _e_array,
}


def _encode_into(out: bytearray, value: Any) -> None:
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        encoder = _lookup_subclass(value)
    encoder(out, value)


# Composite types (performatives, sections, delivery states) are encoded straight from their
# fields: building the intermediate Described and list objects cost more than the encoding itself.
_COMPOSITE_PLANS: dict[type, tuple[bytes, Callable[[Any], tuple[Any, ...]], int, bool]] = {}


def _composite_plan(cls: Any) -> tuple[bytes, Callable[[Any], tuple[Any, ...]], int, bool]:
    """How to encode instances of ``cls`` (a ``performatives.Composite``, which this module cannot
    import: performatives imports the codec)."""
    fields: tuple[str, ...] = cls.FIELDS
    code: int = cls.CODE
    prefix = bytes((0x00, 0x53, code)) if code < 256 else b"\x00\x80" + _u64.pack(code)
    getter: Callable[[Any], tuple[Any, ...]]
    if len(fields) == 1:
        getter = _one_field_getter(fields[0])
    elif fields:
        getter = operator.attrgetter(*fields)
    else:
        getter = _no_fields
    plan = (prefix, getter, len(fields), bool(getattr(cls, "KEEP_ALL_FIELDS", False)))
    _COMPOSITE_PLANS[cls] = plan
    return plan


def _one_field_getter(name: str) -> Callable[[Any], tuple[Any, ...]]:
    def getter(obj: Any, _name: str = name) -> tuple[Any, ...]:
        return (getattr(obj, _name),)
    return getter


def _no_fields(obj: Any) -> tuple[Any, ...]:
    return ()


def _e_composite(out: bytearray, value: Any) -> None:
    cls = type(value)
    plan = _COMPOSITE_PLANS.get(cls) or _composite_plan(cls)
    prefix, getter, count, keep_all = plan
    values = getter(value)
    if not keep_all:
        while count and values[count - 1] is None:
            count -= 1
    out += prefix
    if not count:
        out.append(0x45)
        return
    body = bytearray()
    encoders = _ENCODERS
    for i in range(count):
        item = values[i]
        encoder = encoders.get(type(item))
        if encoder is None:
            encoder = _lookup_subclass(item)
        encoder(body, item)
    size = len(body)
    if size < 255 and count < 256:
        out.append(0xC0)
        out.append(size + 1)
        out.append(count)
    else:
        out.append(0xD0)
        out += _u32u32.pack(size + 4, count)
    out += body


def _lookup_subclass(value: Any) -> Encoder:
    if hasattr(value, "to_described"):
        _ENCODERS[type(value)] = _e_composite
        return _e_composite
    for cls in type(value).__mro__[1:]:
        encoder = _ENCODERS.get(cls)
        if encoder is not None:
            return encoder
    raise EncodeError(f"no AMQP encoding for {type(value).__name__}")


def encode(value: Any) -> bytes:
    """Encode one value with its constructor."""
    out = bytearray()
    _encode_into(out, value)
    return bytes(out)


def encode_into(out: bytearray, value: Any) -> None:
    """Append the encoding of ``value`` to ``out`` (avoids copies when building frames)."""
    _encode_into(out, value)
