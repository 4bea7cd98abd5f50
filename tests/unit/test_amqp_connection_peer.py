"""A scripted AMQP client for driving ``Connection`` without sockets (shared by the connection tests).

It holds no tests; it lives under a ``test_`` name only to stay next to the tests that import it.

It writes the bytes a real client would send and decodes what the server state machine answers, so
a test reads as a conversation: ``peer.send(...)`` then assertions on ``peer.frames()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sbemulator.amqp import codec
from sbemulator.amqp.connection import Connection
from sbemulator.amqp.framing import AMQP_HEADER, FRAME_AMQP, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Attach,
    Begin,
    Open,
    SaslInit,
    Source,
    Target,
    from_described,
)
from sbemulator.amqp.types import Symbol, UInt


@dataclass
class Frame:
    channel: int
    frame_type: int
    body: Any  # None for an empty (heartbeat) frame
    payload: bytes
    size: int


def parse_output(data: bytes | bytearray) -> list[bytes | Frame]:
    """Split server output into protocol headers (bytes) and decoded frames."""
    data = bytes(data)
    out: list[bytes | Frame] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 4] == b"AMQP":
            out.append(data[pos : pos + 8])
            pos += 8
            continue
        size = int.from_bytes(data[pos : pos + 4], "big")
        doff = data[pos + 4]
        frame_type = data[pos + 5]
        channel = int.from_bytes(data[pos + 6 : pos + 8], "big")
        body_bytes = data[pos + doff * 4 : pos + size]
        assert len(body_bytes) == size - doff * 4, "truncated frame in server output"
        if body_bytes:
            value, off = codec.decode(body_bytes)
            out.append(Frame(channel, frame_type, from_described(value), body_bytes[off:], size))
        else:
            out.append(Frame(channel, frame_type, None, b"", size))
        pos += size
    return out


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Peer:
    """The client side of one conversation with a server ``Connection``."""

    def __init__(self, **connection_kwargs: Any) -> None:
        self.clock = FakeClock()
        connection_kwargs.setdefault("clock", self.clock)
        self.conn = Connection(**connection_kwargs)
        self.events: list[Any] = []

    def send(self, data: bytes) -> list[Any]:
        events = self.conn.receive_data(data)
        self.events += events
        return events

    def frame(self, body: Any, channel: int = 0, payload: bytes = b"", sasl: bool = False) -> list[Any]:
        return self.send(build_frame(channel, body, payload, FRAME_SASL if sasl else FRAME_AMQP))

    def output(self) -> list[bytes | Frame]:
        return parse_output(self.conn.data_to_send())

    def frames(self) -> list[Frame]:
        return [item for item in self.output() if isinstance(item, Frame)]

    # ------------------------------------------------------------- canned steps
    def sasl_anonymous(self) -> None:
        self.send(SASL_HEADER)
        self.frame(SaslInit(Symbol("ANONYMOUS")), sasl=True)
        self.send(AMQP_HEADER)
        self.output()

    def open(self, **fields: Any) -> list[Any]:
        self.sasl_anonymous()
        fields.setdefault("container_id", "test-client")
        events = self.frame(Open(**fields))
        self.output()
        return events

    def begin(self, channel: int = 0, incoming_window: int = 5000) -> Any:
        events = self.frame(Begin(None, UInt(0), UInt(incoming_window), UInt(5000)), channel=channel)
        self.output()
        return events[0].session

    def attach(self, *, handle: int, client_sends: bool, address: str = "orders", name: str | None = None,
               channel: int = 0, **fields: Any) -> Any:
        """Attach a link and return the server-side ``Link`` (not yet accepted)."""
        role = ROLE_SENDER if client_sends else ROLE_RECEIVER
        source = Source(f"client-{handle}") if client_sends else Source(address)
        target = Target(address) if client_sends else Target(f"client-{handle}")
        if client_sends:
            fields.setdefault("initial_delivery_count", UInt(0))
        events = self.frame(
            Attach(name or f"link-{handle}", UInt(handle), role, source=source, target=target, **fields),
            channel=channel,
        )
        assert len(events) == 1, events
        return events[0].link
