"""The sans-I/O connection state machine, driven with crafted client bytes (no sockets).

Each test plays a client conversation and checks both the events the gateway would see and the
frames the server writes back, decoded, against AMQP 1.0 part 2 (transport) and part 5 (SASL).
"""

from __future__ import annotations

from typing import Any

import pytest

from sbemulator.amqp import events as ev
from sbemulator.amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, build_frame
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
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
)
from sbemulator.amqp.types import Symbol, UInt
from sbemulator.scheduling import DEFAULT_SLICES, Slices

from .test_amqp_connection_peer import Frame, Peer


def only(frames: list[Frame], kind: type) -> Frame:
    matching = [f for f in frames if isinstance(f.body, kind)]
    assert len(matching) == 1, frames
    return matching[0]


def error_condition(frames: list[Frame], kind: type) -> str:
    body = only(frames, kind).body
    assert body.error is not None, body
    return str(body.error.condition)


# ------------------------------------------------------------------ headers and SASL
def test_sasl_anonymous_handshake_then_open() -> None:
    peer = Peer()
    peer.send(SASL_HEADER)
    out = peer.output()
    assert out[0] == SASL_HEADER
    mechanisms = out[1]
    assert isinstance(mechanisms, Frame)
    assert mechanisms.frame_type == FRAME_SASL and isinstance(mechanisms.body, SaslMechanisms)
    # Service Bus's list and order, as client traces against the service show it
    assert list(mechanisms.body.sasl_server_mechanisms) == ["MSSBCBS", "PLAIN", "ANONYMOUS", "EXTERNAL"]

    peer.frame(SaslInit(Symbol("ANONYMOUS"), b""), sasl=True)
    [outcome] = peer.output()
    assert isinstance(outcome, Frame) and isinstance(outcome.body, SaslOutcome)
    assert outcome.body.code == 0

    peer.send(AMQP_HEADER)
    assert peer.output() == [AMQP_HEADER]
    events = peer.frame(Open("client-1", "localhost", UInt(65536), properties={Symbol("product"): "t"}))
    assert events == [ev.ConnectionOpened("client-1", "localhost", {Symbol("product"): "t"})]
    reply = only(peer.frames(), Open).body
    assert reply.container_id == "sbemulator"
    assert reply.max_frame_size == 1024 * 1024
    assert reply.idle_time_out == 240_000
    assert peer.conn.remote_max_frame_size == 65536


def test_sasl_plain_with_the_right_password_authenticates() -> None:
    seen: list[tuple[str, str]] = []

    def authenticate(user: str, password: str) -> bool:
        seen.append((user, password))
        return password == "secret"

    peer = Peer(authenticate_plain=authenticate)
    peer.send(SASL_HEADER)
    peer.output()
    events = peer.frame(SaslInit(Symbol("PLAIN"), b"\x00alice\x00secret"), sasl=True)
    assert seen == [("alice", "secret")]
    assert events == [ev.SaslPlainAuthenticated("alice")]
    assert peer.frames()[0].body.code == 0
    assert peer.conn.sasl_username == "alice"
    peer.send(AMQP_HEADER)
    assert peer.output() == [AMQP_HEADER]


@pytest.mark.parametrize("mechanism", ["MSSBCBS", "EXTERNAL"])
def test_token_mechanisms_succeed_without_naming_anybody(mechanism: str) -> None:
    """The .NET SDK's only SASL handler is an anonymous one named MSSBCBS (Azure.Messaging.ServiceBus
    AmqpConnectionScope.CbsSaslHandlerName; Microsoft.Azure.Amqp SaslAnonymousHandler sends its name as
    the mechanism, no initial response): the outcome is ok and the connection is authorized later by CBS."""
    peer = Peer(authenticate_plain=lambda user, password: False)
    peer.send(SASL_HEADER)
    peer.output()
    events = peer.frame(SaslInit(Symbol(mechanism)), sasl=True)
    assert events == []
    [outcome] = peer.frames()
    assert outcome.body.code == 0
    assert peer.conn.sasl_username is None  # no key was shown: every entity still needs a token
    peer.send(AMQP_HEADER)
    assert peer.output() == [AMQP_HEADER]


@pytest.mark.parametrize(
    ("mechanism", "response"),
    [("PLAIN", b"\x00alice\x00wrong"), ("PLAIN", b"no-separators"), ("CRAM-MD5", b"x")],
)
def test_sasl_failure_sends_outcome_auth_and_closes(mechanism: str, response: bytes) -> None:
    peer = Peer(authenticate_plain=lambda user, password: password == "secret")
    peer.send(SASL_HEADER)
    peer.output()
    events = peer.frame(SaslInit(Symbol(mechanism), response), sasl=True)
    frames = peer.frames()
    assert len(frames) == 1 and frames[0].body.code == 1  # sasl-code auth
    assert peer.conn.wants_close
    assert [type(e) for e in events] == [ev.ConnectionClosed]
    assert events[0].error.condition == "amqp:unauthorized-access"
    # Nothing after a failed SASL exchange gets an answer.
    assert peer.send(AMQP_HEADER) == [] and peer.output() == []


