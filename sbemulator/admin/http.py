"""A small HTTP/1.1 server on asyncio streams, with h11 as the protocol core.

Only what the management surface needs: requests with bodies up to ``MAX_BODY``, keep-alive, TLS from
an ``ssl.SSLContext``. The handler is an ``async`` function from :class:`Request` to :class:`Response`;
it runs on the server's event loop (the emulator's loop, where the broker lives).

Bounded against clients that do not play along, because whoever reaches the port can try:

* ``admit`` sees each request's head before any of its body is read and either answers it at once
  (a missing or invalid credential: 401 without reading the body) or says how large a body it may
  have (``MAX_BODY`` for an authenticated request, ``MAX_UNAUTHENTICATED_BODY`` for one that cannot be
  authenticated before its body is read, such as the console's sign-in). A ``Content-Length`` over the
  bound is refused (413) before reading.
* time: ``IDLE_TIMEOUT_S`` for a kept-alive connection to start its next request (then it is closed, as
  busy HTTP servers close idle keep-alive connections), ``HEADER_TIMEOUT_S`` from a request's first byte
  to the end of its head and ``REQUEST_TIMEOUT_S`` from its first byte to the end of its body (a client
  dripping its headers or its body is answered 408 and closed), ``TLS_HANDSHAKE_TIMEOUT_S`` for TLS;
* ``MAX_CONNECTIONS`` connections at once and ``MAX_CONNECTIONS_PER_CLIENT`` from one client address;
  one more gets 503 with ``Retry-After`` and is closed;
* memory: a second after the last connection closed, the cycles asyncio leaves behind closed TLS
  connections are collected and the C allocator hands what is free back to the system (glibc's
  ``malloc_trim``), so an emulator that served abusive clients returns to about its idle size
  (bench/admin_abuse.py).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import dataclasses
import gc
import http
import logging
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import h11

from sbemulator.net.listener import Routes, SniffingListener
from sbemulator.net.sniff import Protocol

log = logging.getLogger("sbemulator.admin")

MAX_BODY = 4 * 1024 * 1024
MAX_UNAUTHENTICATED_BODY = 16 * 1024
IDLE_TIMEOUT_S = 60.0
HEADER_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0  # a whole request, head and body, from its first byte
WRITE_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 2.0
TLS_HANDSHAKE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 128
MAX_CONNECTIONS_PER_CLIENT = 64  # from one client address (loopback clients all share 127.0.0.1)
SERVER_NAME = "sbemulator"


@dataclass(frozen=True)
class HttpLimits:
    """The management endpoint's bounds (docs/management.md, "Limits of the management port"); each
    overridable from the command line (``--admin-request-timeout`` ...) or ``Emulator(admin_limits=)``."""

    request_timeout_s: float = REQUEST_TIMEOUT_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    idle_timeout_s: float = IDLE_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_connections_per_client: int = MAX_CONNECTIONS_PER_CLIENT

    def __post_init__(self) -> None:
        for name in ("request_timeout_s", "header_timeout_s", "idle_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be above 0, not {getattr(self, name)!r}")
        for name in ("max_connections", "max_connections_per_client"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)!r}")


def current_limits() -> HttpLimits:
    """The defaults as the module's constants say now (tests lower them with monkeypatch)."""
    return HttpLimits(REQUEST_TIMEOUT_S, HEADER_TIMEOUT_S, IDLE_TIMEOUT_S, MAX_CONNECTIONS,
                      MAX_CONNECTIONS_PER_CLIENT)


@dataclass
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: dict[str, str]  # names lower-case
    headers: dict[str, str]  # names lower-case
    body: bytes = b""
    raw_target: str = ""
    peer: str = ""  # the client's address (host only)


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Pending:
    """A response that takes more than one event-loop callback to make (a purge dropping its messages in
    slices, broker/purge.py): a synchronous handler returns it and the asynchronous one awaits ``finish``,
    so the slices run with every other connection served between them."""
    finish: Callable[[], Awaitable[Response]]


Handler = Callable[[Request], Awaitable[Response]]
# Takes over a connection whose request asked for a WebSocket: (target, headers, transport, bytes read past
# the request, an object to keep alive as long as the connection). See sbemulator/runtime/websocket.py.
Upgrade = Callable[[str, list[tuple[bytes, bytes]], asyncio.Transport, bytes, object], None]
# Sees a request's head (its body still unread): a response to send instead, or the body size allowed.
Admit = Callable[[Request], "Response | int"]


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere: musl, macOS, Windows keep their own policies)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_MALLOC_TRIM = _find_malloc_trim()
TRIM_DELAY_S = 1.0  # after the last connection closed (a burst of short requests trims once)


