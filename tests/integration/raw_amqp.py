"""A raw-socket AMQP client for sending the emulator what no SDK would (malformed input, SASL PLAIN).

Every socket operation has a timeout, so a server that hangs fails the test instead of blocking it.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator.amqp.framing import AMQP_HEADER, FRAME_AMQP, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import Open, SaslInit, SaslOutcome
from sbemulator.amqp.types import Symbol
from tests.unit.test_amqp_connection_peer import Frame, parse_output

TIMEOUT = 3.0
QUEUE = "orders"


class RawClient:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.settimeout(TIMEOUT)
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

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"connection closed with {len(self.buf)} of {n} bytes read")
            self.buf += chunk

    def read(self, n: int) -> bytes:
        self._fill(n)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_frame(self) -> Frame:
        self._fill(4)
        size = int.from_bytes(self.buf[:4], "big")
        [frame] = parse_output(self.read(size))
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
        """Run the SASL exchange; returns the outcome code."""
        self.send(SASL_HEADER)
        assert self.read(8) == SASL_HEADER
        self.read_frame()  # sasl-mechanisms
        self.frame(SaslInit(Symbol(mechanism), response), sasl=True)
        outcome = self.read_frame().body
        assert isinstance(outcome, SaslOutcome)
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
    closes = [f.body for f in frames if type(f.body).__name__ == "Close"]
    assert closes, f"no close frame in {frames}"
    error = closes[0].error
    return str(error.condition) if error is not None else None


def send_messages(connection_string: str, bodies: list[str]) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages([ServiceBusMessage(body) for body in bodies])


def receive_all(connection_string: str, expected: int, wait: float = 5.0) -> list[str]:
    """Receive and complete up to ``expected`` messages; then check the queue holds nothing more."""
    bodies: list[str] = []
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_receiver(QUEUE) as receiver:
            deadline = time.monotonic() + wait
            while len(bodies) < expected and time.monotonic() < deadline:
                for message in receiver.receive_messages(max_message_count=expected - len(bodies),
                                                         max_wait_time=1):
                    bodies.append(str(message))
                    receiver.complete_message(message)
            extra = receiver.receive_messages(max_message_count=1, max_wait_time=0.3)
            bodies += [str(m) for m in extra]
    return bodies