def test_plain_amqp_header_when_sasl_is_required_gets_the_sasl_header_and_a_close() -> None:
    peer = Peer()
    events = peer.send(AMQP_HEADER)
    assert peer.output() == [SASL_HEADER]
    assert peer.conn.wants_close
    assert [type(e) for e in events] == [ev.ConnectionClosed]


def test_amqp_header_without_sasl_when_allowed() -> None:
    peer = Peer(require_sasl=False)
    peer.send(AMQP_HEADER)
    assert peer.output() == [AMQP_HEADER]
    peer.frame(Open("c"))
    assert isinstance(peer.frames()[0].body, Open)


@pytest.mark.parametrize(
    "header",
    [b"AMQP\x00\x01\x00\x01", b"AMQP\x09\x01\x00\x00", b"GET / HTTP/1.1\r\n", b"\x16\x03\x01\x02\x00\x01\x00\x01"],
)
def test_unsupported_protocol_header_is_answered_with_ours_then_closed(header: bytes) -> None:
    peer = Peer()
    peer.send(header)
    assert peer.output() == [SASL_HEADER]  # spec 2.2: reply with the supported header, then close
    assert peer.conn.wants_close


def test_header_split_across_reads_is_reassembled() -> None:
    peer = Peer()
    for byte in SASL_HEADER:
        peer.send(bytes([byte]))
    assert peer.output()[0] == SASL_HEADER


# ------------------------------------------------------------------ open / max-frame-size
def test_open_below_512_is_refused_with_frame_size_too_small() -> None:
    peer = Peer()
    peer.sasl_anonymous()
    events = peer.frame(Open("c", None, UInt(511)))
    frames = peer.frames()
    assert isinstance(frames[0].body, Open)  # spec 2.4.1: our open goes out before the close
    assert error_condition(frames, Close) == "amqp:frame-size-too-small"
    assert peer.conn.wants_close
    assert [type(e) for e in events] == [ev.ConnectionClosed]


def _open_padded_to(size: int) -> bytes:
    """An open frame of exactly ``size`` bytes (the container-id absorbs the padding)."""
    frames = (build_frame(0, Open("c" * n)) for n in range(size))
    return next(frame for frame in frames if len(frame) == size)


def test_open_of_exactly_512_bytes_is_accepted() -> None:
    peer = Peer()
    peer.sasl_anonymous()
    events = peer.send(_open_padded_to(512))
    assert [type(e) for e in events] == [ev.ConnectionOpened]


def test_open_above_512_bytes_before_negotiation_closes_with_framing_error() -> None:
    """Spec 2.4.1: until the open frames are exchanged the maximum frame size is 512 (MIN-MAX-FRAME-SIZE)."""
    peer = Peer()
    peer.sasl_anonymous()
    peer.send(_open_padded_to(513))
    frames = peer.frames()
    assert isinstance(frames[0].body, Open)  # spec 2.4.1: our open goes out before the close
    assert error_condition(frames, Close) == "amqp:connection:framing-error"
    assert peer.conn.wants_close


def test_sasl_frame_above_512_bytes_closes_the_connection() -> None:
    peer = Peer()
    peer.send(SASL_HEADER)
    peer.output()
    peer.frame(SaslInit(Symbol("PLAIN"), b"\x00user\x00" + b"p" * 600), sasl=True)
    assert peer.conn.wants_close
    assert peer.output() == []  # no SASL outcome: the frame was refused before it was read


def test_frame_after_open_may_use_the_negotiated_size() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True, name="n" * 600)
    assert link.name == "n" * 600 and not peer.conn.wants_close


def test_frame_above_our_max_frame_size_closes_with_framing_error() -> None:
    peer = Peer(max_frame_size=1024)
    peer.open()
    peer.begin()
    # Only the header matters: the size field is checked before the body arrives.
    peer.send((2000).to_bytes(4, "big") + b"\x02\x00\x00\x00")
    assert error_condition(peer.frames(), Close) == "amqp:connection:framing-error"
    assert peer.conn.wants_close


@pytest.mark.parametrize(
    "header",
    [b"\x00\x00\x00\x07\x02\x00\x00\x00",  # size smaller than the frame header
     b"\x00\x00\x00\x08\x01\x00\x00\x00",  # doff below 2
     b"\x00\x00\x00\x0c\x04\x00\x00\x00"],  # doff points past the frame
)
def test_invalid_frame_header_closes_with_framing_error(header: bytes) -> None:
    peer = Peer()
    peer.open()
    peer.send(header + b"\x00" * 8)
    assert error_condition(peer.frames(), Close) == "amqp:connection:framing-error"


