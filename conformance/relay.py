"""Service Bus's fixed ports on a host of the run's own, forwarded to the emulator's free ports.

Microsoft's tests build every address from the namespace's host name alone: AMQP on 5671 (TLS) or
5672 (the Go SDK's emulator mode), HTTPS and WebSockets on 443. The emulator listens on a free port
that serves all of them (its one port tells them apart by their first bytes), so the runner listens on
those three on a loopback address of its own and forwards the bytes as they are to that port.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

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
    """Listeners on loopback (one event loop on a thread of its own), each forwarding the bytes as they
    are to the emulator at ``host``."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        self._thread = threading.Thread(target=self._loop.run_forever, name="conformance-relay", daemon=True)
        self._thread.start()

    async def _connect(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection(self.host, port), 10)

    def _forwarding(self, port: int) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await self._connect(port)
            except (TimeoutError, OSError):
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        return handle

    def _listen(self, handler: Any, host: str, port: int) -> int:
        started = asyncio.run_coroutine_threadsafe(asyncio.start_server(handler, host, port), self._loop)
        server = started.result(10)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    def forward(self, host: str, port: int, to: int) -> int:
        return self._listen(self._forwarding(to), host, port)

    def stop(self) -> None:
        for server in self._servers:
            self._loop.call_soon_threadsafe(server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
