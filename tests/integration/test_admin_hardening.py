"""The HTTPS management port against clients that do not play along (raw TLS sockets).

Whoever reaches the port can try: a request is authenticated from its head before its body is read,
a head must arrive within a deadline, connections are capped, console sign-ins are rate-limited per
client address, and the ARM surface demands a token the emulator can verify (a namespace SAS token as
the bearer; ARM's own error codes, "Azure Resource Manager: authentication errors": AuthenticationFailed
for a missing credential, InvalidAuthenticationToken for a bad one).
"""

from __future__ import annotations

import copy
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.admin import arm_auth
from sbemulator.admin import http as admin_http
from sbemulator.auth import sign
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.fixtures.process import REPO_ROOT

ARM_QUEUE = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/ns/queues/orders"
API = "?api-version=2021-11-01"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True) as running:
        yield running


def tls(emu: Emulator, source: str = "127.0.0.1") -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=emu.ca_path)
    raw = socket.create_connection(("127.0.0.1", emu.admin_port), timeout=10, source_address=(source, 0))
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def read_response(sock: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    """One response: status, headers, body (by Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split(" ")[1]), headers, body


def request(sock: ssl.SSLSocket, method: str, path: str, headers: dict[str, str] | None = None,
            body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return read_response(sock)


def closed(sock: ssl.SSLSocket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


# ---------------------------------------------------------------------- body only after authentication
def test_an_unauthenticated_request_is_answered_before_its_body_is_read(emu: Emulator) -> None:
    with tls(emu) as sock:
        # A 4 MB body announced and never sent: the answer must not wait for it.
        sock.sendall(b"PUT /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/atom+xml\r\n"
                     b"Content-Length: 4000000\r\n\r\n")
        status, headers, body = read_response(sock)
        assert status == 401 and b"MissingToken" in body
        assert headers["connection"] == "close" and closed(sock)


def test_a_bad_token_is_refused_before_the_body_too(emu: Emulator) -> None:
    bad = sign("https://127.0.0.1/", emu.key_name, "not-the-key", int(time.time()) + 300)
    with tls(emu) as sock:
        sock.sendall(f"PUT /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {bad}\r\n"
                     "Content-Length: 4000000\r\n\r\n".encode())
        status, _, body = read_response(sock)
        assert status == 401 and b"invalid signature" in body


def test_an_unauthenticated_body_is_bounded_small(emu: Emulator) -> None:
    """The console's sign-in carries its key in the body, so it cannot be authenticated first: its body
    may be 16 KiB, and a larger one is refused from its Content-Length, unread."""
    with tls(emu) as sock:
        sock.sendall(b"POST /console/api/login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Requested-With: sbconsole\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        status, _, _ = read_response(sock)
        assert status == 413 and closed(sock)


def test_an_authenticated_request_still_takes_a_full_body(emu: Emulator) -> None:
    token = sign(f"https://127.0.0.1:{emu.admin_port}", emu.key_name, emu.key, int(time.time()) + 300)
    description = "<Description>" + "x" * 100_000 + "</Description>"  # over the unauthenticated bound
    body = ('<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription '
            'xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
            f"<MaxDeliveryCount>4</MaxDeliveryCount></QueueDescription></content>{description}</entry>").encode()
    with tls(emu) as sock:
        status, _, answer = request(sock, "PUT", "/big-body", {"Authorization": token,
                                                               "Content-Type": "application/atom+xml"}, body)
        assert status == 201, answer


# ---------------------------------------------------------------------- time and connection bounds
def test_a_head_dripped_a_byte_at_a_time_is_cut_off(monkeypatch: pytest.MonkeyPatch, emu: Emulator) -> None:
    monkeypatch.setattr(admin_http, "HEADER_TIMEOUT_S", 1.0)
    with tls(emu) as sock:
        sock.settimeout(0.2)
        answer = b""
        deadline = time.monotonic() + 15
        for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 1000:
            if time.monotonic() > deadline:
                break
            try:
                sock.sendall(bytes([byte]))
            except (ConnectionError, ssl.SSLError):
                break
            try:
                answer += sock.recv(4096)
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError):
                break
            if answer:
                break
        assert answer.startswith(b"HTTP/1.1 408"), answer


def test_connections_over_the_cap_get_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_http, "MAX_CONNECTIONS", 3)
    with Emulator(config=None, in_memory=True) as emu:
        held = [tls(emu) for _ in range(3)]
        try:
            for sock in held:  # each connection is being served (a keep-alive request answered)
                assert request(sock, "GET", "/health")[0] == 200
            with tls(emu) as extra:
                status, headers, _ = read_response(extra)
                assert status == 503 and headers["retry-after"] == "1"
            held.pop().close()
            deadline = time.monotonic() + 10
            while True:  # the freed slot is taken again once the server has seen the close
                with tls(emu) as again:
                    again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    if read_response(again)[0] == 200:
                        break
                assert time.monotonic() < deadline, "the freed connection slot was never reused"
                time.sleep(0.1)
        finally:
            for sock in held:
                sock.close()


# ---------------------------------------------------------------------- console sign-in rate limit
def sign_in(sock: ssl.SSLSocket, key: str) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"keyName": "RootManageSharedAccessKey", "key": key}).encode()
    return request(sock, "POST", "/console/api/login", {"X-Requested-With": "sbconsole",
                                                        "Content-Type": "application/json"}, body)


def test_console_sign_in_attempts_are_rate_limited_per_address(emu: Emulator) -> None:
    with tls(emu) as sock:
        for _ in range(5):
            assert sign_in(sock, "guess")[0] == 401
        status, headers, body = sign_in(sock, "guess")
        assert status == 429 and int(headers["retry-after"]) >= 1
        assert json.loads(body)["error"] == "TooManyRequests"
        # The right key does not get through either while the address is limited: it is not compared.
        assert sign_in(sock, emu.key)[0] == 429
    # Another client address is not affected (all of 127.0.0.0/8 is loopback on Linux).
    with tls(emu, source="127.0.0.2") as other:
        assert sign_in(other, emu.key)[0] == 200


# ---------------------------------------------------------------------- ARM: a credential it can verify
def arm(emu: Emulator, method: str, path: str, authorization: str | None, body: bytes = b"") -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    with tls(emu) as sock:
        status, _, answer = request(sock, method, path, headers, body)
    return status, json.loads(answer) if answer else {}


def test_arm_refuses_tokens_it_cannot_verify_and_changes_nothing(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("kept"))
    now = int(time.time())
    root = f"https://127.0.0.1:{emu.admin_port}/"
    refused = {
        None: "AuthenticationFailed",
        "Bearer x": "InvalidAuthenticationToken",
        "Bearer " + arm_auth.bearer_token(root, emu.key_name, "wrong-key", now + 300): "InvalidAuthenticationToken",
        "Bearer " + arm_auth.bearer_token(root, emu.key_name, emu.key, now - 10): "InvalidAuthenticationToken",
        # A token for one entity is not a token for the namespace's management.
        "Bearer " + arm_auth.bearer_token(root + "orders", emu.key_name, emu.key, now + 300):
            "InvalidAuthenticationToken",
    }
    for authorization, code in refused.items():
        status, body = arm(emu, "DELETE", ARM_QUEUE + API, authorization)
        assert (status, body["error"]["code"]) == (401, code), authorization
    assert "orders" in emu.call(emu.broker.entity_paths)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("orders") as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=5)] == ["kept"]
    good = "Bearer " + arm_auth.bearer_token(root, emu.key_name, emu.key, now + 300)
    assert arm(emu, "GET", ARM_QUEUE + API, good)[0] == 200
    # The SharedAccessSignature prefix may stay in the bearer value.
    assert arm(emu, "GET", ARM_QUEUE + API, "Bearer " + sign(root, emu.key_name, emu.key, now + 300))[0] == 200
    assert arm(emu, "DELETE", ARM_QUEUE + API, good)[0] == 200
    assert "orders" not in emu.call(emu.broker.entity_paths)


# ---------------------------------------------------------------------- a clean stop
def test_leaving_the_emulator_with_a_connection_mid_handshake_prints_nothing(tmp_path) -> None:
    script = tmp_path / "embed.py"
    script.write_text(
        "import socket, time\n"
        "from sbemulator import Emulator\n"
        "with Emulator() as emu:\n"
        "    held = socket.create_connection(('127.0.0.1', emu.admin_port))  # TLS never started\n"
        "    time.sleep(0.3)\n"
        "print('done')\n"
    )
    result = subprocess.run([sys.executable, str(script)], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "done"
    assert "Task was destroyed" not in result.stderr and "Event loop is closed" not in result.stderr, result.stderr


def test_leaving_the_emulator_with_clients_in_every_state_prints_nothing(tmp_path) -> None:
    """Issue #19 item 5: leaving `with Emulator(...)` while HTTPS clients still hold connections in any
    state (the admin SDK's kept-alive one, a head half sent, a body half sent, a WebSocket upgraded on the
    management port and on its own, an AMQP connection mid-handshake) prints nothing into the user's
    output ("Task was destroyed but it is pending!")."""
    script = tmp_path / "embed.py"
    script.write_text(
        "import base64, http.client, os, socket, ssl, time\n"
        "from azure.servicebus.management import ServiceBusAdministrationClient\n"
        "from sbemulator import Emulator\n"
        "UPGRADE = ('GET /$servicebus/websocket HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nUpgrade: websocket\\r\\n'\n"
        "           'Connection: Upgrade\\r\\nSec-WebSocket-Key: ' + base64.b64encode(os.urandom(16)).decode() +\n"
        "           '\\r\\nSec-WebSocket-Version: 13\\r\\nSec-WebSocket-Protocol: AMQPWSB10\\r\\n\\r\\n').encode()\n"
        "with Emulator(websocket_port=0) as emu:\n"
        "    ctx = ssl.create_default_context(cafile=emu.ca_path)\n"
        "    def tls():\n"
        "        return ctx.wrap_socket(socket.create_connection(('127.0.0.1', emu.admin_port), timeout=10),\n"
        "                               server_hostname='127.0.0.1')\n"
        "    admin = ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,\n"
        "                                                                connection_verify=emu.ca_path)\n"
        "    admin.create_queue('kept')\n"
        "    kept = http.client.HTTPSConnection('127.0.0.1', emu.admin_port, context=ctx, timeout=10)\n"
        "    kept.request('GET', '/console/')\n"
        "    kept.getresponse().read()\n"
        "    half_head = tls()\n"
        "    half_head.sendall(b'GET /kept HTTP/1.1\\r\\nHost: x\\r\\n')\n"
        "    half_body = tls()\n"
        "    half_body.sendall(b'POST /console/api/signin HTTP/1.1\\r\\nHost: x\\r\\n'\n"
        "                      b'Content-Length: 1000\\r\\n\\r\\n{')\n"
        "    wss = tls()\n"
        "    wss.sendall(UPGRADE)\n"
        "    assert wss.recv(12) == b'HTTP/1.1 101'\n"
        "    ws = socket.create_connection(('127.0.0.1', emu.websocket_port), timeout=10)\n"
        "    ws.sendall(UPGRADE)\n"
        "    assert ws.recv(12) == b'HTTP/1.1 101'\n"
        "    amqp = socket.create_connection(('127.0.0.1', emu.port), timeout=10)\n"
        "    amqp.sendall(b'AMQP\\x03\\x01\\x00\\x00')\n"
        "    amqp.recv(8)\n"
        "    time.sleep(0.3)\n"
        "print('done')\n"
    )
    result = subprocess.run([sys.executable, str(script)], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stdout + result.stderr
    for noise in ("Task was destroyed", "Event loop is closed", "Traceback", "Exception ignored", "Unclosed"):
        assert noise not in result.stderr, result.stderr