def test_undecodable_body_closes_with_decode_error() -> None:
    peer = Peer()
    peer.open()
    peer.send(build_frame(0, payload=b"\x00\x53\x11\xc0\xff\x05"))  # begin whose list runs past the frame
    assert error_condition(peer.frames(), Close) == "amqp:decode-error"


def test_unknown_performative_closes_the_connection_with_an_error() -> None:
    peer = Peer()
    peer.open()
    peer.send(build_frame(0, payload=b"\x00\x53\x30\x45"))  # descriptor 0x30 is not a performative
    assert error_condition(peer.frames(), Close) == "amqp:decode-error"


def test_second_open_is_not_allowed() -> None:
    peer = Peer()
    peer.open()
    peer.frame(Open("again"))
    assert error_condition(peer.frames(), Close) == "amqp:not-allowed"


def test_heartbeat_frames_are_accepted_silently() -> None:
    peer = Peer()
    peer.open()
    assert peer.send(build_frame(0)) == [] and peer.output() == []
    assert not peer.conn.wants_close


# ------------------------------------------------------------------ idle timeout and heartbeats
def test_idle_timeout_closes_with_resource_limit_exceeded() -> None:
    peer = Peer(idle_timeout_ms=1000)
    peer.open()
    assert peer.conn.next_timer() == pytest.approx(peer.clock.now + 1.0)
    peer.clock.now += 0.9
    assert peer.conn.handle_timer() == [] and peer.output() == []
    peer.send(build_frame(0))  # any input, even a heartbeat, resets the idle clock
    peer.clock.now += 0.9
    assert peer.conn.handle_timer() == []
    peer.clock.now += 0.2
    events = peer.conn.handle_timer()
    assert [type(e) for e in events] == [ev.ConnectionClosed]
    assert error_condition(peer.frames(), Close) == "amqp:resource-limit-exceeded"
    assert peer.conn.wants_close


def test_heartbeat_sent_at_half_the_peers_idle_timeout() -> None:
    peer = Peer(idle_timeout_ms=None)
    peer.open(idle_time_out=UInt(2000))
    assert peer.conn.next_timer() == pytest.approx(peer.clock.now + 1.0)
    peer.clock.now += 0.5
    peer.conn.handle_timer()
    assert peer.output() == []
    peer.clock.now += 0.5
    peer.conn.handle_timer()
    raw = peer.conn.data_to_send()
    assert raw == b"\x00\x00\x00\x08\x02\x00\x00\x00"  # an empty frame
    assert peer.conn.next_timer() == pytest.approx(peer.clock.now + 1.0)
    assert not peer.conn.wants_close


def test_no_heartbeats_when_the_peer_announced_no_idle_timeout() -> None:
    peer = Peer(idle_timeout_ms=None)
    peer.open()
    assert peer.conn.next_timer() is None
    peer.clock.now += 3600
    assert peer.conn.handle_timer() == [] and peer.output() == []


# ------------------------------------------------------------------ sessions and links
def test_begin_attach_flow_and_a_single_frame_transfer() -> None:
    peer = Peer()
    peer.open()
    events = peer.frame(Begin(None, UInt(0), UInt(100), UInt(100)), channel=3)
    session = events[0].session
    begin = only(peer.frames(), Begin)
    assert begin.body.remote_channel == 3 and begin.channel == session.channel

    link = peer.attach(handle=7, client_sends=True, channel=3)
    assert not link.is_sender and link.address == "orders"
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 10)
    frames = peer.frames()
    attach = only(frames, Attach).body
    assert attach.role is ROLE_RECEIVER and attach.name == "link-7"
    assert attach.source.address == "client-7" and attach.target.address == "orders"
    flow = only(frames, Flow).body
    assert flow.handle == link.handle and flow.link_credit == 10 and flow.delivery_count == 0

    events = peer.frame(
        Transfer(UInt(7), UInt(0), b"tag-0", UInt(0), False), channel=3, payload=b"\x00\x53\x77\xa1\x02hi"
    )
    assert events == [ev.MessageReceived(link, 0, b"tag-0", 0, False, b"\x00\x53\x77\xa1\x02hi")]
    assert link.link_credit == 9 and link.delivery_count == 1

    peer.conn.settle_incoming(link, 0, Accepted())
    disposition = only(peer.frames(), Disposition).body
    assert disposition.role is ROLE_RECEIVER and disposition.first == 0 and disposition.settled is True
    assert isinstance(disposition.state, Accepted)


