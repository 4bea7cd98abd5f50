"""AMQP over WebSockets: the SDKs' ``TransportType.AmqpOverWebsocket`` against the emulator.

Service Bus serves the AMQP WebSocket binding on ``wss://<namespace>:443/$servicebus/websocket`` with the
subprotocol ``AMQPWSB10`` ("AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide", and "Service
Bus: AMQP over WebSockets" in the SDKs' TransportType docs: the transport for clients behind proxies and
firewalls that only let port 443 out). In emulator mode (``UseDevelopmentEmulator=true``) the Python SDK
dials plain ``ws://`` on port 443 of the namespace host; ``custom_endpoint_address`` points it at another
port. What is exercised is what the SDK's queue tests do over either transport: sending (single and
batch), peek-lock receive with complete, abandon and dead-letter, receive-and-delete, sessions and
session state, several links on one connection, sync and async.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import gc
import os
import socket
import ssl
from collections.abc import Iterator

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
    TransportType,
)
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from sbemulator import Emulator
from sbemulator.runtime import websocket as websocket_module
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive

WS = TransportType.AmqpOverWebsocket


def _ws_port(emu: Emulator) -> int:
    assert emu.websocket is not None, "the emulator was started without its WebSocket listener"
    return emu.websocket.port


@pytest.fixture
def ws_emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, websocket_port=0) as emu:
        yield emu


def ws_client(emu: Emulator) -> ServiceBusClient:
    assert emu.websocket_endpoint is not None
    return ServiceBusClient.from_connection_string(emu.connection_string, transport_type=WS,
                                                   custom_endpoint_address=emu.websocket_endpoint)


def test_sync_sdk_sends_receives_and_settles_over_websocket(ws_emu: Emulator) -> None:
    with ws_client(ws_emu) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("single", message_id="m0", application_properties={"k": "v"}))
            batch = sender.create_message_batch()
            for i in range(1, 5):
                batch.add_message(ServiceBusMessage(f"batched {i}", message_id=f"m{i}"))
            sender.send_messages(batch)
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receive(receiver, 5)
            assert [m.message_id for m in got] == ["m0", "m1", "m2", "m3", "m4"]
            assert str(got[0]) == "single" and got[0].application_properties == {b"k": b"v"}
            assert all(m.delivery_count == 0 for m in got)
            receiver.complete_message(got[0])
            receiver.complete_message(got[1])
            receiver.abandon_message(got[2])
            receiver.dead_letter_message(got[3], reason="Bad", error_description="over websocket")
            receiver.complete_message(got[4])
            [again] = receive(receiver, 1)
            assert again.message_id == "m2" and again.delivery_count == 1
            receiver.complete_message(again)
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = receive(dlq, 1)
            assert dead.message_id == "m3" and dead.dead_letter_reason == "Bad"
            dlq.complete_message(dead)
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as rd:
            assert rd.peek_messages(max_message_count=5) == []
    # The same broker serves TCP clients: what went over the WebSocket is there for them.
    with ServiceBusClient.from_connection_string(ws_emu.connection_string) as tcp:
        with tcp.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("from tcp"))
    with ws_client(ws_emu) as client:
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as rd:
            assert [str(m) for m in receive(rd, 1)] == ["from tcp"]


def test_sync_sdk_sessions_over_websocket(ws_emu: Emulator) -> None:
    with ws_client(ws_emu) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages([ServiceBusMessage(f"s{i}", session_id="a") for i in range(3)])
        with client.get_queue_receiver("sessions", session_id="a", max_wait_time=5) as receiver:
            got = receive(receiver, 3)
            assert [str(m) for m in got] == ["s0", "s1", "s2"]
            receiver.session.set_state(b"state over ws")
            assert receiver.session.get_state() == b"state over ws"
            for message in got:
                receiver.complete_message(message)


async def test_async_sdk_sends_receives_and_settles_over_websocket(ws_emu: Emulator) -> None:
    async with AsyncServiceBusClient.from_connection_string(
            ws_emu.connection_string, transport_type=WS, custom_endpoint_address=ws_emu.websocket_endpoint) as client:
        async with client.get_queue_sender("orders") as sender:
            await sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(3)])
        async with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got: list = []
            for _ in range(10):
                got += await receiver.receive_messages(max_message_count=3 - len(got), max_wait_time=1)
                if len(got) == 3:
                    break
            assert [str(m) for m in got] == ["a0", "a1", "a2"]
            await receiver.abandon_message(got[0])
            for message in got[1:]:
                await receiver.complete_message(message)
            [again] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert str(again) == "a0" and again.delivery_count == 1
            await receiver.complete_message(again)
            assert await receiver.peek_messages(max_message_count=5) == []


async def test_async_sdk_many_links_on_one_websocket(ws_emu: Emulator) -> None:
    """Several senders and receivers opened at once share the one WebSocket connection of the client."""
    async with AsyncServiceBusClient.from_connection_string(
            ws_emu.connection_string, transport_type=WS, custom_endpoint_address=ws_emu.websocket_endpoint) as client:
        async def round_trip(queue: str) -> str:
            async with client.get_queue_sender(queue) as sender:
                await sender.send_messages(ServiceBusMessage(f"to {queue}"))
            async with client.get_queue_receiver(queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                                 max_wait_time=5) as receiver:
                [message] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                return str(message)

        queues = ["orders", "retry3", "dedup"]
        assert await asyncio.gather(*(round_trip(q) for q in queues)) == [f"to {q}" for q in queues]


def test_wss_on_the_management_port_with_tls(ws_emu: Emulator) -> None:
    """With TLS (a connection string without UseDevelopmentEmulator, as for the real service) the SDK
    dials wss://: the HTTPS management endpoint upgrades to the same AMQP service."""
    real_style = ws_emu.connection_string.replace("UseDevelopmentEmulator=true;", "")
    with ServiceBusClient.from_connection_string(
            real_style, transport_type=WS, custom_endpoint_address=f"sb://127.0.0.1:{ws_emu.admin_port}",
            connection_verify=ws_emu.ca_path) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("over wss"))
            # The HTTP server's stream writer, collected, closed the upgraded connection (a JS run
            # failed with close code 1006 whenever the collector ran mid-test): collect on purpose.
            gc.collect()
            sender.send_messages(ServiceBusMessage("after a collection"))
        with client.get_queue_receiver("orders") as receiver:
            got = receive(receiver, 2)
            assert [str(m) for m in got] == ["over wss", "after a collection"]
            for message in got:
                receiver.complete_message(message)
    # The management API keeps working on the same port after a connection was upgraded.
    import urllib.request

    context = ssl.create_default_context(cafile=ws_emu.ca_path)
    with urllib.request.urlopen(f"{ws_emu.admin_url}/health", context=context, timeout=10) as response:
        assert response.status == 200


