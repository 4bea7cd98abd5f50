"""Flow-control and frame-size rules of AMQP 1.0 part 2, enforced by a running emulator.

A raw socket client writes hand-built frames that break one rule each: transfers beyond the link
credit the emulator granted (spec 2.6.7, `amqp:link:transfer-limit-exceeded`), transfer frames beyond
the session's incoming window (spec 2.5.6, `amqp:session:window-violation`) and frames above 512
bytes before the open exchange (spec 2.4.1 and 2.7.1, MIN-MAX-FRAME-SIZE,
`amqp:connection:framing-error`). Each test also checks what must not happen: the messages accepted
before the violation stay in the queue, nothing beyond it is stored, and only the offending link,
session or connection is closed.

Each burst is written with one ``sendall`` and is twice the limit plus one: the emulator widens a
window only after it has handled a whole read, so however the kernel splits such a burst in two, the
frames beyond the limit still arrive before the peer could have seen a wider one.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusReceiveMode

from sbemulator import Emulator
from sbemulator.amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Open,
    Properties,
    SaslInit,
    SaslMechanisms,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import Symbol, UInt
from tests.fixtures.emulator import STANDARD_TOPOLOGY

from .test_malformed_input import RawClient, close_condition

QUEUE = "orders"
MIN_MAX_FRAME_SIZE = 512


@pytest.fixture(scope="module")
def shared_emulator() -> Iterator[Emulator]:
    """One emulator for the module; each test uses its own queue contents through fresh ids."""
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None) as emu:
        yield emu


def _plain(emu: Emulator) -> bytes:
    return b"\x00" + emu.key_name.encode() + b"\x00" + emu.key.encode()


def _session_and_sender(raw: RawClient, handle: int = 0, channel: int = 0) -> tuple[Begin, Flow]:
    """Begin a session and attach a link sending to the queue; returns our begin and the credit flow."""
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)), channel=channel)
    begin = raw.read_frame().body
    assert isinstance(begin, Begin)
    raw.frame(Attach(f"strict-sender-{handle}", UInt(handle), ROLE_SENDER, None, None, Source("raw"),
                     Target(QUEUE), initial_delivery_count=UInt(0)), channel=channel)
    attach = raw.read_frame().body
    assert isinstance(attach, Attach) and attach.role is ROLE_RECEIVER
    flow = raw.read_frame().body
    assert isinstance(flow, Flow) and (flow.link_credit or 0) > 0
    return begin, flow


def _frames_until(raw: RawClient, kind: type | tuple[type, ...], timeout: float = 5.0) -> list:
    """Frame bodies the server sends up to and including the first ``kind``."""
    bodies = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = raw.read_frame().body
        bodies.append(body)
        if isinstance(body, kind):
            return bodies
    raise TimeoutError(f"no {kind!r} within {timeout} s; got {[type(b).__name__ for b in bodies]}")


def _drain_ids(emu: Emulator, prefix: str, expected: int) -> list[str]:
    """Receive-and-delete the queue's messages whose id starts with ``prefix``."""
    ids: list[str] = []
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                       prefetch_count=200) as receiver:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                batch = receiver.receive_messages(max_message_count=200, max_wait_time=1 if len(ids) >= expected
                                                  else 3)
                if not batch and len(ids) >= expected:
                    break
                ids += [str(m.message_id) for m in batch if str(m.message_id).startswith(prefix)]
    return ids