def test_multi_frame_transfer_is_reassembled() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 5)
    peer.output()
    chunks = [b"a" * 300, b"b" * 300, b"c" * 7]
    assert peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0x80013700), False, True), payload=chunks[0]) == []
    # continuation frames may omit delivery-id and tag (spec 2.7.5)
    assert peer.frame(Transfer(UInt(0), more=True), payload=chunks[1]) == []
    events = peer.frame(Transfer(UInt(0), more=False), payload=chunks[2])
    assert len(events) == 1
    received = events[0]
    assert received.payload == b"".join(chunks)
    assert received.message_format == 0x80013700 and received.delivery_tag == b"t"
    assert link.link_credit == 4  # one delivery, not three


def test_aborted_multi_frame_transfer_is_dropped() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 2)
    peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), payload=b"x" * 10)
    assert peer.frame(Transfer(UInt(0), more=False, aborted=True)) == []
    events = peer.frame(Transfer(UInt(0), UInt(1), b"u", UInt(0)), payload=b"y")
    assert [e.payload for e in events] == [b"y"]


def test_delivery_above_max_message_size_is_rejected_while_it_streams_and_the_link_stays() -> None:
    """The delivery is settled as rejected with amqp:link:message-size-exceeded (what the SDKs map to
    MessageSizeExceededError) once it grows past the limit; the rest of it is dropped unbuffered."""
    peer = Peer(max_message_size=100)
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 2)
    peer.output()
    peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), payload=b"x" * 80)
    peer.frame(Transfer(UInt(0), more=True), payload=b"x" * 80)
    [disposition] = peer.frames()
    assert disposition.body.settled and disposition.body.first == 0
    assert str(disposition.body.state.error.condition) == "amqp:link:message-size-exceeded"
    assert link.incoming is not None and link.incoming.chunks == []
    # The rest of the delivery was already in flight: dropped, and the link takes the next one.
    assert peer.frame(Transfer(UInt(0), more=False), payload=b"x" * 80) == []
    assert not peer.conn.wants_close and peer.frames() == []
    events = peer.frame(Transfer(UInt(0), UInt(1), b"u", UInt(0)), payload=b"y")
    assert [e.payload for e in events] == [b"y"]


def test_the_link_max_message_size_announced_in_the_attach_is_the_one_enforced() -> None:
    peer = Peer()  # the connection's own bound is 64 MiB
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link, max_message_size=50)
    peer.conn.grant_credit(link, 1)
    assert int(only(peer.frames(), Attach).body.max_message_size) == 50
    peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), payload=b"x" * 53)  # 50 + 50 // 16: not yet
    assert peer.frames() == []
    peer.frame(Transfer(UInt(0), more=True), payload=b"x")
    assert str(only(peer.frames(), Disposition).body.state.error.condition) == "amqp:link:message-size-exceeded"


def _receiving_link(peer: Peer, credit: int):
    """A link on which the peer sends to us, accepted, with ``credit`` granted and the output read."""
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, credit)
    peer.output()
    return link


def test_transfer_beyond_link_credit_detaches_the_link_with_transfer_limit_exceeded() -> None:
    peer = Peer()
    link = _receiving_link(peer, credit=2)
    data = b"".join(build_frame(0, Transfer(UInt(0), UInt(i), bytes([i]), UInt(0)), payload=b"m") for i in range(3))
    events = peer.send(data)
    assert [e.delivery_id for e in events if isinstance(e, ev.MessageReceived)] == [0, 1]
    assert error_condition(peer.frames(), Detach) == "amqp:link:transfer-limit-exceeded"
    assert link.detach_sent and not peer.conn.wants_close
    # Later transfers on the detached link were in flight: dropped, the session stays up.
    assert peer.frame(Transfer(UInt(0), UInt(3), b"x", UInt(0)), payload=b"m") == []
    assert peer.frames() == []


def test_transfer_before_any_credit_is_refused() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.output()
    assert peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0)), payload=b"m") == []
    assert error_condition(peer.frames(), Detach) == "amqp:link:transfer-limit-exceeded"


def test_credit_granted_after_a_read_counts_for_the_next_read() -> None:
    peer = Peer()
    link = _receiving_link(peer, credit=1)
    assert len(peer.frame(Transfer(UInt(0), UInt(0), b"a", UInt(0)), payload=b"m")) == 1
    peer.conn.grant_credit(link, 1)
    assert len(peer.frame(Transfer(UInt(0), UInt(1), b"b", UInt(0)), payload=b"m")) == 1
    assert not link.detach_sent


