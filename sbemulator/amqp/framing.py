"""AMQP frame layout (spec 2.3): protocol headers and the 8-byte frame header.

Pure byte-level helpers shared by the connection state machine and the tests that craft malformed
input on purpose.
"""

from __future__ import annotations

import struct
from typing import Any

from . import codec

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

FRAME_AMQP = 0x00
FRAME_SASL = 0x01
FRAME_HEADER_SIZE = 8
MIN_MAX_FRAME_SIZE = 512  # spec 2.7.1: the smallest max-frame-size a peer may announce

_header = struct.Struct(">IBBH")


def parse_frame_header(data: bytes | bytearray, offset: int = 0) -> tuple[int, int, int, int]:
    """Return (size, doff, frame type, channel) of the frame header at ``offset``."""
    return _header.unpack_from(data, offset)


def build_frame(channel: int, body: Any = None, payload: bytes = b"", frame_type: int = FRAME_AMQP) -> bytes:
    """Encode one frame; ``body`` None makes an empty (heartbeat) frame."""
    out = bytearray(FRAME_HEADER_SIZE)
    if body is not None:
        codec.encode_into(out, body)
    if payload:
        out += payload
    _header.pack_into(out, 0, len(out), 2, frame_type, channel)
    return bytes(out)