# ------------------------------------------------------------------ link credit
def test_transfers_beyond_the_granted_link_credit_detach_the_link_with_transfer_limit_exceeded(
    shared_emulator: Emulator,
) -> None:
    """Spec 2.6.7: a sender with no link-credit left must not send; the emulator detaches the link."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("PLAIN", _plain(shared_emulator))
        _, flow = _session_and_sender(raw)
        credit = int(flow.link_credit or 0)
        count = 2 * credit + 1
        raw.send(b"".join(
            build_frame(0, Transfer(UInt(0), UInt(i), i.to_bytes(4, "big"), UInt(0), False),
                        payload=encode_message(properties=Properties(message_id=f"credit-{i}"), data=b"x"))
            for i in range(count)
        ))
        bodies = _frames_until(raw, Detach)
        detach = bodies[-1]
        assert str(detach.error.condition) == "amqp:link:transfer-limit-exceeded"
        dispositions = [b for b in bodies if isinstance(b, Disposition)]
        assert all(d.settled and isinstance(d.state, Accepted) for d in dispositions)
        accepted = {f"credit-{i}" for d in dispositions if d.first is not None
                    for i in range(d.first, (d.last or d.first) + 1)}
        assert credit <= len(accepted) < count
        # Only the link is gone: the session still answers (a second link attaches and gets credit).
        raw.frame(Attach("after-violation", UInt(1), ROLE_SENDER, None, None, Source("raw"), Target(QUEUE),
                         initial_delivery_count=UInt(0)))
        later = _frames_until(raw, Flow)
        assert any(isinstance(b, Attach) for b in later)
    # Every accepted message is stored, and none of those sent beyond the credit.
    assert sorted(_drain_ids(shared_emulator, "credit-", len(accepted))) == sorted(accepted)


# ------------------------------------------------------------------ session window
def test_transfer_frames_beyond_the_incoming_window_end_the_session_with_window_violation(
    shared_emulator: Emulator,
) -> None:
    """Spec 2.5.6: every transfer frame, also the frames of one multi-frame delivery, uses the window."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("PLAIN", _plain(shared_emulator))
        begin, _ = _session_and_sender(raw)
        window = int(begin.incoming_window or 0)
        assert 0 < window < 10_000  # small enough that a burst of twice the window is one write
        # One delivery (one credit) in 2 * window + 1 frames: only the session window is exceeded.
        first = build_frame(0, Transfer(UInt(0), UInt(0), b"big", UInt(0), False, True),
                            payload=encode_message(properties=Properties(message_id="window-big"), data=b""))
        more = build_frame(0, Transfer(UInt(0), more=True))
        raw.send(first + more * (2 * window))
        bodies = _frames_until(raw, End)
        assert str(bodies[-1].error.condition) == "amqp:session:window-violation"
        # The connection survives: end our side, begin again on the same channel and send normally.
        raw.frame(End())
        _session_and_sender(raw)
        raw.frame(Transfer(UInt(0), UInt(0), b"ok", UInt(0), False),
                  payload=encode_message(properties=Properties(message_id="window-after"), data=b"x"))
        disposition = _frames_until(raw, Disposition)[-1]
        assert isinstance(disposition.state, Accepted)
    assert _drain_ids(shared_emulator, "window-", 1) == ["window-after"]  # nothing of the broken delivery


# ------------------------------------------------------------------ frames before open
def _open_frame_of(size: int) -> bytes:
    frames = (build_frame(0, Open("c" * n)) for n in range(size))
    return next(frame for frame in frames if len(frame) == size)


def test_an_open_frame_above_512_bytes_is_refused_with_framing_error(shared_emulator: Emulator) -> None:
    """Spec 2.4.1: until the open frames are exchanged the maximum frame size is MIN-MAX-FRAME-SIZE."""
    with RawClient(shared_emulator.port) as raw:
        assert raw.sasl() == 0
        raw.send(AMQP_HEADER)
        assert raw.read(8) == AMQP_HEADER
        raw.send(_open_frame_of(MIN_MAX_FRAME_SIZE + 1))
        frames = raw.frames_until_eof()
        assert isinstance(frames[0].body, Open)  # spec 2.4.1: an open precedes the close
        assert close_condition(frames) == "amqp:connection:framing-error"


def test_an_open_frame_of_exactly_512_bytes_is_accepted(shared_emulator: Emulator) -> None:
    with RawClient(shared_emulator.port) as raw:
        assert raw.sasl() == 0
        raw.send(AMQP_HEADER)
        assert raw.read(8) == AMQP_HEADER
        raw.send(_open_frame_of(MIN_MAX_FRAME_SIZE))
        assert isinstance(raw.read_frame().body, Open)
        raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
        assert isinstance(raw.read_frame().body, Begin)
        raw.frame(Close())
        assert close_condition(raw.frames_until_eof()) is None


def test_a_sasl_frame_above_512_bytes_closes_the_socket_without_an_outcome(shared_emulator: Emulator) -> None:
    with RawClient(shared_emulator.port) as raw:
        raw.send(SASL_HEADER)
        assert raw.read(8) == SASL_HEADER
        assert isinstance(raw.read_frame().body, SaslMechanisms)
        response = b"\x00" + shared_emulator.key_name.encode() + b"\x00" + b"k" * 600
        frame = build_frame(0, SaslInit(Symbol("PLAIN"), response), frame_type=FRAME_SASL)
        assert len(frame) > MIN_MAX_FRAME_SIZE
        raw.send(frame)
        assert raw.read_until_eof() == b""