# ---------------------------------------------------------------------- the binding itself, raw sockets
def upgrade_request(path: str = "/$servicebus/websocket", protocol: str | None = "AMQPWSB10") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """One client frame (RFC 6455 5.2: clients mask); short payloads only."""
    assert len(payload) < 126
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body


def test_upgrade_answers_101_with_the_amqp_subprotocol_and_carries_the_amqp_header(ws_emu: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(upgrade_request())
        head = read_head(sock)
        assert head.startswith(b"HTTP/1.1 101"), head
        assert b"sec-websocket-protocol: amqpwsb10" in head.lower()
        # The AMQP protocol header in a binary message: the emulator answers with its own (SASL).
        sock.sendall(masked_frame(0x2, b"AMQP\x03\x01\x00\x00"))
        frame = sock.recv(64)
        assert frame[0] == 0x82  # FIN + binary
        assert frame[2:10] == b"AMQP\x03\x01\x00\x00"


@pytest.mark.parametrize(("path", "protocol", "status"), [
    ("/somewhere/else", "AMQPWSB10", b"404"),
    ("/$servicebus/websocket", None, b"400"),
])
def test_upgrade_refused_for_another_path_or_without_the_subprotocol(ws_emu: Emulator, path: str,
                                                                      protocol: str | None, status: bytes) -> None:
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(upgrade_request(path, protocol))
        head = read_head(sock)
        assert head.split(b" ")[1] == status, head


def test_a_plain_http_request_on_the_websocket_port_is_refused(ws_emu: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        head = read_head(sock)
        assert head.startswith(b"HTTP/1.1 4"), head


def test_a_text_message_closes_with_1003(ws_emu: Emulator) -> None:
    """The binding carries AMQP in binary messages only."""
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(upgrade_request())
        assert read_head(sock).startswith(b"HTTP/1.1 101")
        sock.sendall(masked_frame(0x1, b"hello"))
        frame = sock.recv(64)
        assert frame[0] == 0x88  # FIN + close
        assert int.from_bytes(frame[2:4], "big") == 1003


def test_ping_is_answered_with_pong(ws_emu: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(upgrade_request())
        assert read_head(sock).startswith(b"HTTP/1.1 101")
        sock.sendall(masked_frame(0x9, b"are you there"))
        frame = sock.recv(64)
        assert frame[0] == 0x8A and frame[2:] == b"are you there"


def test_an_unfinished_upgrade_is_cut_off(monkeypatch: pytest.MonkeyPatch, ws_emu: Emulator) -> None:
    monkeypatch.setattr(websocket_module, "HANDSHAKE_TIMEOUT_S", 0.5)
    with socket.create_connection(("127.0.0.1", _ws_port(ws_emu)), timeout=10) as sock:
        sock.sendall(b"GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert sock.recv(1024) == b""  # closed by the emulator within the deadline (the socket's 10 s)
