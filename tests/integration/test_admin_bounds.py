"""The management port's bounds against slow and greedy clients (loopback only, a bounded number of
clients for a bounded time): a whole request (head and body) has a deadline from its first byte and is
answered 408 and closed when it misses it; an idle keep-alive connection is closed; connections are
capped in total and per client address, the next one answered 503 with Retry-After. This is how busy
HTTP servers answer (RFC 9110 15.5.9 "408 Request Timeout": the server closes the connection; 15.6.4
"503 Service Unavailable" with Retry-After); the figures are configurable (sbemulator.admin.HttpLimits,
the CLI's --admin-* options; docs/management.md, "Limits of the management port").
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sbemulator import Emulator
from sbemulator.admin import HttpLimits
from sbemulator.auth import sign
from sbemulator.runtime import cli

SLOW_CLIENTS = 20
DEADLINE_S = 1.0  # the configured request deadline
POLL_S = 15.0  # how long the test waits at most: far below the old behaviour (never cut off)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    limits = HttpLimits(request_timeout_s=DEADLINE_S, header_timeout_s=DEADLINE_S, idle_timeout_s=DEADLINE_S,
                        max_connections=64, max_connections_per_client=2 * SLOW_CLIENTS)
    with Emulator(config=None, in_memory=True, admin_limits=limits) as running:
        yield running


@dataclass
class _Client:
    sock: socket.socket
    started: float
    got: bytes = b""
    closed_at: float | None = None
    sent: int = 0


def drip(port: int, prefix: bytes, drip_bytes: bytes, count: int) -> list[tuple[bytes, float]]:
    """``count`` clients each send ``prefix`` at once, then ``drip_bytes`` one byte every 0.1 s; returns
    what each read back (until the server closed) and when, relative to its first byte."""
    selector = selectors.DefaultSelector()
    clients: list[_Client] = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(prefix if prefix else drip_bytes[:1])
        sock.setblocking(False)
        clients.append(_Client(sock, time.monotonic()))
        selector.register(sock, selectors.EVENT_READ, clients[-1])
    end = time.monotonic() + POLL_S
    next_drip = time.monotonic()
    try:
        while any(c.closed_at is None for c in clients) and time.monotonic() < end:
            if time.monotonic() >= next_drip:
                next_drip += 0.1
                for client in clients:
                    if client.closed_at is None and client.sent < len(drip_bytes) - 1:
                        client.sent += 1
                        try:
                            client.sock.send(drip_bytes[client.sent:client.sent + 1])
                        except OSError:
                            pass
            for key, _ in selector.select(timeout=0.05):
                client = key.data
                try:
                    chunk = client.sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                client.got += chunk
                if not chunk:
                    client.closed_at = time.monotonic()
                    selector.unregister(client.sock)
    finally:
        for client in clients:
            client.sock.close()
    return [(c.got, (c.closed_at or float("inf")) - c.started) for c in clients]


def test_slow_request_heads_are_answered_408_and_closed(emu: Emulator) -> None:
    head = b"GET /$Resources/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200 + b"\r\n\r\n"
    assert emu.admin_port is not None
    results = drip(emu.admin_port, b"", head, SLOW_CLIENTS)
    for answer, after in results:
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert after < POLL_S  # cut off, within the deadline plus scheduling (not waiting for the client)


def test_slow_request_bodies_are_answered_408_and_closed(emu: Emulator) -> None:
    token = sign(f"https://127.0.0.1:{emu.admin_port}", emu.key_name, emu.key, int(time.time()) + 300)
    body = b"<entry/>" * 100
    head = (f"PUT /slow-queue HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {token}\r\n"
            f"Content-Type: application/atom+xml\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    assert emu.admin_port is not None
    results = drip(emu.admin_port, head, body, SLOW_CLIENTS)
    for answer, after in results:
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"request body not complete in time" in answer
        assert after < POLL_S


def test_an_idle_keep_alive_connection_is_closed(emu: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", emu.admin_port), timeout=POLL_S) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b'"ok"' not in answer:
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200")
        assert sock.recv(4096) == b""  # then nothing more: the server closed the idle connection


def test_connections_per_client_address_are_capped_with_503() -> None:
    limits = HttpLimits(max_connections_per_client=2)
    with Emulator(config=None, in_memory=True, admin_limits=limits) as emu:
        held = [socket.create_connection(("127.0.0.1", emu.admin_port), timeout=10) for _ in range(2)]
        try:
            for sock in held:  # served, and kept alive
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert sock.recv(4096).startswith(b"HTTP/1.1 200")
            with socket.create_connection(("127.0.0.1", emu.admin_port), timeout=10) as extra:
                extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = extra.recv(4096)
                assert answer.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in answer
            # Another client address (another loopback address) is not counted with them.
            with socket.create_connection(("127.0.0.1", emu.admin_port), timeout=10,
                                          source_address=("127.0.0.2", 0)) as other:
                other.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert other.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            for sock in held:
                sock.close()


def test_the_bounds_come_from_the_command_line() -> None:
    args = cli.parse_args(["--config", "x.json", "--admin-request-timeout", "5", "--admin-idle-timeout", "7",
                           "--admin-max-connections", "9", "--admin-max-connections-per-client", "3"])
    limits = cli.admin_limits_from(args)
    assert (limits.request_timeout_s, limits.idle_timeout_s, limits.max_connections,
            limits.max_connections_per_client) == (5, 7, 9, 3)
    assert limits.header_timeout_s == HttpLimits().header_timeout_s
    with pytest.raises(SystemExit):
        cli.parse_args(["--config", "x.json", "--admin-max-connections-per-client", "0"])