def test_transfer_frames_beyond_the_session_window_end_the_session_with_window_violation() -> None:
    """Spec 2.5.6: frames of one delivery count one each against the incoming window, credit only once."""
    peer = Peer(incoming_window=8)
    peer.open()
    peer.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    assert only(peer.frames(), Begin).body.incoming_window == 8
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 100)
    peer.output()
    first = build_frame(0, Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), payload=b"x")
    more = build_frame(0, Transfer(UInt(0), more=True), payload=b"x")
    peer.send(first + more * 8)  # nine frames in one read, the window is eight
    frames = peer.frames()
    assert error_condition(frames, End) == "amqp:session:window-violation"
    assert not peer.conn.wants_close  # a session error: the connection stays open


def test_session_window_is_widened_after_a_read_that_used_half_of_it() -> None:
    peer = Peer(incoming_window=8)
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 100)
    peer.output()
    frame = build_frame(0, Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), payload=b"x")
    more = build_frame(0, Transfer(UInt(0), more=True), payload=b"x")
    peer.send(frame + more * 3)  # 4 of 8 frames used: the window opens again
    flow = only(peer.frames(), Flow).body
    assert flow.handle is None and flow.next_incoming_id == 4 and flow.incoming_window == 8
    for _ in range(3):  # 24 frames in all, in reads of at most the window, never a violation
        peer.send(more * 6)
        assert only(peer.frames(), Flow).body.incoming_window == 8
    events = peer.frame(Transfer(UInt(0), more=False), payload=b"x")
    assert [len(e.payload) for e in events] == [23]


def _sending_link(peer: Peer, incoming_window: int = 5000):
    peer.open()
    peer.begin(incoming_window=incoming_window)
    link = peer.attach(handle=1, client_sends=False, rcv_settle_mode=1)
    assert link.is_sender and link.address == "orders"
    peer.conn.accept_attach(link)
    attach = only(peer.frames(), Attach).body
    assert attach.role is ROLE_SENDER
    assert attach.initial_delivery_count == 0  # required on a sender's attach
    assert attach.source is not None and attach.target is not None
    return link


def test_credit_then_transfer_then_disposition_round_trip() -> None:
    peer = Peer()
    link = _sending_link(peer)
    assert not peer.conn.can_send(link)
    events = peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(2)))
    assert events == [ev.LinkCreditChanged(link, False)]
    assert peer.conn.can_send(link) and link.link_credit == 2

    delivery_id = peer.conn.send_transfer(link, b"\x01" * 16, b"payload", settled=False, context="ctx")
    transfer = only(peer.frames(), Transfer)
    assert transfer.body.handle == link.handle and transfer.body.delivery_id == delivery_id
    assert transfer.body.delivery_tag == b"\x01" * 16 and transfer.payload == b"payload"
    assert link.link_credit == 1 and link.delivery_count == 1

    events = peer.frame(Disposition(ROLE_RECEIVER, UInt(delivery_id), None, False, Accepted()))
    assert events == [ev.DeliveryStateChanged(link, delivery_id, Accepted(), False, "ctx")]
    peer.conn.settle_outgoing(link, delivery_id, Accepted())
    echo = only(peer.frames(), Disposition).body
    assert echo.role is ROLE_SENDER and echo.settled is True and isinstance(echo.state, Accepted)
    assert link.unsettled == {}


def _small_frame_peer_with_credit() -> tuple[Peer, Any]:
    """A peer that announced a 512-byte max-frame-size, with a receiving link and 10 credits."""
    peer = Peer()
    peer.open(max_frame_size=UInt(512))
    peer.begin()
    link = peer.attach(handle=1, client_sends=False)
    peer.conn.accept_attach(link)
    peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(10)))
    peer.output()
    return peer, link


def test_outgoing_transfer_is_split_for_a_peer_with_a_512_byte_max_frame_size() -> None:
    peer, link = _small_frame_peer_with_credit()
    payload = bytes(range(256)) * 8  # 2048 bytes
    peer.conn.send_transfer(link, b"\x02" * 16, payload, settled=True)
    frames = peer.frames()
    assert len(frames) >= 5
    assert all(f.size <= 512 for f in frames)
    assert [bool(f.body.more) for f in frames] == [True] * (len(frames) - 1) + [False]
    assert {f.body.delivery_id for f in frames} == {0}
    assert b"".join(f.payload for f in frames) == payload
    assert link.link_credit == 9  # still one delivery


@pytest.mark.parametrize("size", [0, 1, 400, 470, 471, 480, 495, 496, 1000])
def test_every_split_frame_respects_the_peer_max_frame_size(size: int) -> None:
    peer, link = _small_frame_peer_with_credit()
    payload = b"z" * size
    peer.conn.send_transfer(link, b"\x03" * 16, payload, settled=False)
    frames = peer.frames()
    assert all(f.size <= 512 for f in frames)
    assert b"".join(f.payload for f in frames) == payload


