"""The frames the emulator writes once per message, encoded without the generic codec.

A transfer for every delivery and a disposition for every settlement are the bulk of what the
emulator writes. Building a performative object and walking its fields through the type-dispatching
encoder cost more than the rest of delivering a small message, so these few shapes are written with
``struct`` directly. Each function returns exactly the bytes ``codec.encode`` gives for the
equivalent performative (tests/unit/test_amqp_hotframes.py checks it), so peers see no difference.
"""

from __future__ import annotations

import struct
from typing import Any

from . import codec
from .performatives import Accepted, Rejected, Released

_u32 = struct.Struct(">I")
_frame_header = struct.Struct(">IBBH")

_TRANSFER = b"\x00\x53\x14"
_DISPOSITION = b"\x00\x53\x15"
# Transfer fields after `settled`, as the generic encoder writes a Transfer built with its defaults:
# more, rcv-settle-mode (null), state (null), resume, aborted, batchable.
_TRANSFER_TAIL = {False: b"\x42\x40\x40\x42\x42\x42", True: b"\x41\x40\x40\x42\x42\x42"}
_BOOL = {False: b"\x42", True: b"\x41"}
_NULL = b"\x40"
_BATCHABLE_FALSE = b"\x42"
# States every settlement of a plain complete, release or dead-letter echo carries.
_STATE_BYTES = {Accepted: b"\x00\x53\x24\x45", Released: b"\x00\x53\x26\x45"}


def uint(value: int) -> bytes:
    """AMQP uint in its smallest encoding (uint0, smalluint or uint), as the codec writes it."""
    if value == 0:
        return b"\x43"
    if value < 256:
        return bytes((0x52, value))
    return b"\x70" + _u32.pack(value)


def _binary(value: bytes) -> bytes:
    n = len(value)
    if n < 256:
        return bytes((0xA0, n)) + value
    return b"\xb0" + _u32.pack(n) + value


def _list(fields: bytes, count: int) -> bytes:
    size = len(fields)
    if size < 255 and count < 256:
        return bytes((0xC0, size + 1, count)) + fields
    return b"\xd0" + struct.pack(">II", size + 4, count) + fields


def state_bytes(state: Any) -> bytes:
    """The encoded delivery state (constant bytes for the field-less ones)."""
    if state is None:
        return _NULL
    constant = _STATE_BYTES.get(type(state))
    if constant is not None:
        return constant
    if type(state) is Rejected and state.error is None:
        return b"\x00\x53\x25\x45"
    return codec.encode(state)


def transfer(handle: int, delivery_id: int, delivery_tag: bytes, message_format: int, settled: bool,
             more: bool = False) -> bytes:
    """The transfer performative (without frame header) of a delivery we send."""
    fields = b"".join((uint(handle), uint(delivery_id), _binary(delivery_tag), uint(message_format),
                       _BOOL[bool(settled)], _TRANSFER_TAIL[bool(more)]))
    return _TRANSFER + _list(fields, 11)


def disposition(role: bool, first: int, last: int | None, settled: bool, state: Any) -> bytes:
    """The disposition performative (without frame header), batchable false as the codec writes it."""
    fields = b"".join((_BOOL[bool(role)], uint(first), _NULL if last is None else uint(last),
                       _BOOL[bool(settled)], state_bytes(state), _BATCHABLE_FALSE))
    return _DISPOSITION + _list(fields, 6)


def frame(channel: int, performative: bytes, payload: bytes = b"") -> bytes:
    """A complete AMQP frame (doff 2, type 0) around an encoded performative and its payload."""
    return _frame_header.pack(8 + len(performative) + len(payload), 2, 0, channel) + performative + payload


__all__ = ["disposition", "frame", "state_bytes", "transfer", "uint"]
