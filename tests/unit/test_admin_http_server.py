"""The small HTTP/1.1 server (h11 on asyncio streams), plain TCP on loopback with a stub handler."""

from __future__ import annotations

import asyncio

import pytest

from sbemulator.admin import http
from sbemulator.admin.http import HttpServer, Request, Response, parse_target


def test_parse_target_decodes_path_and_lowercases_query_names() -> None:
    assert parse_target("/a%20b/c?API-Version=1&$top=5&x") == ("/a b/c", {"api-version": "1", "$top": "5", "x": ""})


async def start(handler) -> HttpServer:
    server = HttpServer(handler, "127.0.0.1", 0)
    await server.start()
    return server


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return out


async def echo(request: Request) -> Response:
    body = f"{request.method} {request.path} {request.query} {len(request.body)}".encode()
    return Response(200, body, "text/plain")


async def test_keep_alive_and_bodies() -> None:
    server = await start(echo)
    try:
        data = (b"PUT /x?A=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                b"GET /y HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        out = await exchange(server.port, data)
        assert out.count(b"HTTP/1.1 200 OK") == 2
        assert b"PUT /x {'a': '1'} 3" in out and b"GET /y {} 0" in out
    finally:
        await server.stop()


async def test_garbage_gets_400_and_handler_errors_500() -> None:
    async def boom(request: Request) -> Response:
        raise RuntimeError("broken handler")

    server = await start(boom)
    try:
        assert (await exchange(server.port, b"HELLO\r\n\r\n")).startswith(b"HTTP/1.1 400")
        out = await exchange(server.port, b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 500")
    finally:
        await server.stop()


async def test_oversized_body_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "MAX_BODY", 10)
    server = await start(echo)
    try:
        out = await exchange(server.port, b"PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 20\r\n\r\n" + b"x" * 20)
        assert out.startswith(b"HTTP/1.1 413")
    finally:
        await server.stop()


async def test_stop_closes_idle_connections() -> None:
    server = await start(echo)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    await asyncio.sleep(0.05)
    await asyncio.wait_for(server.stop(), 5)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
