"""AMQP over WebSockets: the AMQP WebSocket binding, as Service Bus serves it.

The binding (OASIS "AMQP WebSocket Binding (WSB) Version 1.0") carries the AMQP byte stream in binary
WebSocket messages after an HTTP upgrade with the subprotocol ``AMQPWSB10``; Service Bus serves it on
``/$servicebus/websocket`` (port 443), which is what the SDKs' ``TransportType.AmqpOverWebsocket`` dials.

The WebSocket layer here only moves bytes. The AMQP side is the very same connection object as over
TCP (:class:`~sbemulator.runtime.server.AmqpServer`'s protocol and its ``Gateway``): it is given
:class:`WebSocketTransport`, which looks to it like the TCP transport (``write``, ``close``,
``is_closing``, ``get_write_buffer_size``, ``pause_reading``/``resume_reading``), and it is told
``pause_writing``/``resume_writing`` when the socket underneath is, so the same backpressure rules hold.
Framing, masking, the handshake and close codes are python-hyper's ``wsproto`` (sans-I/O, like the rest
of the stack); nothing here parses WebSocket frames by hand.

Three ways in: a port of its own (:class:`WebSocketListener`, ``ws://`` because that is what the Python
SDK dials when the connection string says ``UseDevelopmentEmulator=true``, and ``wss://``, what it and
the JavaScript SDK dial otherwise, told apart by the first bytes), and an upgrade on the management
endpoint or the AMQP port (:func:`upgrade_factory`, ``ws://`` or ``wss://``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from ..net.listener import Routes, SniffingListener
from ..net.sniff import Protocol

try:
    from wsproto import ConnectionType, WSConnection
    from wsproto.connection import ConnectionState
    from wsproto.events import (
        AcceptConnection,
        BytesMessage,
        CloseConnection,
        Ping,
        RejectConnection,
        RejectData,
        Request,
        TextMessage,
    )
    from wsproto.utilities import LocalProtocolError, RemoteProtocolError

    WSPROTO_MISSING: str | None = None
except ImportError:  # a declared dependency; an environment installed before it was added lacks it
    WSPROTO_MISSING = "AMQP over WebSockets needs the wsproto package (a dependency of sbemulator): pip install wsproto"

log = logging.getLogger("sbemulator")

WEBSOCKET_PATH = "/$servicebus/websocket"
SUBPROTOCOL = "AMQPWSB10"
# Also taken: "amqp", what Microsoft.Azure.Amqp (the .NET SDK's AMQP library, the Functions host's;
# its WebSocketTransportSettings) and the Go SDK's WebSocket example ask for. .NET's ClientWebSocket fails
# an upgrade answered with a subprotocol it did not ask for: the answer names the one asked for.
SUBPROTOCOLS = (SUBPROTOCOL, "amqp")
# A client that connected gets this long to finish its HTTP upgrade request; the request's size is bounded
# by wsproto's HTTP parser (h11: 16 KiB of headers).
HANDSHAKE_TIMEOUT_S = 10.0
# WebSocket close codes (RFC 6455 section 7.4.1).
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_UNSUPPORTED_DATA = 1003


class WebSocketTransport(asyncio.Transport):
    """What the AMQP connection writes to: each ``write`` becomes one binary WebSocket message."""

    def __init__(self, owner: WebSocketAmqpProtocol) -> None:
        super().__init__()
        self._owner = owner

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._owner.send_bytes(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self._owner.send_bytes(b"".join(list_of_data))

    def is_closing(self) -> bool:
        return self._owner.closing

    def close(self) -> None:
        self._owner.close(CLOSE_NORMAL)

    def abort(self) -> None:
        self._owner.abort()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        transport = self._owner.transport
        return default if transport is None else transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if self._owner.transport is not None:
            self._owner.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._owner.transport is not None:
            self._owner.transport.resume_reading()

    def is_reading(self) -> bool:
        transport = self._owner.transport
        return transport is not None and transport.is_reading()

    def get_write_buffer_size(self) -> int:
        transport = self._owner.transport
        return 0 if transport is None else transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        transport = self._owner.transport
        return (0, 0) if transport is None else transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        if self._owner.transport is not None:
            self._owner.transport.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return False


class WebSocketAmqpProtocol(asyncio.Protocol):
    """One WebSocket connection carrying one AMQP connection.

    ``new_amqp`` makes the AMQP protocol (the server's own, the one TCP connections get); it is created
    once the upgrade is accepted, so a client that never completes the handshake costs no AMQP state.
    ``ws`` is given when the HTTP request was already read elsewhere (the management endpoint's upgrade).
    """

    def __init__(self, new_amqp: Callable[[], asyncio.Protocol], ws: WSConnection | None = None,
                 handshake_timeout_s: float | None = None) -> None:
        self._new_amqp = new_amqp
        self.ws = ws or WSConnection(ConnectionType.SERVER)
        self.transport: asyncio.Transport | None = None
        self.amqp: asyncio.Protocol | None = None
        self._adapter = WebSocketTransport(self)
        self._handshake_timeout_s = HANDSHAKE_TIMEOUT_S if handshake_timeout_s is None else handshake_timeout_s
        self._deadline: asyncio.TimerHandle | None = None
        self.on_lost: Callable[[WebSocketAmqpProtocol], None] | None = None
        self.keep: object = None  # whatever must live as long as the connection (see upgrade_factory)

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.amqp is None:
            self._deadline = asyncio.get_running_loop().call_later(self._handshake_timeout_s, self._too_slow)
        # An upgrade read elsewhere has its request queued in ``ws`` already.
        self._process_events()

    def data_received(self, data: bytes) -> None:
        try:
            self.ws.receive_data(data)
        except RemoteProtocolError as exc:
            self._refuse(exc)
            return
        self._process_events()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        amqp, self.amqp = self.amqp, None
        self.transport = None
        self.keep = None
        if amqp is not None:
            amqp.connection_lost(exc)
        if self.on_lost is not None:
            self.on_lost(self)

    def pause_writing(self) -> None:
        if self.amqp is not None:
            self.amqp.pause_writing()

    def resume_writing(self) -> None:
        if self.amqp is not None:
            self.amqp.resume_writing()

    # ------------------------------------------------------------------ what the AMQP side calls
    @property
    def closing(self) -> bool:
        transport = self.transport
        return transport is None or transport.is_closing() or self.ws.state is not ConnectionState.OPEN

    def send_bytes(self, data: bytes) -> None:
        transport = self.transport
        if data and transport is not None and not transport.is_closing() and self.ws.state is ConnectionState.OPEN:
            transport.write(self.ws.send(BytesMessage(data=data)))

    def close(self, code: int = CLOSE_NORMAL, reason: str | None = None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.ws.state is ConnectionState.OPEN:
            try:
                transport.write(self.ws.send(CloseConnection(code=code, reason=reason)))
            except LocalProtocolError:
                pass
        transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ events
    def _process_events(self) -> None:
        amqp_input: list[bytes | bytearray] = []
        try:
            for event in self.ws.events():
                if isinstance(event, Request):
                    self._accept(event)
                elif isinstance(event, BytesMessage):
                    amqp_input.append(event.data)
                elif isinstance(event, TextMessage):
                    # The binding carries AMQP in binary messages only (WSB section 2.3).
                    self._feed(amqp_input)
                    self.close(CLOSE_UNSUPPORTED_DATA, "AMQP over WebSockets uses binary messages only")
                    return
                elif isinstance(event, Ping):
                    if self.transport is not None and not self.transport.is_closing():
                        self.transport.write(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self._feed(amqp_input)
                    amqp_input = []
                    if self.transport is not None:
                        if self.ws.state is ConnectionState.REMOTE_CLOSING:
                            self.transport.write(self.ws.send(event.response()))
                        self.transport.close()
                    return
        except RemoteProtocolError as exc:
            self._feed(amqp_input)
            self._refuse(exc)
            return
        self._feed(amqp_input)

    def _feed(self, chunks: list[bytes | bytearray]) -> None:
        # All the AMQP bytes of one read go in at once: one pass of the connection, one commit, one write.
        if chunks and self.amqp is not None:
            self.amqp.data_received(bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks))

    def _accept(self, request: Request) -> None:
        path = request.target.split("?", 1)[0]
        if path.rstrip("/").lower() != WEBSOCKET_PATH.lower():
            self._reject(404, f"No WebSocket endpoint at '{path}': AMQP over WebSockets is served on "
                              f"{WEBSOCKET_PATH}.")
            return
        chosen = next((p for p in SUBPROTOCOLS if p in request.subprotocols), None)
        if chosen is None:
            self._reject(400, f"The WebSocket upgrade must ask for the subprotocol {SUBPROTOCOL} (or amqp) "
                              "(Sec-WebSocket-Protocol).")
            return
        assert self.transport is not None
        self._cancel_deadline()
        self.transport.write(self.ws.send(AcceptConnection(subprotocol=chosen)))
        self.amqp = self._new_amqp()
        self.amqp.connection_made(self._adapter)

    def _reject(self, status: int, message: str) -> None:
        log.info("WebSocket upgrade from %s refused (%d): %s",
                 self.transport.get_extra_info("peername") if self.transport else "?", status, message)
        body = (message + "\n").encode()
        transport = self.transport
        if transport is None:
            return
        data = self.ws.send(RejectConnection(
            status_code=status, has_body=True,
            headers=[(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]))
        data += self.ws.send(RejectData(data=body))
        transport.write(data)
        transport.close()

    def _refuse(self, exc: RemoteProtocolError) -> None:
        """The peer broke the protocol: an HTTP error while upgrading, a 1002 close after."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.ws.state is ConnectionState.CONNECTING:
            hint = exc.event_hint if isinstance(exc.event_hint, RejectConnection) else RejectConnection()
            try:
                transport.write(self.ws.send(hint))
            except LocalProtocolError:
                pass
            transport.close()
            return
        self.close(CLOSE_PROTOCOL_ERROR, str(exc)[:100])

    def _too_slow(self) -> None:
        self._deadline = None
        if self.amqp is None and self.transport is not None:
            log.info("WebSocket upgrade from %s not finished within %.0f s: closed",
                     self.transport.get_extra_info("peername"), self._handshake_timeout_s)
            self.transport.abort()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


class WebSocketListener:
    """A port of its own for AMQP over WebSockets (``ws://host:port/$servicebus/websocket``).

    The AMQP connections it accepts join the AMQP server's own set (that is where they are closed on
    shutdown); the listener only closes the connections still in their HTTP handshake."""

    def __init__(self, amqp_server: Any, host: str = "127.0.0.1", port: int = 443,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.amqp_server = amqp_server
        self.host = host
        self.port = port
        # With a TLS context the port serves wss:// too (what the SDKs dial on 443 by default), told from
        # ws:// by the connection's first bytes.
        self.ssl_context = ssl_context
        self._listener: SniffingListener | None = None
        self._pending: set[WebSocketAmqpProtocol] = set()

    def _protocol(self) -> WebSocketAmqpProtocol:
        protocol = WebSocketAmqpProtocol(self.amqp_server.protocol)
        protocol.on_lost = self._pending.discard
        self._pending.add(protocol)
        return protocol

    async def start(self) -> None:
        if WSPROTO_MISSING is not None:
            raise OSError(WSPROTO_MISSING)
        routes = Routes(http=self._protocol, tls=self.ssl_context, unknown=Protocol.HTTP)
        self._listener = SniffingListener(routes, self.host, self.port, backlog=512)
        await self._listener.start()
        self.port = self._listener.port

    async def stop(self) -> None:
        if self._listener is None:
            return
        await self._listener.stop()
        for protocol in list(self._pending):
            if protocol.amqp is None:
                protocol.abort()
        self._listener = None


def upgrade_factory(
    amqp_server: Any,
) -> Callable[[str, list[tuple[bytes, bytes]], asyncio.Transport, bytes, object], None] | None:
    """What the HTTPS management endpoint calls when a request asks for a WebSocket: from then on the
    connection's transport belongs to a :class:`WebSocketAmqpProtocol` (``rest`` is what was read past
    the request's head). None without wsproto: the endpoint then serves HTTP only."""
    if WSPROTO_MISSING is not None:
        log.warning("%s", WSPROTO_MISSING)
        return None

    def take_over(target: str, headers: list[tuple[bytes, bytes]], transport: asyncio.Transport,
                  rest: bytes, keep: object = None) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        ws.initiate_upgrade_connection(headers, target)
        protocol = WebSocketAmqpProtocol(amqp_server.protocol, ws)
        protocol.keep = keep  # the HTTP server's stream writer: collected, it would close the transport
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if rest:
            protocol.data_received(rest)
        if not transport.is_closing() and not transport.is_reading():
            transport.resume_reading()

    return take_over
