"""A listening socket whose connections are each handed to the protocol they speak.

A connection's first bytes are looked at without being consumed (``MSG_PEEK``), so the protocol chosen
reads the connection from its first byte as if it had accepted it itself, TLS included: a ClientHello is
handed to asyncio's TLS with the listener's certificate, and what the client says inside the TLS session
is sniffed again (AMQP over TLS, or HTTPS and secure WebSockets). The decision is :func:`sniff.classify`.

Bounded: a connection that says nothing decisive within ``sniff_timeout_s`` is closed, no more than
:data:`~sniff.SNIFF_BYTES` bytes are peeked (inside TLS, what one read brings, up to
:data:`MAX_TLS_SNIFF_BUFFER`), and at most :data:`MAX_UNDECIDED` connections wait to be decided (the
oldest silent one makes room for a new one). The cost on a connection is one ``recv(MSG_PEEK)`` system
call, usually right after the accept (the client's first bytes arrive with or just after its handshake), and nothing
after the protocol is chosen: the connection's transport is asyncio's own.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from .sniff import SNIFF_BYTES, Protocol, classify

log = logging.getLogger("sbemulator")

ProtocolFactory = Callable[[], asyncio.BaseProtocol]

SNIFF_TIMEOUT_S = 10.0  # from the accept to the first decisive bytes (and inside TLS, from its handshake)
TLS_HANDSHAKE_TIMEOUT_S = 10.0
RETRY_S = 0.005  # a connection that sent part of a prefix is looked at again this much later
MAX_TLS_SNIFF_BUFFER = 64 * 1024  # what one read inside TLS may bring before the protocol is chosen
ACCEPTS_PER_WAKE = 64  # connections accepted per readiness of the listening socket, like asyncio's backlog
# Connections not yet handed to their protocol (waiting for first bytes, in a TLS handshake, or waiting
# for first bytes inside TLS), each for at most its deadline: at this many, the oldest connection still
# waiting for its first bytes is closed to make room (a new one, whose bytes may be on their way, gets its
# chance), so clients that open connections and say nothing cannot hold unbounded state.
MAX_UNDECIDED = 1024
ACCEPT_RETRY_S = 1.0  # after accept failed for want of descriptors or memory
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass(frozen=True)
class Routes:
    """Where each protocol goes. ``tls`` None: TLS is refused (closed); otherwise inside TLS, AMQP goes to
    ``tls_amqp`` (default: ``amqp``) and HTTP to ``tls_http`` (default: ``http``). Bytes that are none of
    them go to ``unknown`` (``Protocol.HTTP`` on an HTTP port, whose parser answers 400; ``Protocol.AMQP``
    on the AMQP port, whose layer answers with its protocol header), else the connection is closed, as is
    a protocol without a route."""

    amqp: ProtocolFactory | None = None
    http: ProtocolFactory | None = None
    tls: ssl.SSLContext | None = None
    tls_amqp: ProtocolFactory | None = None
    tls_http: ProtocolFactory | None = None
    unknown: Protocol | None = None

    def inner(self, kind: Protocol) -> ProtocolFactory | None:
        if kind is Protocol.UNKNOWN and self.unknown is not None:
            kind = self.unknown
        if kind is Protocol.AMQP:
            return self.tls_amqp or self.amqp
        if kind is Protocol.HTTP:
            return self.tls_http or self.http
        return None

    def only_inner(self) -> ProtocolFactory | None:
        """The one protocol served inside TLS, when there is just one: it gets the connection as soon as
        the handshake is done, with nothing to wait for (a server that speaks first, such as an HTTP
        server answering 503 to a connection over its cap, can then do so)."""
        amqp, http = self.tls_amqp or self.amqp, self.tls_http or self.http
        if amqp is None or http is None:
            return amqp or http
        return None

    def fallback(self) -> tuple[ProtocolFactory, ssl.SSLContext | None]:
        """Without sniffing: AMQP when it is routed (plain), else HTTP over TLS when TLS is served, else
        plain HTTP."""
        if self.amqp is not None:
            return self.amqp, None
        http = self.tls_http or self.http
        if http is None:
            raise ValueError("no protocol routed")
        return http, self.tls

    def outer(self, kind: Protocol) -> ProtocolFactory | None:
        if kind is Protocol.UNKNOWN and self.unknown is not None:
            kind = self.unknown
        if kind is Protocol.AMQP:
            return self.amqp
        if kind is Protocol.HTTP:
            return self.http
        return None


def feed(protocol: asyncio.BaseProtocol, data: bytes) -> None:
    """Give ``protocol`` bytes that were read before it owned the transport."""
    receive = getattr(protocol, "data_received", None)
    if receive is not None:
        receive(data)
        return
    assert isinstance(protocol, asyncio.BufferedProtocol)
    view = memoryview(data)
    while view:
        buffer = memoryview(protocol.get_buffer(len(view)))
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        protocol.buffer_updated(n)
        view = view[n:]


def _bound(family: int, kind: int, proto: int, address: tuple, backlog: int) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _TlsSniffer(asyncio.Protocol):
    """The first protocol inside a TLS session: reads until the client's first bytes decide, then hands
    the transport and those bytes to the protocol they speak."""

    def __init__(self, routes: Routes, timeout_s: float, pending: set[_TlsSniffer]) -> None:
        self.routes = routes
        self.timeout_s = timeout_s
        self.pending = pending
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.pending.add(self)
        self._timer = asyncio.get_running_loop().call_later(self.timeout_s, self._expire)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if transport is None:
            return
        self.buffer += data
        kind = classify(self.buffer)
        if kind is None:
            if len(self.buffer) > MAX_TLS_SNIFF_BUFFER:
                transport.abort()
            return
        self._done()
        factory = self.routes.inner(kind)
        if factory is None:
            log.info("connection from %s inside TLS speaks %s, not served here: closed",
                     transport.get_extra_info("peername"), kind.value)
            transport.close()
            return
        protocol = factory()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        feed(protocol, bytes(self.buffer))
        self.buffer = bytearray()

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._done()
        self.transport = None

    def _done(self) -> None:
        self.pending.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.transport is not None:
            log.info("connection from %s sent nothing decisive inside TLS within %.0f s: closed",
                     self.transport.get_extra_info("peername"), self.timeout_s)
            self.transport.abort()


class _Waiting:
    __slots__ = ("retry", "sock", "timer")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.timer: asyncio.TimerHandle | None = None
        self.retry: asyncio.TimerHandle | None = None


class SniffingListener:
    """Listens on ``host:port`` and serves each connection by what it speaks (see :class:`Routes`).
    ``port`` 0 picks a free port (``self.port`` is the bound one after :meth:`start`)."""

    def __init__(self, routes: Routes, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 512,
                 sniff_timeout_s: float | None = None,
                 tls_handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S) -> None:
        self.routes = routes
        self.host = host
        self.port = port
        self.backlog = backlog
        self.sniff_timeout_s = SNIFF_TIMEOUT_S if sniff_timeout_s is None else sniff_timeout_s
        self.tls_handshake_timeout_s = tls_handshake_timeout_s
        self._socks: list[socket.socket] = []
        self._fallback: list[asyncio.base_events.Server] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[int, _Waiting] = {}
        self._connecting: set[asyncio.Task] = set()
        self._tls_pending: set[_TlsSniffer] = set()
        self.counts: dict[str, int] = {}  # connections served, by protocol (for tests and the curious)

    async def start(self) -> None:
        """Bind every address ``host`` resolves to (as asyncio's ``create_server`` does: ``localhost`` is
        127.0.0.1 and ::1), on one port (``port`` 0: the first bind picks it)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        infos = await loop.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        seen: set[tuple[int, object]] = set()
        try:
            for family, kind, proto, _, address in infos:
                if (family, address[0]) in seen:
                    continue
                seen.add((family, address[0]))
                if self._socks and address[1] == 0:  # the port the first bind picked
                    address = (address[0], self.port, *address[2:])
                sock = _bound(family, kind, proto, address, self.backlog)
                self._socks.append(sock)
                self.port = sock.getsockname()[1]
            for sock in self._socks:
                await self._serve(sock)
        except BaseException:
            await self.stop()
            raise

    async def _serve(self, sock: socket.socket) -> None:
        assert self._loop is not None
        try:
            self._loop.add_reader(sock.fileno(), self._on_accept, sock)
        except NotImplementedError:
            # A loop without readiness callbacks (Windows' proactor): no sniffing; the port serves what it
            # served before there was any, the one protocol its routes put first.
            factory, context = self.routes.fallback()
            self._fallback.append(await self._loop.create_server(
                factory, sock=sock, ssl=context, backlog=self.backlog,
                ssl_handshake_timeout=self.tls_handshake_timeout_s if context else None))

    async def stop(self) -> None:
        loop, socks = self._loop, self._socks
        if loop is None:
            return
        self._socks = []
        for server in self._fallback:  # they own their sockets
            server.close()
        self._fallback = []
        for sock in socks:
            if sock.fileno() >= 0:
                try:
                    loop.remove_reader(sock.fileno())
                except NotImplementedError:
                    pass
                sock.close()
        for fd in list(self._waiting):
            self._drop(fd)
        for sniffer in list(self._tls_pending):
            if sniffer.transport is not None:
                sniffer.transport.abort()
        for task in list(self._connecting):
            task.cancel()
        if self._connecting:
            await asyncio.wait(list(self._connecting), timeout=2)

    # ------------------------------------------------------------------ accepting and peeking
    def _on_accept(self, sock: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                conn, _address = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES and self._loop is not None:
                    # Out of file descriptors or memory: readiness stays, so stop accepting for a while
                    # rather than spin (asyncio's own accept loop does the same).
                    log.warning("accept on port %d failed (%s): accepting again in %.0f s", self.port, exc,
                                ACCEPT_RETRY_S)
                    self._loop.remove_reader(sock.fileno())
                    self._loop.call_later(ACCEPT_RETRY_S, self._resume_accepting, sock)
                else:
                    log.warning("accept on port %d failed: %s", self.port, exc)
                return
            conn.setblocking(False)
            if self._peek(conn) is None:
                if self.undecided() >= MAX_UNDECIDED and not self._evict_oldest():
                    conn.close()  # every undecided connection is in TLS: no room
                else:
                    self._wait(conn)

    def _evict_oldest(self) -> bool:
        if not self._waiting:
            return False
        log.info("port %d has %d connections that said nothing yet: the oldest is closed", self.port,
                 MAX_UNDECIDED)
        self._drop(next(iter(self._waiting)))
        return True

    def undecided(self) -> int:
        """Connections accepted and not yet handed to their protocol."""
        return len(self._waiting) + len(self._connecting) + len(self._tls_pending)

    def _resume_accepting(self, sock: socket.socket) -> None:
        if sock in self._socks and self._loop is not None:
            self._loop.add_reader(sock.fileno(), self._on_accept, sock)

    def _peek(self, conn: socket.socket) -> Protocol | bool | None:
        """Look at the first bytes: dispatched (True), closed (False) or not decided yet (None)."""
        try:
            data = conn.recv(SNIFF_BYTES, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            conn.close()
            return False
        if not data:  # closed before it said anything
            conn.close()
            return False
        kind = classify(data)
        if kind is None:
            return None
        self._dispatch(conn, kind)
        return True

    def _wait(self, conn: socket.socket) -> None:
        assert self._loop is not None
        fd = conn.fileno()
        waiting = _Waiting(conn)
        waiting.timer = self._loop.call_later(self.sniff_timeout_s, self._expire, fd)
        self._waiting[fd] = waiting
        self._loop.add_reader(fd, self._on_readable, fd)

    def _on_readable(self, fd: int) -> None:
        waiting = self._waiting.get(fd)
        if waiting is None:
            return
        assert self._loop is not None
        self._loop.remove_reader(fd)
        result = self._peek_waiting(waiting)
        if result is None:  # part of a prefix: what is peeked stays readable, so look again a little later
            waiting.retry = self._loop.call_later(RETRY_S, self._resume, fd)

    def _peek_waiting(self, waiting: _Waiting) -> Protocol | bool | None:
        sock = waiting.sock
        try:
            data = sock.recv(SNIFF_BYTES, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            assert self._loop is not None
            self._loop.add_reader(sock.fileno(), self._on_readable, sock.fileno())
            return True  # not ready after all: waiting again (not a partial prefix)
        except OSError:
            self._drop(sock.fileno())
            return False
        if not data:
            self._drop(sock.fileno())
            return False
        kind = classify(data)
        if kind is None:
            return None
        self._forget(sock.fileno())
        self._dispatch(sock, kind)
        return True

    def _resume(self, fd: int) -> None:
        waiting = self._waiting.get(fd)
        if waiting is not None and self._loop is not None:
            waiting.retry = None
            self._loop.add_reader(fd, self._on_readable, fd)

    def _expire(self, fd: int) -> None:
        waiting = self._waiting.get(fd)
        if waiting is not None:
            log.info("connection to port %d said nothing decisive within %.0f s: closed",
                     self.port, self.sniff_timeout_s)
            self._drop(fd)

    def _forget(self, fd: int) -> _Waiting | None:
        waiting = self._waiting.pop(fd, None)
        if waiting is None:
            return None
        if self._loop is not None:
            self._loop.remove_reader(fd)
        for handle in (waiting.timer, waiting.retry):
            if handle is not None:
                handle.cancel()
        return waiting

    def _drop(self, fd: int) -> None:
        waiting = self._forget(fd)
        if waiting is not None:
            waiting.sock.close()

    # ------------------------------------------------------------------ handing over
    def _dispatch(self, conn: socket.socket, kind: Protocol) -> None:
        assert self._loop is not None
        self.counts[kind.value] = self.counts.get(kind.value, 0) + 1
        if kind is Protocol.TLS and self.routes.tls is not None:
            if self.undecided() >= MAX_UNDECIDED and not self._evict_oldest():
                log.info("port %d has %d connections not yet decided: a TLS one more closed", self.port,
                         MAX_UNDECIDED)
                conn.close()
                return
            routes, timeout, pending = self.routes, self.sniff_timeout_s, self._tls_pending

            def sniffer() -> _TlsSniffer:
                return _TlsSniffer(routes, timeout, pending)

            self._connect(conn, routes.only_inner() or sniffer, ssl=self.routes.tls,
                          ssl_handshake_timeout=self.tls_handshake_timeout_s)
            return
        factory = self.routes.outer(kind)
        if factory is None:
            log.info("connection to port %d speaks %s, not served here: closed", self.port, kind.value)
            conn.close()
            return
        self._connect(conn, factory)

    def _connect(self, conn: socket.socket, factory: ProtocolFactory, **tls: object) -> None:
        assert self._loop is not None
        task = self._loop.create_task(self._loop.connect_accepted_socket(factory, conn, **tls))  # type: ignore[arg-type]
        self._connecting.add(task)
        task.add_done_callback(lambda done: self._connected(done, conn))

    def _connected(self, task: asyncio.Task, conn: socket.socket) -> None:
        self._connecting.discard(task)
        if task.cancelled():
            conn.close()
            return
        exc = task.exception()
        if exc is not None:  # a failed TLS handshake, a peer gone before its transport was made
            log.debug("connection to port %d not set up: %r", self.port, exc)
            conn.close()