@pytest.mark.parametrize("settled", [False, True])
def test_a_batch_of_transfers_is_what_one_transfer_after_another_gives(settled: bool) -> None:
    # send_transfers (the broker's batches) carries the session's ids and window, the link's credit and the
    # unsettled deliveries from one delivery to the next, across one split over several frames too: a
    # batch must leave what one delivery after another leaves.
    deliveries = [(bytes([i]) * 16, bytes([65 + i]) * size, f"ctx{i}") for i, size in enumerate([5, 700, 0, 470])]
    one_by_one, link_a = _small_frame_peer_with_credit()
    for tag, payload, context in deliveries:
        one_by_one.conn.send_transfer(link_a, tag, payload, settled=settled, context=context)
    batched, link_b = _small_frame_peer_with_credit()
    batched.conn.send_transfers(link_b, deliveries, settled=settled)

    assert batched.conn.data_to_send() == one_by_one.conn.data_to_send()
    for attribute in ("link_credit", "delivery_count", "unsettled"):
        assert getattr(link_b, attribute) == getattr(link_a, attribute)
    for attribute in ("next_outgoing_id", "remote_incoming_window"):
        assert getattr(link_b.session, attribute) == getattr(link_a.session, attribute)
    assert list(link_b.session.outgoing_unsettled) == list(link_a.session.outgoing_unsettled)


def test_drain_consumes_the_credit_and_reports_drain() -> None:
    peer = Peer()
    link = _sending_link(peer)
    events = peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(5), drain=True))
    assert events == [ev.LinkCreditChanged(link, True)]
    peer.conn.send_transfer(link, b"\x04" * 16, b"one", settled=True)
    peer.output()
    peer.conn.drain_complete(link)
    flow = only(peer.frames(), Flow).body
    assert flow.drain is True and flow.link_credit == 0
    assert flow.delivery_count == 5  # 1 sent + 4 consumed by the drain (spec 2.6.7)
    assert link.delivery_count == 5 and not peer.conn.can_send(link)


def test_credit_is_computed_from_the_peers_delivery_count() -> None:
    peer = Peer()
    link = _sending_link(peer)
    peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(3)))
    for i in range(3):
        peer.conn.send_transfer(link, bytes([i]) * 16, b"m", settled=True)
    assert not peer.conn.can_send(link)
    # The peer saw 2 of the 3 deliveries when it topped up to 3: only 2 more may be sent.
    peer.frame(Flow(UInt(2), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(2), UInt(3)))
    assert link.link_credit == 2


def test_flow_echo_is_answered_with_our_link_state() -> None:
    peer = Peer()
    link = _sending_link(peer)
    peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(4), echo=True))
    flow = only(peer.frames(), Flow).body
    assert flow.handle == link.handle and flow.link_credit == 4 and flow.delivery_count == 0


def test_session_window_exhausted_stops_sending_until_the_peer_widens_it() -> None:
    peer = Peer()
    link = _sending_link(peer, incoming_window=2)
    peer.frame(Flow(UInt(0), UInt(2), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(10)))
    assert peer.conn.can_send(link)
    peer.conn.send_transfer(link, b"\x05" * 16, b"a", settled=True)
    assert peer.conn.can_send(link)
    peer.conn.send_transfer(link, b"\x06" * 16, b"b", settled=True)
    assert not peer.conn.can_send(link)  # link credit left, session window not
    assert link.link_credit == 8
    events = peer.frame(Flow(UInt(2), UInt(2), UInt(0), UInt(5000)))  # session-only flow
    assert peer.conn.can_send(link)
    assert events == [ev.LinkCreditChanged(link, False)]


def test_detach_end_and_close_are_answered() -> None:
    peer = Peer()
    peer.open()
    session = peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.output()
    events = peer.frame(Detach(UInt(0), True))
    assert events == [ev.LinkDetached(link, True, None)]
    detach = only(peer.frames(), Detach).body
    assert detach.handle == link.handle and detach.closed is True and detach.error is None

    events = peer.frame(End())
    assert events == [ev.SessionEnded(session, None)]
    assert only(peer.frames(), End).body.error is None

    events = peer.frame(Close())
    assert events == [ev.ConnectionClosed(None, True)]
    assert only(peer.frames(), Close).body.error is None
    assert peer.conn.wants_close


def test_close_with_open_links_reports_them_detached() -> None:
    peer = Peer()
    peer.open()
    session = peer.begin()
    link = peer.attach(handle=0, client_sends=False)
    peer.conn.accept_attach(link)
    peer.output()
    events = peer.frame(Close())
    assert events == [ev.LinkDetached(link, True, None), ev.SessionEnded(session, None),
                      ev.ConnectionClosed(None, True)]


