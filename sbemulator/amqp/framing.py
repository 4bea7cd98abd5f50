"""AMQP frame layout (spec 2.3): protocol headers, the 8-byte frame header, and the one frame reader.

This module owns the frame header's layout (``FRAME_HEADER``): the connection reads frames only through
:class:`FrameReader` (like h2's ``frame_buffer.py``), and whoever writes frames packs the header with the
same struct. The byte-level helpers are shared with the tests that craft malformed input on purpose.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NoReturn

from . import codec
from .errors import FRAMING_ERROR, ProtocolError

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
TLS_HEADER = b"AMQP\x02\x01\x00\x00"

FRAME_AMQP = 0x00
FRAME_SASL = 0x01
FRAME_HEADER_SIZE = 8
MIN_MAX_FRAME_SIZE = 512  # spec 2.7.1: the smallest max-frame-size a peer may announce
PROTOCOL_HEADER = -1  # the frame type FrameReader gives an 8-byte protocol header

FRAME_HEADER = struct.Struct(">IBBH")  # size, doff, type, channel
pack_frame_header = FRAME_HEADER.pack
_unpack_header = FRAME_HEADER.unpack_from


def parse_frame_header(data: bytes | bytearray, offset: int = 0) -> tuple[int, int, int, int]:
    """Return (size, doff, frame type, channel) of the frame header at ``offset``."""
    return _unpack_header(data, offset)


def build_frame(channel: int, body: Any = None, payload: bytes = b"", frame_type: int = FRAME_AMQP) -> bytes:
    """Encode one frame; ``body`` None makes an empty (heartbeat) frame."""
    out = bytearray(FRAME_HEADER_SIZE)
    if body is not None:
        codec.encode_into(out, body)
    if payload:
        out += payload
    FRAME_HEADER.pack_into(out, 0, len(out), 2, frame_type, channel)
    return bytes(out)


def patch_frame_header(frame: bytearray, channel: int) -> None:
    """Write the header of a frame built after ``FRAME_HEADER_SIZE`` placeholder bytes (doff 2, AMQP)."""
    FRAME_HEADER.pack_into(frame, 0, len(frame), 2, FRAME_AMQP, channel)


class FrameReader:
    """Cuts the bytes a peer sends into protocol headers and frames, checking each frame header.

    The connection says what comes next: ``expect_header`` while a protocol header is due (at the
    start, and after SASL), ``opened`` once the open frames are exchanged (before that no frame may be
    larger than MIN-MAX-FRAME-SIZE, spec 2.4.1), ``max_frame_size`` the largest frame we announced.
    :meth:`cut` returns ``(frame type, channel, body)`` for each complete frame, the body without the
    header and extended header, or ``(PROTOCOL_HEADER, 0, header)``; it reads the three settings again
    before every frame, so a frame that changes them is handled before the next one is cut.
    """

    __slots__ = ("_buffer", "_error", "expect_header", "max_frame_size", "more", "opened")

    def __init__(self, max_frame_size: int) -> None:
        self._buffer = bytearray()
        self._error: ProtocolError | None = None
        self.more = False
        self.expect_header = True
        self.opened = False
        self.max_frame_size = max_frame_size

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet cut into frames (an incomplete frame)."""
        return len(self._buffer)

    def cut(self, data: bytes | bytearray | memoryview = b"") -> list[tuple[int, int, bytes]]:
        """Add ``data``, then cut what is complete: ``(frame type, channel, body)`` per frame.

        Once the open frames are exchanged the three settings cannot change any more, so one call
        cuts every complete frame (one call per socket read, not one per frame: the SDK's completes
        arrive a frame per read). Before that a frame may change them (a protocol header, the open),
        so at most one frame is cut. :attr:`more` then says to call again once the frames are
        handled; it also does when a bad frame header followed good frames: those are handed over
        first, and the next call raises the error, as if the frames had been cut one by one."""
        buf = self._buffer
        if data:
            buf += data
        if not self.opened or self._error is not None:
            return self._cut_one()
        self.more = False
        frames: list[tuple[int, int, bytes]] = []
        limit = self.max_frame_size
        while len(buf) >= FRAME_HEADER_SIZE:
            size, doff, frame_type, channel = _unpack_header(buf)
            if size > limit or size < FRAME_HEADER_SIZE or doff < 2 or doff * 4 > size:
                return self._refused(frames, size, doff)
            if len(buf) < size:
                break
            frames.append((frame_type, channel, bytes(buf[doff * 4 : size])))
            del buf[:size]
        return frames

    def _cut_one(self) -> list[tuple[int, int, bytes]]:
        """Before the open exchange (or with an error due): at most one header or frame."""
        if self._error is not None:
            error, self._error = self._error, None
            self.more = False
            raise error
        buf = self._buffer
        self.more = False
        if self.expect_header:
            if len(buf) < 8:
                return []
            header = bytes(buf[:8])
            del buf[:8]
            self.more = True
            return [(PROTOCOL_HEADER, 0, header)]
        if len(buf) < FRAME_HEADER_SIZE:
            return []
        size, doff, frame_type, channel = _unpack_header(buf)
        if (size < FRAME_HEADER_SIZE or doff < 2 or doff * 4 > size or size > self.max_frame_size
                or (size > MIN_MAX_FRAME_SIZE and not self.opened)):
            self._refuse_header(size, doff)
        if len(buf) < size:
            return []
        body = bytes(buf[doff * 4 : size])
        del buf[:size]
        self.more = True
        return [(frame_type, channel, body)]

    def _refused(self, frames: list[tuple[int, int, bytes]], size: int, doff: int) -> list[tuple[int, int, bytes]]:
        """A bad frame header after ``frames``: they are handed over, the error comes with the next cut."""
        try:
            self._refuse_header(size, doff)
        except ProtocolError as exc:
            if not frames:
                raise
            self._error = exc
            self.more = True
        return frames

    def _refuse_header(self, size: int, doff: int) -> NoReturn:
        """Raise the framing error a bad frame header deserves (the checks in the order they apply)."""
        if size < FRAME_HEADER_SIZE or doff < 2 or doff * 4 > size:
            raise ProtocolError(FRAMING_ERROR, f"invalid frame header (size={size}, doff={doff})")
        if not self.opened and size > MIN_MAX_FRAME_SIZE:
            # Spec 2.4.1: until the open frames have been exchanged the largest frame is
            # MIN-MAX-FRAME-SIZE (the open itself, and SASL frames before it, included).
            raise ProtocolError(
                FRAMING_ERROR,
                f"frame of {size} bytes sent before the open exchange completed; "
                f"the limit until then is {MIN_MAX_FRAME_SIZE} bytes",
            )
        raise ProtocolError(
            FRAMING_ERROR,
            f"frame of {size} bytes exceeds the negotiated max-frame-size {self.max_frame_size}",
        )

    def frames(self) -> Iterator[tuple[int, int, bytes]]:
        """Every complete frame (a convenience over :meth:`cut` for readers that are not the hot path)."""
        while True:
            cut = self.cut()
            yield from cut
            if not (cut and self.more):
                return
