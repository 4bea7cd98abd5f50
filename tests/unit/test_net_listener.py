"""SniffingListener (sbemulator/net/listener.py) over real loopback sockets: each connection reaches the
protocol its first bytes speak, with those bytes, whether they come at once or a byte at a time, in the
clear or inside TLS; what no route takes is closed; every address a host name resolves to is bound;
and a loop without readiness callbacks (Windows' proactor) still serves the port's first protocol."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest

from sbemulator.admin.tls import ensure_certificates, server_context
from sbemulator.net.listener import Routes, SniffingListener
from sbemulator.net.sniff import Protocol


class Recorder(asyncio.Protocol):
    """Answers ``<name>:<the bytes it was given>`` once it holds ``expect`` bytes, then closes."""

    def __init__(self, name: str, expect: int) -> None:
        self.name, self.expect = name, expect
        self.data = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.data += data
        if len(self.data) >= self.expect and self.transport is not None:
            self.transport.write(self.name.encode() + b":" + self.data)
            self.transport.close()


def routes(expect: int, tls: ssl.SSLContext | None = None, unknown: Protocol | None = None) -> Routes:
    return Routes(amqp=lambda: Recorder("amqp", expect), http=lambda: Recorder("http", expect), tls=tls,
                  unknown=unknown)


async def exchange(port: int, chunks: list[bytes], context: ssl.SSLContext | None = None,
                   host: str = "127.0.0.1") -> bytes:
    reader, writer = await asyncio.open_connection(host, port, ssl=context,
                                                   server_hostname="localhost" if context else None)
    try:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            await asyncio.sleep(0.02)
        async with asyncio.timeout(10):
            return await reader.read()
    except ConnectionResetError:  # closed by the listener with the bytes it peeked unread: a reset
        return b""
    finally:
        writer.close()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    paths = ensure_certificates(Path(tmp_path_factory.mktemp("tls")))
    return server_context(paths.cert, paths.key), ssl.create_default_context(cafile=str(paths.ca))


async def test_each_protocol_reaches_its_route_with_its_first_bytes() -> None:
    listener = SniffingListener(routes(8), "127.0.0.1", 0)
    await listener.start()
    try:
        assert await exchange(listener.port, [b"AMQP\x00\x01\x00\x00"]) == b"amqp:AMQP\x00\x01\x00\x00"
        assert await exchange(listener.port, [b"GET / HT"]) == b"http:GET / HT"
        # A byte at a time: the listener waits for a decisive prefix (peeking again), and the protocol
        # still reads every byte.
        dribbled = [bytes([b]) for b in b"AMQP\x03\x01\x00\x00"]
        assert await exchange(listener.port, dribbled) == b"amqp:AMQP\x03\x01\x00\x00"
        assert listener.counts == {"amqp": 2, "http": 1}
    finally:
        await listener.stop()


async def test_tls_is_opened_and_sniffed_again_inside(certificates: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    server_tls, client_tls = certificates
    listener = SniffingListener(routes(8, server_tls), "127.0.0.1", 0)
    await listener.start()
    try:
        assert await exchange(listener.port, [b"AMQP\x02\x01\x00\x00"], client_tls) == b"amqp:AMQP\x02\x01\x00\x00"
        assert await exchange(listener.port, [b"PUT /q H"], client_tls) == b"http:PUT /q H"
        assert listener.counts == {"tls": 2}
    finally:
        await listener.stop()


async def test_what_no_route_takes_is_closed_or_goes_to_the_unknown_route() -> None:
    closing = SniffingListener(Routes(amqp=lambda: Recorder("amqp", 8)), "127.0.0.1", 0)
    falling = SniffingListener(routes(8, unknown=Protocol.AMQP), "127.0.0.1", 0)
    await closing.start()
    await falling.start()
    try:
        assert await exchange(closing.port, [b"GET / HTTP/1.1\r\n"]) == b""  # no HTTP route: closed
        assert await exchange(closing.port, [b"\x16\x03\x01\x00\x05hello"]) == b""  # no TLS: closed
        assert await exchange(falling.port, [b"\x00\x00\x00\x08\x02\x00\x00\x00"]) == \
            b"amqp:\x00\x00\x00\x08\x02\x00\x00\x00"
    finally:
        await closing.stop()
        await falling.stop()


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
async def test_a_host_name_is_served_on_every_address_it_resolves_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """As asyncio's create_server does: ``localhost`` resolves to 127.0.0.1 and ::1 on many systems (here
    the resolver is made to say so), and both are bound on one port."""
    loop = asyncio.get_running_loop()

    async def both(host: str, port: int, **_kwargs: object) -> list[tuple]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(loop, "getaddrinfo", both)
    listener = SniffingListener(routes(8), "localhost", 0)
    await listener.start()
    try:
        for host in ("127.0.0.1", "::1"):
            assert await exchange(listener.port, [b"AMQP\x00\x01\x00\x00"], host=host) == b"amqp:AMQP\x00\x01\x00\x00"
    finally:
        await listener.stop()


async def test_a_loop_without_readiness_callbacks_serves_the_first_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = asyncio.get_running_loop()

    def no_readers(*_args: object) -> None:
        raise NotImplementedError

    monkeypatch.setattr(loop, "add_reader", no_readers)
    listener = SniffingListener(routes(8), "127.0.0.1", 0)
    await listener.start()
    try:
        assert await exchange(listener.port, [b"AMQP\x00\x01\x00\x00"]) == b"amqp:AMQP\x00\x01\x00\x00"
        assert listener.counts == {}  # not sniffed: the port is a plain AMQP listener
    finally:
        monkeypatch.undo()
        await listener.stop()


async def test_connections_that_say_nothing_are_bounded_in_number(monkeypatch: pytest.MonkeyPatch) -> None:
    from sbemulator.net import listener as listener_module

    monkeypatch.setattr(listener_module, "MAX_UNDECIDED", 3)
    listener = SniffingListener(routes(8), "127.0.0.1", 0)
    await listener.start()
    silent = []
    try:
        for _ in range(3):
            silent.append(await asyncio.open_connection("127.0.0.1", listener.port))
        async with asyncio.timeout(10):
            while listener.undecided() < 3:  # the listener has accepted them
                await asyncio.sleep(0.01)
        silent.append(await asyncio.open_connection("127.0.0.1", listener.port))  # one more: the oldest goes
        async with asyncio.timeout(10):
            assert await silent[0][0].read() == b""
        # A connection that speaks is still served (the next oldest silent one makes room).
        assert await exchange(listener.port, [b"AMQP\x00\x01\x00\x00"]) == b"amqp:AMQP\x00\x01\x00\x00"
        assert listener.undecided() <= 3
    finally:
        for _, w in silent:
            w.close()
        await listener.stop()
