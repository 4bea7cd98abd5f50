"""The endpoint state tables (sbemulator.amqp.states) and the one funnel every frame passes.

Like h2's tests/test_state_machines.py: Hypothesis draws (state, input) pairs and checks what the
tables promise for every one of them: an input either leads to a state of the same kind, to DISCARD,
or is refused with a condition the AMQP 1.0 specification defines (part 2.8.15 - 2.8.18). Then the
connection is driven with frames to show that the table decides: also for the dispositions the fast
decoder reads without the generic codec, and that a peer's wrongly typed field is its decode-error
while a failure of the emulator's own is an internal-error with a logged traceback.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sbemulator.amqp import states
from sbemulator.amqp.framing import build_frame
from sbemulator.amqp.performatives import (
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Flow,
    Transfer,
)
from sbemulator.amqp.states import (
    DISCARD,
    KINDS,
    TABLES,
    EndpointState,
    Input,
    StateMachineError,
    step,
)
from sbemulator.amqp.types import UInt

from .test_amqp_connection_peer import Peer

SPEC_CONDITIONS = {
    "amqp:internal-error", "amqp:not-found", "amqp:unauthorized-access", "amqp:decode-error",
    "amqp:resource-limit-exceeded", "amqp:not-allowed", "amqp:invalid-field", "amqp:not-implemented",
    "amqp:resource-locked", "amqp:precondition-failed", "amqp:resource-deleted", "amqp:illegal-state",
    "amqp:frame-size-too-small", "amqp:connection:forced", "amqp:connection:framing-error",
    "amqp:connection:redirect", "amqp:session:window-violation", "amqp:session:errant-link",
    "amqp:session:handle-in-use", "amqp:session:unattached-handle",
}

kinds = st.sampled_from(sorted(KINDS))
pairs = st.tuples(st.sampled_from(EndpointState), st.sampled_from(EndpointState))


@given(kind=kinds, pair=pairs, input_=st.sampled_from(Input))
def test_every_state_and_input_leads_to_a_state_to_discard_or_to_a_named_refusal(kind, pair, input_) -> None:
    state = KINDS[kind][pair]
    try:
        nxt = step(state, input_)
    except StateMachineError as exc:
        assert exc.condition in SPEC_CONDITIONS
        assert exc.scope in ("connection", "session")
        assert exc.state is state and exc.input is input_
    else:
        assert nxt is DISCARD or nxt is KINDS[kind][(nxt.local, nxt.remote)]
        assert input_ in states.RECEIVED or nxt is not DISCARD  # only received frames are ever dropped


@given(kind=kinds, pair=pairs, input_=st.sampled_from(Input))
def test_the_compiled_states_are_the_table(kind, pair, input_) -> None:
    row = TABLES[kind].get(pair, {})
    nxt = KINDS[kind][pair].next[input_]
    if input_ not in row:
        assert nxt is None
    elif row[input_] is DISCARD:
        assert nxt is DISCARD
    else:
        assert (nxt.local, nxt.remote) == row[input_]


@given(kind=kinds, pair=pairs, inputs=st.lists(st.sampled_from(Input), max_size=12))
def test_a_closed_end_never_opens_again(kind, pair, inputs) -> None:
    """Spec 2.4.6 / 2.5.5 / 2.6: once either end is CLOSED, no input makes it ACTIVE or UNINIT again."""
    state = KINDS[kind][pair]
    for input_ in inputs:
        try:
            nxt = step(state, input_)
        except StateMachineError:
            return
        if nxt is DISCARD:
            continue
        for before, after in ((state.local, nxt.local), (state.remote, nxt.remote)):
            if before is EndpointState.CLOSED:
                assert after is EndpointState.CLOSED
        state = nxt


def test_only_received_frames_are_refused_with_the_peer_named_as_the_cause() -> None:
    for kind, table in KINDS.items():
        for state in table.values():
            for input_ in states.SENT:
                if state.next[input_] is None:
                    with pytest.raises(StateMachineError) as caught:
                        step(state, input_)
                    assert caught.value.condition == "amqp:illegal-state", (kind, state, input_)


# ------------------------------------------------------------------ the connection follows the table
def _with_link() -> tuple[Peer, object]:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=False)
    peer.conn.accept_attach(link)
    peer.frame(Flow(UInt(0), UInt(100), UInt(0), UInt(100), UInt(0), UInt(0), UInt(10)))
    peer.conn.send_transfer(link, b"t" * 16, b"payload", settled=False, context="lock")
    peer.output()
    return peer, link


# The SDK's complete of delivery 0, in the exact shape hotframes.sdk_complete_id reads without the codec.
SDK_COMPLETE = bytes.fromhex("005315c00d06560152004056000053244540")


def test_the_sdk_complete_fast_path_is_refused_on_a_channel_without_a_session() -> None:
    peer, _ = _with_link()
    peer.send(build_frame(5, payload=SDK_COMPLETE))
    [close] = [f for f in peer.frames() if isinstance(f.body, Close)]
    assert str(close.body.error.condition) == "amqp:not-allowed"


def test_the_sdk_complete_fast_path_is_dropped_on_a_discarding_session() -> None:
    """After the emulator ended a session with an error, what the peer still sends on it is dropped
    (spec 2.5.5 DISCARDING), the fast-decoded complete included, until the peer's end."""
    peer, _ = _with_link()
    peer.frame(Attach("x", UInt(9), False, source=None, target=None, initial_delivery_count=UInt(0)))
    peer.frame(Attach("y", UInt(9), False, source=None, target=None, initial_delivery_count=UInt(0)))
    assert any(isinstance(f.body, End) and f.body.error is not None for f in peer.frames())  # handle-in-use
    session = peer.conn.sessions_by_remote[0]
    assert (session.state.local, session.state.remote) == (EndpointState.CLOSED, EndpointState.ACTIVE)
    assert peer.send(build_frame(0, payload=SDK_COMPLETE)) == []
    assert peer.frames() == [] and not peer.conn.closed
    peer.frame(End())
    assert 0 not in peer.conn.sessions_by_remote  # the channel is free again
    peer.begin()