def test_reject_attach_sends_attach_then_detach_with_the_error() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True, address="nope")
    peer.conn.reject_attach(link, "amqp:not-found", "no such entity")
    frames = peer.frames()
    assert [type(f.body) for f in frames] == [Attach, Detach]
    # Spec 2.6.3: refusing means an attach with a null terminus on our side (we'd be the target).
    assert frames[0].body.source is not None and frames[0].body.target is None
    assert error_condition(frames, Detach) == "amqp:not-found"
    # The peer's answering detach completes the exchange without another detach from us.
    assert peer.frame(Detach(UInt(0), True)) == []
    assert peer.frames() == []
    # ... and the handle can be reused.
    peer.attach(handle=0, client_sends=True)


def test_attach_with_a_handle_in_use_ends_the_session() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    peer.attach(handle=0, client_sends=True)
    peer.frame(Attach("other", UInt(0), ROLE_SENDER, source=None, target=None))
    assert error_condition(peer.frames(), End) == "amqp:session:handle-in-use"


def test_frames_on_a_channel_without_a_session_close_the_connection() -> None:
    peer = Peer()
    peer.open()
    peer.frame(Attach("x", UInt(0), ROLE_SENDER), channel=9)
    frames = peer.frames()
    assert only(frames, Close).body.error is not None
    assert peer.conn.wants_close


def test_transfer_on_an_unattached_handle_ends_the_session_and_the_connection_survives() -> None:
    """Spec 2.8.16 / 2.5.5: the session ends with unattached-handle and enters DISCARDING."""
    peer = Peer()
    peer.open()
    session = peer.begin()
    events = peer.frame(Transfer(UInt(42), UInt(0), b"t", UInt(0)), payload=b"x")
    assert events == [ev.SessionEnded(session, None)]
    assert error_condition(peer.frames(), End) == "amqp:session:unattached-handle"
    # Until the peer's end arrives, its frames on that channel are discarded, not errors.
    assert peer.frame(Transfer(UInt(42), UInt(1), b"u", UInt(0)), payload=b"y") == []
    assert peer.frame(End()) == []
    frames = peer.frames()
    assert frames == []  # we already sent our end
    assert not peer.conn.wants_close
    # The channel is free again: a new session works.
    new_session = peer.begin()
    assert new_session is not session
    link = peer.attach(handle=0, client_sends=True)
    assert link.session is new_session


def test_flow_for_an_unattached_handle_ends_the_session() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    peer.frame(Flow(UInt(0), UInt(10), UInt(0), UInt(10), UInt(99), UInt(0), UInt(1)))
    assert error_condition(peer.frames(), End) == "amqp:session:unattached-handle"
    assert not peer.conn.wants_close


def test_handle_above_handle_max_closes_the_connection_with_framing_error() -> None:
    """Spec 2.7.2: a handle outside the announced range is a connection framing-error."""
    peer = Peer()
    peer.open()
    peer.frame(Begin(None, UInt(0), UInt(10), UInt(10), UInt(3)))
    peer.output()
    peer.frame(Attach("x", UInt(4), ROLE_SENDER))
    assert error_condition(peer.frames(), Close) == "amqp:connection:framing-error"


def test_server_close_sends_close_with_the_error() -> None:
    peer = Peer()
    peer.open()
    peer.conn.close("amqp:connection:forced", "shutting down")
    assert error_condition(peer.frames(), Close) == "amqp:connection:forced"
    assert peer.send(build_frame(0, Close())) == []  # after our close nothing more is processed


def test_connection_lost_reports_links_sessions_and_the_connection() -> None:
    peer = Peer()
    peer.open()
    session = peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    events = peer.conn.connection_lost()
    detached, ended, _closed = events
    assert isinstance(detached, ev.LinkDetached) and isinstance(ended, ev.SessionEnded)
    assert isinstance(_closed, ev.ConnectionClosed)
    assert detached.link is link and ended.session is session
    assert peer.conn.connection_lost() == []


def test_sasl_frame_after_open_is_a_protocol_error() -> None:
    peer = Peer()
    peer.open()
    peer.frame(SaslInit(Symbol("ANONYMOUS")), sasl=True)
    assert only(peer.frames(), Close).body.error is not None


# ------------------------------------------------------------------ a range disposition, then more input
def _link_with_unsettled(peer: Peer, count: int) -> tuple[Any, list[int]]:
    link = _sending_link(peer)
    peer.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(0), UInt(count)))
    ids = [peer.conn.send_transfer(link, n.to_bytes(16, "big"), b"m", settled=False, context=n)
           for n in range(count)]
    peer.output()
    return link, ids


