"""One port for everything: the AMQP port also serves AMQP over TLS, HTTPS and plain HTTP (management,
``/health``) and WebSockets (``ws://``, ``wss://``), told apart by each connection's first bytes; and the
WebSocket port serves ``wss://`` beside ``ws://``.

Why: Service Bus serves all of it on one host name (AMQP on 5671, HTTPS and WSS on 443), so the SDKs
build every address from the endpoint's host (and, given one, port). Microsoft's Go SDK tests
(azservicebus) dial AMQP, HTTPS and WSS on one host:port; the Python SDK with
``TransportType.AmqpOverWebsocket`` and no ``UseDevelopmentEmulator`` dials
``wss://<host>:443/$servicebus/websocket`` (its live tests ``test_queue_message_amqp_over_websocket``),
the JavaScript SDK always ``wss``. The Go SDK's WebSocket example asks for the subprotocol ``amqp``
(azservicebus ``example_websockets_test.go``), the others for ``AMQPWSB10``.
"""

from __future__ import annotations

import copy
import http.client
import socket
import ssl
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, TransportType
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.net import listener as listener_module
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive
from tests.fixtures.process import REPO_ROOT, start_emulator_process
from tests.integration.test_websocket import read_head, upgrade_request

WS = TransportType.AmqpOverWebsocket


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, websocket_port=0) as running:
        yield running


def tls_string(emu: Emulator, port: int) -> str:
    """The connection string without UseDevelopmentEmulator: the SDK speaks TLS (amqps, wss, https)."""
    return f"Endpoint=sb://localhost:{port};SharedAccessKeyName={emu.key_name};SharedAccessKey={emu.key}"


def send(client: ServiceBusClient, body: str) -> None:
    with client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage(body, message_id=body))


def test_the_python_sdk_reaches_everything_on_the_amqp_port(emu: Emulator) -> None:
    port, ca = emu.port, str(emu.ca_path)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:  # amqp://
        send(client, "amqp")
    with ServiceBusClient.from_connection_string(tls_string(emu, port), custom_endpoint_address=f"sb://localhost:{port}",
                                                 connection_verify=ca) as client:  # amqps://
        send(client, "amqps")
    with ServiceBusClient.from_connection_string(emu.connection_string, transport_type=WS,
                                                 custom_endpoint_address=f"sb://127.0.0.1:{port}") as client:
        send(client, "ws")  # ws://host:port/$servicebus/websocket
    with ServiceBusClient.from_connection_string(tls_string(emu, port), transport_type=WS,
                                                 custom_endpoint_address=f"https://localhost:{port}",
                                                 connection_verify=ca) as client:
        send(client, "wss")
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receive(receiver, 4)
            assert [m.message_id for m in got] == ["amqp", "amqps", "ws", "wss"]
            for message in got:
                receiver.complete_message(message)
    # The management API (HTTPS), the admin client building its URL from the same host:port.
    admin = ServiceBusAdministrationClient.from_connection_string(tls_string(emu, port), connection_verify=ca)
    with admin:
        assert admin.get_queue("orders").name == "orders"
        assert admin.get_queue_runtime_properties("orders").active_message_count == 0
    # And /health over plain HTTP.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def test_wss_beside_ws_on_the_websocket_port(emu: Emulator) -> None:
    """The port the SDKs dial for WebSockets (443 by default; a free one here) takes TLS too: wss:// as the
    Python SDK dials it without UseDevelopmentEmulator, ws:// as it dials it with."""
    assert emu.websocket is not None
    ws_port = emu.websocket.port
    with ServiceBusClient.from_connection_string(tls_string(emu, ws_port), transport_type=WS,
                                                 custom_endpoint_address=f"https://localhost:{ws_port}",
                                                 connection_verify=str(emu.ca_path)) as client:
        send(client, "over-wss")
    with ServiceBusClient.from_connection_string(emu.connection_string, transport_type=WS,
                                                 custom_endpoint_address=emu.websocket_endpoint) as client:
        send(client, "over-ws")
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            got = receive(receiver, 2)
            assert [m.message_id for m in got] == ["over-wss", "over-ws"]
            for message in got:
                receiver.complete_message(message)


@pytest.mark.parametrize("where", ["amqp port", "websocket port", "admin port"])
def test_the_go_sdks_subprotocol_amqp_is_taken(emu: Emulator, where: str) -> None:
    assert emu.websocket is not None and emu.admin is not None
    port = {"amqp port": emu.port, "websocket port": emu.websocket.port, "admin port": emu.admin.port}[where]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(upgrade_request(protocol="amqp"))
        head = read_head(sock).lower()
        assert head.startswith(b"http/1.1 101"), head
        assert b"sec-websocket-protocol: amqp\r\n" in head


def test_amqp_port_only_serves_no_http() -> None:
    with Emulator(config=None, in_memory=True, one_port=False) as emu:
        with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            # The AMQP layer answers what is not its header with its own header, then closes.
            assert sock.recv(8)[:4] == b"AMQP"


def test_a_connection_that_says_nothing_is_closed_within_the_sniff_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "SNIFF_TIMEOUT_S", 0.5)
    with Emulator(config=None, in_memory=True) as emu:
        assert emu.admin is not None
        for port in (emu.port, emu.admin.port):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                started = time.monotonic()
                sock.sendall(b"GE")  # part of a request line, and nothing more
                try:  # closed by the emulator (a reset: the bytes it peeked were never read), not timed out
                    assert sock.recv(1024) == b""
                except ConnectionResetError:
                    pass
                assert time.monotonic() - started < 9


def test_amqps_inside_tls_on_the_amqp_port_answers_the_amqp_header(emu: Emulator) -> None:
    context = ssl.create_default_context(cafile=emu.ca_path)
    with socket.create_connection(("127.0.0.1", emu.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"AMQP\x03\x01\x00\x00")
            assert tls.recv(8) == b"AMQP\x03\x01\x00\x00"


def _health_status(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return sock.recv(64)


def test_the_cli_serves_http_on_the_amqp_port_unless_told_amqp_port_only() -> None:
    config = str(REPO_ROOT / "infra" / "servicebus.json")
    proc = start_emulator_process("--config", config, "--in-memory", "--no-websocket")
    try:
        assert _health_status(proc.port).startswith(b"HTTP/1.1 200")
    finally:
        assert proc.terminate() == 0
    proc = start_emulator_process("--config", config, "--in-memory", "--no-websocket", "--amqp-port-only")
    try:
        assert _health_status(proc.port)[:4] == b"AMQP"  # the AMQP layer's header: no HTTP here
    finally:
        assert proc.terminate() == 0
