"""A small HTTP/1.1 server on asyncio streams, with h11 as the protocol core.

Only what the management surface needs: requests with bodies up to ``MAX_BODY``, keep-alive, TLS from
an ``ssl.SSLContext``, a timeout on every read so an idle or stalled client cannot hold a task forever.
The handler is an ``async`` function from :class:`Request` to :class:`Response`; it runs on the
server's event loop (the emulator's loop, where the broker lives).
"""

from __future__ import annotations

import asyncio
import http
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11

log = logging.getLogger("sbemulator.admin")

MAX_BODY = 4 * 1024 * 1024
READ_TIMEOUT_S = 120.0
SERVER_NAME = "sbemulator"


@dataclass
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: dict[str, str]  # names lower-case
    headers: dict[str, str]  # names lower-case
    body: bytes = b""
    raw_target: str = ""


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


Handler = Callable[[Request], Awaitable[Response]]
# Takes over a connection whose request asked for a WebSocket: (target, headers, transport, bytes read past
# the request). See sbemulator/runtime/websocket.py.
Upgrade = Callable[[str, list[tuple[bytes, bytes]], asyncio.Transport, bytes], None]


def parse_target(target: str) -> tuple[str, dict[str, str]]:
    """'/q%201?api-version=2021-05&$top=5' -> ('/q 1', {'api-version': '2021-05', '$top': '5'})."""
    parts = urllib.parse.urlsplit(target)
    path = urllib.parse.unquote(parts.path)
    query = {k.lower(): v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)}
    return path, query


def _asks_for_websocket(request: Request) -> bool:
    connection = {token.strip().lower() for token in request.headers.get("connection", "").split(",")}
    return request.headers.get("upgrade", "").strip().lower() == "websocket" and "upgrade" in connection


def _asks_for_websocket_head(head: h11.Request) -> bool:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
    return head.method == b"GET" and _asks_for_websocket(Request("GET", "", {}, headers))


class HttpServer:
    def __init__(
        self, handler: Handler, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None,
        websocket: Upgrade | None = None,
    ) -> None:
        self.handler = handler
        self.websocket = websocket
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = False

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, ssl=self.ssl_context, reuse_address=True,
            ssl_handshake_timeout=30 if self.ssl_context else None,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.close()
        # Abort the transports first: a connection task whose cancellation raced with a completed read
        # (asyncio.wait_for on 3.11 can swallow it) then sees its stream end instead of waiting on it.
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except (TimeoutError, Exception):
                pass
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            if await self._connection(reader, writer):
                self._writers.discard(writer)
                return  # the connection now belongs to the WebSocket protocol
        except (ConnectionError, TimeoutError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("admin connection failed")
        finally:
            self._tasks.discard(task)
            if writer not in self._writers:
                pass  # handed over
            elif self._stopping:
                self._writers.discard(writer)
                # Shutting down: no TLS close handshake with idle keep-alive clients that will not answer it.
                writer.transport.abort()
            else:
                self._writers.discard(writer)
                writer.close()
                try:
                    await asyncio.wait_for(writer.wait_closed(), 2)
                except (Exception, asyncio.CancelledError):
                    pass

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve requests until the connection ends; True when it was handed over to a WebSocket."""
        conn = h11.Connection(h11.SERVER)
        while not self._stopping:
            try:
                request = await self._read_request(conn, reader)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send(conn, writer, Response(exc.error_status_hint, b"bad request\n", "text/plain"))
                return False
            if request is None:
                return False
            if self.websocket is not None and _asks_for_websocket(request):
                self._hand_over(conn, reader, writer, request)
                return True
            try:
                response = await self.handler(request)
            except Exception:
                log.exception("admin handler failed for %s %s", request.method, request.raw_target)
                response = Response(500, b"internal error\n", "text/plain")
            if request.method == "HEAD":
                response = Response(response.status, b"", response.content_type, response.headers)
            await self._send(conn, writer, response)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return False
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return False
        return False

    def _hand_over(self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   request: Request) -> None:
        """Give the socket to the WebSocket protocol, with whatever was read past the request's head
        (by h11, or still in the stream reader's buffer)."""
        assert self.websocket is not None
        rest = bytes(conn.trailing_data[0]) + bytes(getattr(reader, "_buffer", b""))
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()]
        self.websocket(request.raw_target, headers, writer.transport, rest)  # type: ignore[arg-type]

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> Request | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                async with asyncio.timeout(READ_TIMEOUT_S):
                    data = await reader.read(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    raise h11.RemoteProtocolError("request body too large", error_status_hint=413)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                if _asks_for_websocket_head(head):
                    continue  # h11 pauses next (a protocol switch); the request is returned then
                return self._request(head, body)
            elif isinstance(event, h11.ConnectionClosed):
                return None
            elif event is h11.PAUSED:
                if head is not None and _asks_for_websocket_head(head):
                    return self._request(head, body)
                return None

    @staticmethod
    def _request(head: h11.Request, body: bytes | bytearray) -> Request:
        target = head.target.decode("latin-1")
        path, query = parse_target(target)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        return Request(head.method.decode("ascii"), path, query, headers, bytes(body), target)

    @staticmethod
    async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, response: Response) -> None:
        headers = [("Server", SERVER_NAME), ("Content-Length", str(len(response.body)))]
        if response.content_type:
            headers.append(("Content-Type", response.content_type))
        headers.extend(response.headers)
        try:
            reason = http.HTTPStatus(response.status).phrase.encode()
        except ValueError:
            reason = b""
        data = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
        if response.body:
            data += conn.send(h11.Data(data=response.body))
        data += conn.send(h11.EndOfMessage())
        writer.write(data)
        async with asyncio.timeout(READ_TIMEOUT_S):
            await writer.drain()