def test_frames_after_a_range_disposition_wait_until_the_range_is_expanded_then_come_in_order() -> None:
    # AMQP 1.0 part 2.7.6: the range's outcome applies to each delivery it names, before what the peer
    # sent after it; the detach that follows (2.7.7) must not be handled first, nor the range worked
    # out whole at once because of it (the stall issue #19 measures)
    peer = Peer()
    count = 3 * DEFAULT_SLICES.range_events
    link, ids = _link_with_unsettled(peer, count)
    events = peer.send(build_frame(0, Disposition(ROLE_RECEIVER, UInt(ids[0]), UInt(ids[-1]), True, Accepted()))
                       + build_frame(0, Detach(UInt(1), True)))
    [rng] = events
    assert isinstance(rng, ev.DeliveryRangeStateChanged)
    assert peer.conn.range_resolved(rng) is None  # not worked out whole
    assert not peer.conn.held_input  # the detach waits for the range
    assert not any(isinstance(f.body, Detach) for f in peer.frames())
    expanded: list[ev.DeliveryStateChanged] = []
    while not peer.conn.range_done(rng):
        expanded += peer.conn.expand_range(rng, DEFAULT_SLICES.range_events)
    assert [e.delivery_id for e in expanded] == ids and [e.context for e in expanded] == list(range(count))
    assert all(e.settled and isinstance(e.state, Accepted) and e.link is link for e in expanded)
    assert peer.conn.held_input
    [detached] = peer.send(b"")
    assert isinstance(detached, ev.LinkDetached) and detached.link is link
    assert only(peer.frames(), Detach).body.closed is True
    assert not peer.conn.held_input and link.unsettled == {}


def test_frames_held_behind_a_range_are_not_offered_once_the_connection_is_closed() -> None:
    # The application feeds b"" while held_input says frames wait; a connection closed meanwhile (a
    # handler's internal error closes it) reads nothing more, so held_input must stop asking for that.
    peer = Peer()
    _link, ids = _link_with_unsettled(peer, 2 * DEFAULT_SLICES.range_events)
    [rng] = peer.send(build_frame(0, Disposition(ROLE_RECEIVER, UInt(ids[0]), UInt(ids[-1]), True, Accepted()))
                      + build_frame(0, Detach(UInt(1), True)))
    while not peer.conn.range_done(rng):
        peer.conn.expand_range(rng, DEFAULT_SLICES.range_events)
    assert peer.conn.held_input  # the detach waits to be fed
    peer.conn.close("amqp:internal-error", "a handler failed")
    assert not peer.conn.held_input and peer.send(b"") == []


def test_input_arriving_while_a_range_waits_is_handled_after_the_held_frames() -> None:
    peer = Peer()
    _link, ids = _link_with_unsettled(peer, 2 * DEFAULT_SLICES.range_events)
    few = 10  # the second disposition short: events of its own, after every one of the range's
    peer.send(build_frame(0, Disposition(ROLE_RECEIVER, UInt(ids[0]), UInt(ids[-1]), False, Accepted()))
              + build_frame(0, Disposition(ROLE_RECEIVER, UInt(ids[0]), UInt(ids[few]), True, Accepted())))
    assert peer.send(build_frame(0, Detach(UInt(1), True))) == []  # behind the two dispositions
    [rng] = [e for e in peer.events if isinstance(e, ev.DeliveryRangeStateChanged)]
    while not peer.conn.range_done(rng):
        assert all(not e.settled for e in peer.conn.expand_range(rng, 100))
    events = peer.send(b"")
    settled = [e for e in events if isinstance(e, ev.DeliveryStateChanged)]
    assert [e.delivery_id for e in settled] == ids[:few + 1] and all(e.settled for e in settled)
    assert isinstance(events[-1], ev.LinkDetached)


def test_a_range_followed_by_more_than_the_hold_bound_is_worked_out_whole_and_nothing_waits() -> None:
    peer = Peer(slices=Slices(hold_bytes=8))  # the bound made tiny: the detach does not fit
    _link, ids = _link_with_unsettled(peer, 2 * DEFAULT_SLICES.range_events)
    events = peer.send(build_frame(0, Disposition(ROLE_RECEIVER, UInt(ids[0]), UInt(ids[-1]), True, Accepted()))
                       + build_frame(0, Detach(UInt(1), True, None)) + build_frame(0, Flow(
                           UInt(0), UInt(5000), UInt(0), UInt(5000), UInt(9), UInt(0), UInt(1))))
    rng = events[0]
    assert isinstance(rng, ev.DeliveryRangeStateChanged) and peer.conn.range_resolved(rng) == ids
    assert isinstance(events[1], ev.LinkDetached)
    expanded = []
    while not peer.conn.range_done(rng):
        expanded += peer.conn.expand_range(rng, 256)
    assert [e.delivery_id for e in expanded] == ids and not peer.conn.held_input