class _Refused(Exception):
    """Answer with this response and close, without reading the rest of the request."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status)
        self.response = response


def parse_target(target: str) -> tuple[str, dict[str, str]]:
    """'/q%201?api-version=2021-05&$top=5' -> ('/q 1', {'api-version': '2021-05', '$top': '5'})."""
    parts = urllib.parse.urlsplit(target)
    path = urllib.parse.unquote(parts.path)
    query = {k.lower(): v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)}
    return path, query


def asks_for_websocket(request: Request) -> bool:
    """A ``GET`` asking to switch to WebSocket (``Upgrade: websocket``, ``Connection: Upgrade``)."""
    if request.method != "GET":
        return False
    connection = {token.strip().lower() for token in request.headers.get("connection", "").split(",")}
    return request.headers.get("upgrade", "").strip().lower() == "websocket" and "upgrade" in connection


class HttpServer:
    def __init__(
        self, handler: Handler, host: str = "127.0.0.1", port: int = 0, ssl_context: ssl.SSLContext | None = None,
        websocket: Upgrade | None = None, admit: Admit | None = None, max_connections: int | None = None,
        plain_http: bool = True, limits: HttpLimits | None = None,
    ) -> None:
        self.handler = handler
        self.websocket = websocket
        self.admit = admit
        limits = limits or current_limits()
        if max_connections is not None:
            limits = dataclasses.replace(limits, max_connections=max_connections)
        self.limits = limits
        self.max_connections = limits.max_connections
        self._per_client: dict[str, int] = {}
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        # Plain HTTP beside HTTPS on the same port, told apart by the first bytes (net/listener.py): the
        # official emulator serves its management API over plain HTTP, and so does the .NET admin client
        # speak to it when the connection string says UseDevelopmentEmulator=true.
        self.plain_http = plain_http or ssl_context is None
        self._listener: SniffingListener | None = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = False
        self._trim: asyncio.TimerHandle | None = None

    def protocol(self) -> asyncio.BaseProtocol:
        """A connection's protocol (plain, or inside TLS): h11 on asyncio streams, served by ``_serve``.
        Another listener can hand it connections too (the AMQP port's, runtime/composition.py)."""
        reader = asyncio.StreamReader(limit=2 ** 16)
        return asyncio.StreamReaderProtocol(reader, self._serve)

    def routes(self) -> Routes:
        http = self.protocol if self.plain_http else None
        return Routes(http=http, tls=self.ssl_context, tls_http=self.protocol, unknown=Protocol.HTTP)

    async def start(self) -> None:
        self._listener = SniffingListener(self.routes(), self.host, self.port,
                                          tls_handshake_timeout_s=TLS_HANDSHAKE_TIMEOUT_S)
        await self._listener.start()
        self.port = self._listener.port

    async def stop(self) -> None:
        self._stopping = True
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        # Abort the transports first: a connection task whose cancellation raced with a completed read
        # (asyncio.wait_for on 3.11 can swallow it) then sees its stream end instead of waiting on it.
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        peer = _peer_host(writer)
        self._per_client[peer] = self._per_client.get(peer, 0) + 1
        try:
            if len(self._tasks) > self.max_connections:
                writer.write(_raw(Response(503, b"too many connections\n", "text/plain", [("Retry-After", "1")])))
                return
            if self._per_client[peer] > self.limits.max_connections_per_client:
                log.info("admin connection from %s over the %d per client address: 503", peer,
                         self.limits.max_connections_per_client)
                writer.write(_raw(Response(503, b"too many connections from this address\n", "text/plain",
                                           [("Retry-After", "1")])))
                return
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
            left = self._per_client.get(peer, 1) - 1
            if left > 0:
                self._per_client[peer] = left
            else:
                self._per_client.pop(peer, None)
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
                    await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
                except (Exception, asyncio.CancelledError):
                    # A client that does not finish the TLS close (it may still be sending a refused body)
                    # does not keep the connection's buffers alive.
                    writer.transport.abort()
            if not self._tasks and not self._writers and not self._stopping:
                if self._trim is not None:
                    self._trim.cancel()
                self._trim = asyncio.get_running_loop().call_later(TRIM_DELAY_S, self._release_memory)

    def _release_memory(self) -> None:
        """The port has been quiet for TRIM_DELAY_S: collect the reference cycles asyncio leaves behind a
        closed TLS connection (a stream's stored exception, its traceback, the frames holding the
        stream), then let the C allocator return what is free. Only the young generations are
        collected: the cycles are seconds old, and a full collection would walk every message the
        broker holds (16 ms here for 30 connections' worth, against 0.5 s and more for a full one)."""
        self._trim = None
        if not self._tasks and not self._writers:
            gc.collect(1)
            if _MALLOC_TRIM is not None:
                _MALLOC_TRIM(0)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve requests until the connection ends; True when it was handed over to a WebSocket."""
        conn = h11.Connection(h11.SERVER)
        peername = writer.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
        while not self._stopping:
            try:
                request = await self._read_request(conn, reader, peer)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await self._send(conn, writer, Response(exc.error_status_hint, b"bad request\n", "text/plain"))
                return False
            except _Refused as refused:
                writer.write(_raw(refused.response))
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    await writer.drain()
                return False
            if request is None:
                return False
            if self.websocket is not None and asks_for_websocket(request):
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
        # The stream writer goes with it: asyncio's StreamWriter closes its transport when it is garbage
        # collected, which would drop the WebSocket whenever the collector ran.
        self.websocket(request.raw_target, headers, writer.transport, rest, writer)  # type: ignore[arg-type]

    async def _read_request(self, conn: h11.Connection, reader: asyncio.StreamReader, peer: str) -> Request | None:
        loop = asyncio.get_running_loop()
        request: Request | None = None
        body = bytearray()
        limit = MAX_BODY
        limits = self.limits
        # The deadlines run from the request's first byte (bytes h11 already holds count): the head's,
        # and the whole request's (head and body).
        head_deadline = body_deadline = None
        if conn.trailing_data[0]:
            head_deadline, body_deadline = loop.time() + limits.header_timeout_s, loop.time() + limits.request_timeout_s
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if head_deadline is None or body_deadline is None:
                    timeout = limits.idle_timeout_s
                elif request is not None:
                    timeout = body_deadline - loop.time()
                else:
                    timeout = min(head_deadline, body_deadline) - loop.time()
                try:
                    if timeout <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(timeout):
                        data = await reader.read(65536)
                except TimeoutError:
                    if head_deadline is None:
                        raise  # an idle keep-alive connection: closed
                    what = "head" if request is None else "body"
                    allowed = limits.header_timeout_s if request is None else limits.request_timeout_s
                    log.info("admin request %s from %s not complete within %.0f s: 408", what, peer, allowed)
                    raise _Refused(Response(408, f"request {what} not complete in time\n".encode(),
                                            "text/plain")) from None
                if head_deadline is None:
                    now = loop.time()
                    head_deadline, body_deadline = now + limits.header_timeout_s, now + limits.request_timeout_s
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = self._request(event, b"", peer)
                if self.admit is not None:
                    verdict = self.admit(request)
                    if isinstance(verdict, Response):
                        raise _Refused(verdict)
                    limit = verdict
                length = request.headers.get("content-length", "")
                if length.isdigit() and int(length) > limit:
                    raise _Refused(_too_large(limit))
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    raise _Refused(_too_large(limit))
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                request.body = bytes(body)
                if asks_for_websocket(request):
                    continue  # h11 pauses next (a protocol switch); the request is returned then
                return request
            elif isinstance(event, h11.ConnectionClosed):
                return None
            elif event is h11.PAUSED:
                if request is not None and asks_for_websocket(request):
                    return request
                return None

    @staticmethod
    def _request(head: h11.Request, body: bytes | bytearray, peer: str = "") -> Request:
        target = head.target.decode("latin-1")
        path, query = parse_target(target)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        return Request(head.method.decode("ascii"), path, query, headers, bytes(body), target, peer)

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
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await writer.drain()


def _peer_host(writer: asyncio.StreamWriter) -> str:
    peername = writer.get_extra_info("peername")
    return str(peername[0]) if isinstance(peername, tuple) and peername else ""


def _too_large(limit: int) -> Response:
    return Response(413, f"request body over {limit} bytes\n".encode(), "text/plain")


def _raw(response: Response) -> bytes:
    """A response written without h11, for answers that end a connection whose request was not (fully)
    read: h11 only sends a response to a request it has parsed in full."""
    try:
        reason = http.HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    headers = [("Server", SERVER_NAME), ("Content-Length", str(len(response.body))), ("Connection", "close")]
    if response.content_type:
        headers.append(("Content-Type", response.content_type))
    headers.extend(response.headers)
    head = f"HTTP/1.1 {response.status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + response.body
