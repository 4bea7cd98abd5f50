"""The WebSocket transport under the AMQP connection: bytes and backpressure pass through unchanged.

The AMQP side must not see a difference between TCP and WebSockets: what it writes goes out as binary
messages (AMQP WebSocket binding, section 2.3), and the socket's flow control reaches it as
``pause_writing``/``resume_writing`` and ``get_write_buffer_size``, as over TCP.
"""

from __future__ import annotations

import asyncio
from typing import Any

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Request

from sbemulator.runtime.websocket import SUBPROTOCOL, WEBSOCKET_PATH, WebSocketAmqpProtocol


class FakeSocketTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.buffered = 0
        self.reading = True

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading


class RecordingAmqp(asyncio.Protocol):
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.events.append(("data", bytes(data)))

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")


def open_websocket() -> tuple[WebSocketAmqpProtocol, FakeSocketTransport, RecordingAmqp, WSConnection]:
    amqp = RecordingAmqp()
    protocol = WebSocketAmqpProtocol(lambda: amqp)
    socket_transport = FakeSocketTransport()
    protocol.connection_made(socket_transport)
    client = WSConnection(ConnectionType.CLIENT)
    protocol.data_received(client.send(Request(host="127.0.0.1", target=WEBSOCKET_PATH, subprotocols=[SUBPROTOCOL])))
    client.receive_data(bytes(socket_transport.written))
    assert isinstance(next(client.events()), AcceptConnection)
    socket_transport.written.clear()
    return protocol, socket_transport, amqp, client


async def test_bytes_pass_both_ways_as_binary_messages() -> None:
    protocol, socket_transport, amqp, client = open_websocket()
    protocol.data_received(client.send(BytesMessage(data=b"AMQP\x00\x01\x00\x00")))
    assert amqp.events == [("data", b"AMQP\x00\x01\x00\x00")]
    amqp.transport.write(b"AMQP\x00\x01\x00\x00")
    client.receive_data(bytes(socket_transport.written))
    [event] = list(client.events())
    assert isinstance(event, BytesMessage) and event.data == b"AMQP\x00\x01\x00\x00"


async def test_backpressure_reaches_the_amqp_side_as_over_tcp() -> None:
    protocol, socket_transport, amqp, _ = open_websocket()
    socket_transport.buffered = 5_000_000
    assert amqp.transport.get_write_buffer_size() == 5_000_000
    protocol.pause_writing()
    protocol.resume_writing()
    assert amqp.events == ["pause", "resume"]
    amqp.transport.pause_reading()
    assert not socket_transport.is_reading() and not amqp.transport.is_reading()
    amqp.transport.resume_reading()
    assert socket_transport.is_reading()


async def test_amqp_close_sends_a_websocket_close_and_loss_is_reported_once() -> None:
    protocol, socket_transport, amqp, client = open_websocket()
    amqp.transport.close()
    assert socket_transport.closed and amqp.transport.is_closing()
    client.receive_data(bytes(socket_transport.written))
    [event] = list(client.events())
    assert isinstance(event, CloseConnection) and event.code == 1000
    protocol.connection_lost(None)
    assert amqp.events == ["lost"]