def test_a_general_disposition_from_the_fast_decoder_is_checked_like_any_frame() -> None:
    peer, _ = _with_link()
    events = peer.frame(Disposition(True, UInt(0), None, True, None))
    assert [type(e).__name__ for e in events] == ["DeliveryStateChanged"]
    peer.frame(Disposition(True, UInt(0), None, True, None), channel=3)
    [close] = [f for f in peer.frames() if isinstance(f.body, Close)]
    assert str(close.body.error.condition) == "amqp:not-allowed"


def test_frames_on_a_link_the_emulator_detached_are_dropped_until_the_peer_detaches() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 5)
    peer.conn.detach(link, "amqp:link:detach-forced", "test")
    peer.output()
    assert peer.frame(Transfer(UInt(0), UInt(0), b"t", UInt(0), False), payload=b"x") == []
    assert peer.frame(Flow(UInt(0), UInt(100), UInt(0), UInt(100), UInt(0), UInt(0), UInt(3))) == []
    assert peer.frames() == []
    peer.frame(Detach(UInt(0), True))
    assert peer.frames() == []  # our detach was the answer already
    assert 0 not in peer.conn.sessions_by_remote[0].links_by_remote


def test_a_field_of_the_wrong_type_is_the_peers_decode_error() -> None:
    peer = Peer()
    peer.open()
    peer.begin()
    peer.frame(Attach("bad", "not-a-handle", False, source=None, target=None))  # type: ignore[arg-type]  # the wrong type on purpose
    [close] = [f for f in peer.frames() if isinstance(f.body, Close)]
    assert str(close.body.error.condition) == "amqp:decode-error"
    assert "Attach.handle" in str(close.body.error.description)


def test_a_begin_with_a_list_as_window_is_a_decode_error() -> None:
    peer = Peer()
    peer.open()
    peer.frame(Begin(None, UInt(0), [UInt(1)], UInt(5)))  # type: ignore[arg-type]  # on purpose
    [close] = [f for f in peer.frames() if isinstance(f.body, Close)]
    assert str(close.body.error.condition) == "amqp:decode-error"


def test_a_bug_of_ours_is_an_internal_error_with_a_logged_traceback(monkeypatch, caplog) -> None:
    peer = Peer()
    peer.open()

    def broken(*args: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("sbemulator.amqp.windows.SessionWindow.peer_flow", broken)
    peer.begin()
    with caplog.at_level(logging.ERROR, logger="sbemulator.amqp"):
        peer.frame(Flow(UInt(0), UInt(100), UInt(0), UInt(100)))
    [close] = [f for f in peer.frames() if isinstance(f.body, Close)]
    assert str(close.body.error.condition) == "amqp:internal-error"
    [record] = [r for r in caplog.records if r.name == "sbemulator.amqp"]
    assert record.exc_info is not None and "a bug" in str(record.exc_info[1])


# ------------------------------------------------------------------ structure
AMQP_PACKAGE = Path(__file__).resolve().parents[2] / "sbemulator" / "amqp"


def _imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [alias.name for alias in node.names])
    return found


def test_the_amqp_package_has_no_import_cycles() -> None:
    """events names the endpoints without importing the connection (it used to: a cycle)."""
    graph = {path.stem: _imports(path) for path in AMQP_PACKAGE.glob("*.py")}
    assert "connection" not in graph["events"]

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt}))
                   for nxt in graph.get(start, ()))

    cycles = [name for name in graph if reaches(name, name, set())]
    assert cycles == []


def test_the_frame_header_layout_is_defined_once() -> None:
    owners = [path.name for path in AMQP_PACKAGE.glob("*.py") if '">IBBH"' in path.read_text()]
    assert owners == ["framing.py"]
