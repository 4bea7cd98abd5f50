"""Fuzzing the connection state machine: no input may make ``receive_data`` raise.

A peer controls every field of every performative. Whatever it sends, the server must answer with
frames (a close, an end, a detach) and never let an exception escape into the socket layer, where it
would drop the connection without telling the client why.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sbemulator.amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import (
    PERFORMATIVES,
    ROLE_SENDER,
    Accepted,
    Attach,
    Begin,
    Close,
    Open,
    Rejected,
    SaslInit,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import Described, Symbol, UInt, ULong

from .test_amqp_connection_peer import Peer, parse_output

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

field_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 5).map(UInt),
    st.sampled_from([UInt(0xFFFFFFFF), ULong(2**64 - 1), -1, 2**40]),
    st.text(max_size=5),
    st.sampled_from([Symbol("orders"), Symbol("amqp:x")]),
    st.binary(max_size=5),
    st.lists(st.integers(0, 3).map(UInt), max_size=3),
    st.dictionaries(st.text(max_size=3).map(Symbol), st.integers(0, 3).map(UInt), max_size=2),
    st.sampled_from([Source("orders"), Target("orders"), Accepted(), Rejected(),
                     Described(ULong(0x999), [1]), Described(Symbol("x"), None)]),
)


@st.composite
def performatives(draw):
    cls = draw(st.sampled_from(PERFORMATIVES))
    values = draw(st.lists(field_values, min_size=0, max_size=len(cls.FIELDS)))
    return cls(*values)


def _assert_output_is_well_formed(peer: Peer) -> None:
    for item in parse_output(peer.conn.data_to_send()):
        assert not isinstance(item, bytes)  # no protocol header after the handshake
        # A peer's input, however wrong, is the peer's error: internal-error would mean a bug of ours.
        error = getattr(item.body, "error", None)
        assert error is None or str(error.condition) != "amqp:internal-error", item


def _opened_peer_with_links() -> Peer:
    peer = Peer()
    peer.open()
    peer.begin()
    receiving = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(receiving)
    peer.conn.grant_credit(receiving, 10)
    sending = peer.attach(handle=1, client_sends=False)
    peer.conn.accept_attach(sending)
    peer.output()
    return peer


@FUZZ
@given(st.lists(st.tuples(performatives(), st.integers(0, 2), st.binary(max_size=20)), min_size=1, max_size=6))
def test_random_performatives_never_raise(frames) -> None:
    peer = _opened_peer_with_links()
    for body, channel, payload in frames:
        peer.send(build_frame(channel, body, payload if isinstance(body, Transfer) else b""))
        _assert_output_is_well_formed(peer)
    peer.conn.handle_timer()
    peer.conn.connection_lost()


@FUZZ
@given(st.binary(min_size=1, max_size=200))
def test_random_frame_bytes_after_open_never_raise(data: bytes) -> None:
    peer = _opened_peer_with_links()
    peer.send((len(data) + 8).to_bytes(4, "big") + b"\x02\x00\x00\x00" + data)
    _assert_output_is_well_formed(peer)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_instead_of_a_handshake_never_raise(data: bytes) -> None:
    peer = Peer()
    peer.send(data)
    parse_output(peer.conn.data_to_send())


def test_close_is_always_processed_even_on_a_discarding_channel() -> None:
    peer = _opened_peer_with_links()
    peer.frame(Transfer(UInt(77), UInt(0), b"t", UInt(0)), payload=b"x")  # ends session 0 with an error
    peer.output()
    events = peer.frame(Close())
    assert peer.conn.wants_close and events
    assert any(isinstance(f.body, Close) for f in peer.frames())


def _conversation() -> tuple[bytes, bytes]:
    """A client's bytes up to its attach, and what it sends once the server's flow gave it credit."""
    until_attach = b"".join([
        SASL_HEADER,
        build_frame(0, SaslInit(Symbol("ANONYMOUS")), frame_type=FRAME_SASL),
        AMQP_HEADER,
        build_frame(0, Open("c")),
        build_frame(0, Begin(None, UInt(0), UInt(100), UInt(100))),
        build_frame(0, Attach("l", UInt(0), ROLE_SENDER, None, None, Source("s"), Target("orders"))),
    ])
    after_credit = b"".join([
        build_frame(0, Transfer(UInt(0), UInt(0), b"t", UInt(0), False, True), b"first-"),
        build_frame(0, Transfer(UInt(0), more=False), b"second"),
    ])
    return until_attach, after_credit


@FUZZ
@given(st.lists(st.integers(1, 40), max_size=30))
def test_any_split_of_the_input_gives_the_same_events(cuts: list[int]) -> None:
    """TCP delivers bytes in arbitrary chunks; the state machine must not care where they break."""
    until_attach, after_credit = _conversation()
    data = until_attach + after_credit
    peer = Peer()
    pos = 0

    def feed(chunk: bytes) -> None:
        for event in peer.send(chunk):
            if type(event).__name__ == "LinkAttachRequested":  # the server grants credit, as the gateway does
                peer.conn.accept_attach(event.link)
                peer.conn.grant_credit(event.link, 1)

    # A correct client sends its transfer only after reading the flow, so one chunk never spans both.
    for cut in [*cuts, len(data)]:
        end = min(pos + cut, len(data))
        if pos < len(until_attach) < end:
            end = len(until_attach)
        feed(data[pos:end])
        pos = end
    while pos < len(data):
        end = len(until_attach) if pos < len(until_attach) else len(data)
        feed(data[pos:end])
        pos = end
    kinds = [type(e).__name__ for e in peer.events]
    assert kinds == ["ConnectionOpened", "SessionBegun", "LinkAttachRequested", "MessageReceived"]
    assert peer.events[-1].payload == b"first-second"
