"""The frames the emulator writes once per message, encoded without the generic codec, and the
disposition it reads once per settled message, decoded without it.

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
from .framing import FRAME_HEADER, pack_frame_header
from .performatives import Accepted, Disposition, Rejected, Released

_u32 = struct.Struct(">I")

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


_SMALL_UINT = [uint(value) for value in range(256)]  # handles, small delivery ids


def _binary(value: bytes) -> bytes:
    n = len(value)
    if n == 16:
        return b"\xa0\x10" + value  # a lock token: every peek-lock delivery's tag
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
    fields = b"".join((_SMALL_UINT[handle] if handle < 256 else uint(handle),
                       _SMALL_UINT[delivery_id] if delivery_id < 256 else b"\x70" + _u32.pack(delivery_id),
                       _binary(delivery_tag),
                       _SMALL_UINT[message_format] if message_format < 256 else uint(message_format),
                       _BOOL[bool(settled)], _TRANSFER_TAIL[bool(more)]))
    size = len(fields)
    if size < 255:
        return _TRANSFER + bytes((0xC0, size + 1, 11)) + fields
    return _TRANSFER + _list(fields, 11)


# The frame that settles a completed delivery (role sender, one delivery, settled, accepted, batchable
# false) for a delivery id written as uint, every id from 256 on: frame header, the performative up to
# the id, the id, the fields after it.
_ACCEPTED_ECHO_TAIL = b"\x40\x41\x00\x53\x24\x45\x42"
_ECHO_HEAD_U32 = _DISPOSITION + bytes((0xC0, 5 + 9, 6)) + b"\x42\x70"
_ECHO_FRAME_U32 = struct.Struct(f"{FRAME_HEADER.format}{len(_ECHO_HEAD_U32)}sI{len(_ACCEPTED_ECHO_TAIL)}s")


def accepted_echo_frame(channel: int, delivery_id: int) -> bytes:
    """The frame settling delivery ``delivery_id`` we sent as accepted: what the emulator answers to
    every completion (``frame(channel, disposition(ROLE_SENDER, delivery_id, None, True, Accepted()))``)."""
    if 256 <= delivery_id <= 0xFFFFFFFF:
        return _ECHO_FRAME_U32.pack(_ECHO_FRAME_U32.size, 2, 0, channel, _ECHO_HEAD_U32, delivery_id,
                                    _ACCEPTED_ECHO_TAIL)
    return frame(channel, disposition(False, delivery_id, None, True, _ACCEPTED))  # the first 256 only


def disposition(role: bool, first: int, last: int | None, settled: bool, state: Any) -> bytes:
    """The disposition performative (without frame header), batchable false as the codec writes it."""
    fields = b"".join((_BOOL[bool(role)], uint(first), _NULL if last is None else uint(last),
                       _BOOL[bool(settled)], state_bytes(state), _BATCHABLE_FALSE))
    return _DISPOSITION + _list(fields, 6)


# Reading: the field encodings a client's disposition uses (bool, uint, null), and the two outcomes
# without fields. Anything else makes parse_disposition give up, and the generic decoder runs.
_BOOL_AT = {0x41: (True, 1), 0x42: (False, 1), 0x40: (None, 1)}
# One shared instance each: they have no fields to change.
_STATE_AT = {b"\x00\x53\x24\x45": Accepted(), b"\x00\x53\x26\x45": Released()}
_u32_at = _u32.unpack_from


def _read_bool(frame: bytes, pos: int) -> tuple[Any, int] | None:
    code = frame[pos]
    if code == 0x56:
        flag = frame[pos + 1]
        return (flag == 1, pos + 2) if flag < 2 else None
    known = _BOOL_AT.get(code)
    return None if known is None else (known[0], pos + known[1])


def _read_uint(frame: bytes, pos: int) -> tuple[Any, int] | None:
    code = frame[pos]
    if code == 0x52:
        return frame[pos + 1], pos + 2
    if code == 0x43:
        return 0, pos + 1
    if code == 0x70:
        return _u32_at(frame, pos + 1)[0], pos + 5
    if code == 0x40:
        return None, pos + 1
    return None


# azure-servicebus's complete of one delivery: role receiver (bool8), the delivery id as smalluint or
# uint, no last, settled false (bool8), accepted, batchable null. Matched whole, before the general
# field-by-field reading below.
_SDK_COMPLETE_HEAD = b"\x00\x53\x15\xc0"
_SDK_COMPLETE_TAIL = b"\x40\x56\x00\x00\x53\x24\x45\x40"
_ACCEPTED = _STATE_AT[b"\x00\x53\x24\x45"]


def sdk_complete_id(frame: bytes) -> int | None:
    """The delivery id of a disposition body in the exact shape of the SDK's complete of one delivery
    (role receiver, no last, settled false, accepted, batchable null), or None for anything else."""
    size = len(frame)
    if (size == 18 or size == 21) and frame[:4] == _SDK_COMPLETE_HEAD and frame[4] == size - 5 \
            and frame[5:8] == b"\x06\x56\x01" and frame[-8:] == _SDK_COMPLETE_TAIL:
        code = frame[8]
        if size == 18 and code == 0x52:
            return frame[9]
        if size == 21 and code == 0x70:
            return _u32_at(frame, 9)[0]
    return None


def parse_disposition(frame: bytes) -> Disposition | None:
    """A disposition body (``00 53 15`` then a list8 of its six fields) with an accepted or
    released state or none, as the SDKs send one per settled message; None for any other shape.
    Gives the object ``Disposition.from_list`` would give for the same bytes."""
    delivery_id = sdk_complete_id(frame)
    if delivery_id is not None:
        return Disposition(True, delivery_id, None, False, _ACCEPTED, False)
    try:
        if frame[3] != 0xC0 or frame[4] + 5 != len(frame) or frame[5] != 6:
            return None
        parts = []
        pos = 6
        for reader in (_read_bool, _read_uint, _read_uint, _read_bool):
            got = reader(frame, pos)
            if got is None:
                return None
            parts.append(got[0])
            pos = got[1]
        if frame[pos] == 0x40:
            state = None
            pos += 1
        else:
            state = _STATE_AT.get(frame[pos:pos + 4])
            if state is None:
                return None
            pos += 4
        got = _read_bool(frame, pos)
        if got is None or got[1] != len(frame):
            return None
    except IndexError:
        return None
    role, first, last, settled = parts
    batchable = got[0]
    return Disposition(role, first, last, False if settled is None else settled, state,
                       False if batchable is None else batchable)


def frame(channel: int, performative: bytes, payload: bytes = b"") -> bytes:
    """A complete AMQP frame (doff 2, type 0) around an encoded performative and its payload."""
    return pack_frame_header(8 + len(performative) + len(payload), 2, 0, channel) + performative + payload


__all__ = ["accepted_echo_frame", "disposition", "frame", "parse_disposition", "sdk_complete_id", "state_bytes",
           "transfer", "uint"]
