"""One address for everything: a loopback relay that tells a connection's protocol by its first byte.

Microsoft's Go tests build every address from the connection string's one host:port (AMQP there,
``https://host:port/`` for management, ``wss://host:port/$servicebus/websocket``), as the real
service allows. sbemulator serves AMQP and HTTPS on ports of their own, so the runner puts this relay
in front: a TLS record (first byte 0x16, a ClientHello) goes to the HTTPS management port, which also
serves ``wss://``; anything else (the AMQP or SASL header) to the AMQP port. Bytes are copied as they
are; nothing is read beyond the first byte before the upstream is chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from typing import Any

TLS_HANDSHAKE = 0x16
FIRST_BYTE_TIMEOUT_S = 30.0
CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class Relay:
    """Listeners on loopback (one event loop on a thread of its own), each forwarding to the emulator.

    ``sniff(port)``: a TLS record goes to ``tls_port``, anything else to ``amqp_port`` (one host:port
    for everything, the Go tests' view). ``forward(port, to)``: bytes as they are. ``terminate(port,
    context, to)``: TLS ends here and the plain stream goes on (AMQP over TLS on 5671 to the emulator's
    plain AMQP port)."""

    def __init__(self, host: str, amqp_port: int, tls_port: int) -> None:
        self.host = host
        self.amqp_port = amqp_port
        self.tls_port = tls_port
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="conformance-relay", daemon=True)
        self._thread.start()

    async def _connect(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection(self.host, port), 10)

    async def _sniffed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            first = await asyncio.wait_for(reader.readexactly(1), FIRST_BYTE_TIMEOUT_S)
            port = self.tls_port if first[0] == TLS_HANDSHAKE else self.amqp_port
            up_reader, up_writer = await self._connect(port)
        except (asyncio.IncompleteReadError, TimeoutError, OSError):
            writer.close()
            return
        up_writer.write(first)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def _forwarding(self, port: int) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await self._connect(port)
            except (TimeoutError, OSError):
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        return handle

    def _listen(self, handler: Any, host: str, port: int, context: ssl.SSLContext | None = None) -> int:
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(handler, host, port, ssl=context, ssl_handshake_timeout=30 if context else None),
            self._loop)
        server = started.result(10)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    def sniff(self, host: str, port: int = 0) -> int:
        return self._listen(self._sniffed, host, port)

    def forward(self, host: str, port: int, to: int) -> int:
        return self._listen(self._forwarding(to), host, port)

    def terminate(self, host: str, port: int, context: ssl.SSLContext, to: int) -> int:
        return self._listen(self._forwarding(to), host, port, context)

    def stop(self) -> None:
        for server in self._servers:
            self._loop.call_soon_threadsafe(server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
