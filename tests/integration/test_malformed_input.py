"""Malformed AMQP input against a running emulator, over raw sockets.

A Service Bus endpoint shares one process between many clients: one broken or hostile connection
must get a spec-conformant answer (AMQP 1.0 part 2: header exchange, close with an error, session
end) and must not disturb anyone else. So after every bad connection a normal SDK client connects
anew, sends, and checks that every message accepted so far, including those sent before the bad
connection, is still in the queue.

One emulator serves the whole module (SDK connections cost about half a second each); the ledger of
accepted messages makes each test independent of which other tests ran before it.
"""

from __future__ import annotations

import copy
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.amqp.framing import AMQP_HEADER, FRAME_AMQP, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import (
    Begin,
    Close,
    End,
    Open,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
)
from sbemulator.amqp.types import Symbol, UInt
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.unit.test_amqp_connection_peer import Frame, parse_output

# Every socket operation's bound. The server answers in milliseconds; the bound only ends a wait for a
# server that never answers, so it is wide: 3 s was reached on a loaded machine by a server thread that
# simply had not run yet (the emulator shares this process with the test).
TIMEOUT = 15.0
QUEUE = "orders"


# ------------------------------------------------------------------ raw client
class RawClient:
    """A socket client that sends whatever it is told to, and reads frames with timeouts."""

    def __init__(self, port: int, timeout: float = TIMEOUT, receive_buffer: int | None = None) -> None:
        if receive_buffer is None:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        else:  # a small window (set before connecting) makes the server's writes back up quickly
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, body: Any, channel: int = 0, payload: bytes = b"", sasl: bool = False) -> None:
        self.send(build_frame(channel, body, payload, FRAME_SASL if sasl else FRAME_AMQP))

    def read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"connection closed with {len(self.buf)} of {n} bytes read")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_frame(self) -> Frame:
        size = int.from_bytes(self.read(4), "big")
        [frame] = parse_output(size.to_bytes(4, "big") + self.read(size - 4))
        assert isinstance(frame, Frame)
        return frame

    def read_until_eof(self) -> bytes:
        """Everything the server still sends, up to its close of the socket (fails on timeout)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            chunk = self.sock.recv(65536)
            if not chunk:
                data, self.buf = self.buf, b""
                return data
            self.buf += chunk
        raise TimeoutError("the server did not close the connection")

    def frames_until_eof(self) -> list[Frame]:
        return [f for f in parse_output(self.read_until_eof()) if isinstance(f, Frame)]

    def sasl(self, mechanism: str = "ANONYMOUS", response: bytes | None = None) -> int:
        """Run the SASL exchange; returns the sasl-outcome code."""
        self.send(SASL_HEADER)
        assert self.read(8) == SASL_HEADER
        mechanisms = self.read_frame()
        assert isinstance(mechanisms.body, SaslMechanisms) and mechanisms.frame_type == FRAME_SASL
        self.frame(SaslInit(Symbol(mechanism), response), sasl=True)
        outcome = self.read_frame().body
        assert isinstance(outcome, SaslOutcome) and outcome.code is not None
        return int(outcome.code)

    def open(self, mechanism: str = "ANONYMOUS", response: bytes | None = None, **fields: Any) -> Open:
        assert self.sasl(mechanism, response) == 0
        self.send(AMQP_HEADER)
        assert self.read(8) == AMQP_HEADER
        fields.setdefault("container_id", "raw-client")
        self.frame(Open(**fields))
        reply = self.read_frame().body
        assert isinstance(reply, Open)
        return reply


def close_condition(frames: list[Frame]) -> str | None:
    """The error condition of the close frame among ``frames`` (fails when there is none)."""
    closes = [f.body for f in frames if isinstance(f.body, Close)]
    assert closes, f"no close frame in {frames}"
    return str(closes[0].error.condition) if closes[0].error is not None else None


# ------------------------------------------------------------------ SDK side
class Ledger:
    """Messages the emulator accepted during this module: all of them must stay in the queue."""

    def __init__(self, connection_string: str) -> None:
        self.connection_string = connection_string
        self.accepted: set[str] = set()

    def send(self, *bodies: str) -> None:
        with ServiceBusClient.from_connection_string(self.connection_string) as client:
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages([ServiceBusMessage(body) for body in bodies])
        self.accepted.update(bodies)

    def peek_bodies(self, client: ServiceBusClient, wanted: set[str], wait: float = 8.0) -> set[str]:
        seen: set[str] = set()
        with client.get_queue_receiver(QUEUE) as receiver:
            deadline = time.monotonic() + wait
            while not wanted <= seen and time.monotonic() < deadline:
                seen = {str(m) for m in receiver.peek_messages(max_message_count=1000, sequence_number=1)}
                if not wanted <= seen:
                    time.sleep(0.05)
        return seen

    def assert_still_works(self) -> None:
        """A new SDK client sends (in a thread, to overlap connection set-up) while another peeks."""
        marker = f"after-{uuid.uuid4()}"
        failures: list[BaseException] = []

        def sender() -> None:
            try:
                self.send(marker)
            except BaseException as exc:  # reported below, on the test's thread
                failures.append(exc)

        thread = threading.Thread(target=sender)
        thread.start()
        with ServiceBusClient.from_connection_string(self.connection_string) as client:
            seen = self.peek_bodies(client, self.accepted | {marker})
        thread.join(15)
        assert not thread.is_alive() and not failures, failures
        missing = self.accepted - seen
        assert not missing, f"accepted messages lost: {sorted(missing)}"


@pytest.fixture(scope="module")
def shared_emulator() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True) as emu:
        yield emu


@pytest.fixture(scope="module")
def ledger(shared_emulator: Emulator) -> Ledger:
    book = Ledger(shared_emulator.connection_string)
    book.send("before-1", "before-2", "before-3")  # accepted before any bad connection
    return book


@pytest.fixture
def raw(shared_emulator: Emulator, ledger: Ledger) -> Iterator[RawClient]:
    client = RawClient(shared_emulator.port)
    try:
        yield client
    finally:
        client.close()
    ledger.assert_still_works()


# ------------------------------------------------------------------ protocol headers
@pytest.mark.parametrize(
    "data",
    [
        bytes(range(0xF0, 0x100)),  # garbage instead of a protocol header
        b"AMQP\x09\x01\x00\x00",  # AMQP 1.0.0 with an unknown protocol id
    ],
    ids=["garbage", "protocol-id-9"],
)
def test_wrong_protocol_header_gets_our_header_then_the_socket_closes(raw: RawClient, data: bytes) -> None:
    """Spec 2.2: answer with the supported header, then close the socket. (An HTTP request or a TLS
    ClientHello on the AMQP port is served as HTTP or TLS by default: tests/integration/test_one_port.py.)"""
    raw.send(data)
    assert raw.read_until_eof() == SASL_HEADER


@pytest.mark.parametrize(
    "data",
    [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",  # a TLS ClientHello against the plain port
    ],
    ids=["http", "tls"],
)
def test_http_or_tls_on_an_amqp_only_port_gets_our_header_then_the_socket_closes(data: bytes) -> None:
    """With the AMQP port serving AMQP only (``--amqp-port-only``), spec 2.2 again: our header, then close."""
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, one_port=False) as emu:
        client = RawClient(emu.port)
        try:
            client.send(data)
            assert client.read_until_eof() == SASL_HEADER
        finally:
            client.close()


def test_truncated_protocol_header_then_socket_close(raw: RawClient) -> None:
    raw.send(b"AMQ")
    raw.close()


def test_truncated_frame_then_socket_close(raw: RawClient) -> None:
    raw.open()
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    raw.read_frame()
    frame = build_frame(0, Transfer(UInt(0), UInt(0), b"t", UInt(0)), payload=b"x" * 100)
    raw.send(frame[:50])
    raw.close()


def test_truncated_sasl_frame_then_socket_close(raw: RawClient) -> None:
    raw.send(SASL_HEADER)
    assert raw.read(8) == SASL_HEADER
    raw.send(build_frame(0, SaslInit(Symbol("ANONYMOUS")), frame_type=FRAME_SASL)[:10])
    raw.close()


# ------------------------------------------------------------------ frames
def test_oversized_frame_closes_with_framing_error(raw: RawClient) -> None:
    raw.open()
    raw.send(b"\xff\xff\xff\xf0\x02\x00\x00\x00" + b"\x00" * 64)
    assert close_condition(raw.frames_until_eof()) == "amqp:connection:framing-error"


def test_undecodable_frame_body_closes_with_decode_error(raw: RawClient) -> None:
    raw.open()
    raw.send(build_frame(0, payload=b"\x00\x53\x11\xd0\xff\xff\xff\xff\x00\x00\x00\x05"))
    assert close_condition(raw.frames_until_eof()) == "amqp:decode-error"


def test_unknown_performative_closes_with_an_error(raw: RawClient) -> None:
    raw.open()
    raw.send(build_frame(0, payload=b"\x00\xa3\x0bamqp:nope:x\x45"))
    assert close_condition(raw.frames_until_eof()) == "amqp:decode-error"


def test_frame_before_open_is_refused(raw: RawClient) -> None:
    assert raw.sasl() == 0
    raw.send(AMQP_HEADER)
    assert raw.read(8) == AMQP_HEADER
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    frames = raw.frames_until_eof()
    assert isinstance(frames[0].body, Open)  # spec 2.4.1: an open precedes the close
    assert close_condition(frames) is not None


def test_transfer_on_an_unattached_handle_ends_the_session_and_the_connection_keeps_working(
    raw: RawClient,
) -> None:
    """Spec 2.8.16 / 2.5.5: the session ends with unattached-handle; the connection stays usable."""
    raw.open()
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    assert isinstance(raw.read_frame().body, Begin)
    raw.frame(Transfer(UInt(5), UInt(0), b"t", UInt(0)), payload=b"\x00\x53\x77\x40")
    end = raw.read_frame().body
    assert isinstance(end, End) and end.error is not None
    assert str(end.error.condition) == "amqp:session:unattached-handle"
    raw.frame(Transfer(UInt(5), UInt(1), b"u", UInt(0)), payload=b"\x00\x53\x77\x40")  # discarded
    raw.frame(End())
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))  # the same channel, a new session
    begin = raw.read_frame().body
    assert isinstance(begin, Begin) and begin.remote_channel == 0
    raw.frame(Close())
    assert close_condition(raw.frames_until_eof()) is None


# ------------------------------------------------------------------ concurrency
BAD_INPUTS = [
    b"GET / HTTP/1.1\r\n\r\n",
    bytes(64),
    b"AMQP\x03\x01\x00\x00" + b"\x00\x00\x00\x10\x02\x01\x00\x00\x00\x53\x41\xc0\x03\x01\xa3\x00",
    b"AMQP\x03\x01\x00\x00\xff\xff\xff\xf0\x02\x01\x00\x00",
]


def test_bad_connections_in_parallel_with_a_working_sdk_client(shared_emulator: Emulator, ledger: Ledger) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []

    def attacker(index: int) -> None:
        count = 0
        while not stop.is_set() and count < 200:
            count += 1
            try:
                # the server answers garbage at once (milliseconds); the longer bound only keeps a loaded
                # machine's scheduling (4 attackers and the SDK share one process) from passing for silence
                with RawClient(shared_emulator.port, timeout=4 * TIMEOUT) as client:
                    client.send(BAD_INPUTS[(index + count) % len(BAD_INPUTS)])
                    if count % 3:
                        client.read_until_eof()
            except TimeoutError as exc:  # the server stopped answering: that is a failure
                errors.append(exc)
            except OSError:
                pass  # a reset after the server closed is an acceptable answer to garbage

    threads = [threading.Thread(target=attacker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    try:
        bodies = [f"parallel-{i}" for i in range(20)]
        with ServiceBusClient.from_connection_string(ledger.connection_string) as client:
            with client.get_queue_sender(QUEUE) as sender:
                for body in bodies:
                    sender.send_messages(ServiceBusMessage(body))
            ledger.accepted.update(bodies)
            seen = ledger.peek_bodies(client, ledger.accepted)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert not errors, errors
    assert ledger.accepted <= seen


def test_silent_client_is_closed_with_resource_limit_exceeded_after_the_idle_timeout() -> None:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, idle_timeout_ms=800) as emu:
        with RawClient(emu.port) as raw:
            opened = time.monotonic()
            reply = raw.open()
            assert reply.idle_time_out == 800
            # Not before the idle timeout: measured from before our open was sent, which is before
            # the server could start its timer (a late-running test thread only adds to the figure).
            assert close_condition(raw.frames_until_eof()) == "amqp:resource-limit-exceeded"
            assert time.monotonic() - opened >= 0.7


def test_heartbeats_at_half_the_peers_idle_time_out_over_a_socket() -> None:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, idle_timeout_ms=4000) as emu:
        with RawClient(emu.port) as raw:
            raw.open(idle_time_out=UInt(400))
            # the first heartbeat is due 0.2 s after our open; the socket's bound (TIMEOUT) only ends a wait for none
            heartbeat = raw.read_frame()
            assert heartbeat.body is None and heartbeat.size == 8


def test_zz_every_accepted_message_can_be_received_and_completed(ledger: Ledger) -> None:
    """Last: drain the queue; exactly the accepted messages come out, each once."""
    received: list[str] = []
    with ServiceBusClient.from_connection_string(ledger.connection_string) as client:
        with client.get_queue_receiver(QUEUE) as receiver:
            deadline = time.monotonic() + 60
            while len(received) < len(ledger.accepted) and time.monotonic() < deadline:
                for message in receiver.receive_messages(max_message_count=100, max_wait_time=1):
                    received.append(str(message))
                    receiver.complete_message(message)
    assert sorted(received) == sorted(ledger.accepted)
