"""AMQP 1.0 type system in Python terms.

Plain Python values map to the AMQP types a peer expects by default (``int`` -> long, ``float`` ->
double, ``str`` -> string, ``bytes`` -> binary, ``dict`` -> map, ``list`` -> list). Where AMQP has
several types for one Python type, a thin subclass names the exact type. Decoding returns the same
subclasses, so a decoded value re-encodes to the same AMQP type: the emulator can hand a sender's
application properties back to a receiver without changing them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any


class Symbol(str):
    """AMQP symbol: an ASCII name (descriptors, error conditions, annotation keys)."""

    __slots__ = ()


class Char(str):
    """AMQP char: a single UTF-32 code point."""

    __slots__ = ()


class UByte(int):
    __slots__ = ()


class UShort(int):
    __slots__ = ()


class UInt(int):
    __slots__ = ()


class ULong(int):
    __slots__ = ()


class Byte(int):
    __slots__ = ()


class Short(int):
    __slots__ = ()


class Int(int):
    __slots__ = ()


class Long(int):
    __slots__ = ()


class Timestamp(int):
    """AMQP timestamp: milliseconds since the Unix epoch (signed 64-bit)."""

    __slots__ = ()


class Float(float):
    """AMQP float: IEEE 754 32-bit (plain ``float`` is a 64-bit double)."""

    __slots__ = ()


class Decimal32(bytes):
    """AMQP decimal32, kept as its 4 raw bytes: the emulator never does decimal arithmetic on it."""

    __slots__ = ()


class Decimal64(bytes):
    __slots__ = ()


class Decimal128(bytes):
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Described:
    """A described value: ``descriptor`` is a ULong code or a Symbol name."""

    descriptor: Any
    value: Any


@dataclass(frozen=True, slots=True)
class Array:
    """An AMQP array: every element shares one constructor.

    ``element_type`` is one of the type names in ``ARRAY_ELEMENT_TYPES`` (or ``"described"``, with
    ``descriptor`` set), because an empty array still has to say its element type on the wire.
    """

    items: tuple
    element_type: str
    descriptor: Any = None

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[index]


ARRAY_ELEMENT_TYPES = (
    "null", "boolean", "ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "float",
    "double", "decimal32", "decimal64", "decimal128", "char", "timestamp", "uuid", "binary", "string",
    "symbol", "list", "map", "array",
)

UUID = uuid.UUID
