"""The states of AMQP endpoints (connection, session, link) and the transitions between them.

Each endpoint has a local and a remote state, as in Proton: UNINIT (not yet opened/begun/attached),
ACTIVE, CLOSED; spec 2.4.6, 2.5.5 and 2.6 name the pairs (a session whose local end is CLOSED and
remote ACTIVE is DISCARDING, a link in the same pair has sent its detach). What each frame, received
or sent, does to a pair is written once, in the three transition tables below, like h2's
``H2ConnectionStateMachine``: a pair and an input lead to the next pair, to ``DISCARD`` (the frame is
dropped: it was in flight when we ended or detached) or nowhere, which is a protocol error with the
condition the specification names for it (``*_REFUSALS``). Every frame the connection reads, also the
dispositions its fast decoder reads, passes one of these checks before a handler sees it.

Transactions leave the tables as they are: a transactional state (``txn-id``) is carried inside the
``state`` of a transfer or disposition, and a coordinator is a link like any other.
"""

from __future__ import annotations

from enum import Enum, IntEnum

from .errors import (
    FRAMING_ERROR,
    HANDLE_IN_USE,
    ILLEGAL_STATE,
    NOT_ALLOWED,
    UNATTACHED_HANDLE,
)


class EndpointState(IntEnum):
    UNINIT = 0
    ACTIVE = 1
    CLOSED = 2


class Input(IntEnum):
    """What happens to an endpoint: a frame we received or one we send."""

    RECV_OPEN = 0
    RECV_BEGIN = 1
    RECV_ATTACH = 2
    RECV_FLOW = 3
    RECV_TRANSFER = 4
    RECV_DISPOSITION = 5
    RECV_DETACH = 6
    RECV_END = 7
    RECV_CLOSE = 8
    SEND_OPEN = 9
    SEND_BEGIN = 10
    SEND_ATTACH = 11
    SEND_FLOW = 12
    SEND_TRANSFER = 13
    SEND_DISPOSITION = 14
    SEND_DETACH = 15
    SEND_END = 16
    SEND_CLOSE = 17


UNINIT, ACTIVE, CLOSED = EndpointState.UNINIT, EndpointState.ACTIVE, EndpointState.CLOSED
RECEIVED = tuple(i for i in Input if i.name.startswith("RECV_"))
SENT = tuple(i for i in Input if i.name.startswith("SEND_"))


class _Discard(Enum):
    """The type of ``DISCARD``: a one-member enum, so that ``nxt is DISCARD`` narrows
    ``State | _Discard`` for the type checker (an ``is`` test on a plain instance does not)."""

    DISCARD = "DISCARD"

    def __repr__(self) -> str:
        return "DISCARD"

    __str__ = __repr__


DISCARD = _Discard.DISCARD


class State:
    """One (local, remote) pair of an endpoint kind; ``next[input]`` is the pair the input leads to,
    ``DISCARD``, or None (not allowed). The pairs of a kind are singletons: compare them with ``is``."""

    __slots__ = ("kind", "local", "next", "remote")

    def __init__(self, kind: str, local: EndpointState, remote: EndpointState) -> None:
        self.kind = kind
        self.local = local
        self.remote = remote
        self.next: tuple[State | _Discard | None, ...] = ()

    def __repr__(self) -> str:
        return f"<{self.kind} local={self.local.name} remote={self.remote.name}>"


Pair = tuple[EndpointState, EndpointState]
Table = dict[Pair, dict[Input, "Pair | _Discard"]]

_FRAMES = (Input.RECV_ATTACH, Input.RECV_FLOW, Input.RECV_TRANSFER, Input.RECV_DISPOSITION, Input.RECV_DETACH)
_SENDS = (Input.SEND_ATTACH, Input.SEND_FLOW, Input.SEND_TRANSFER, Input.SEND_DISPOSITION, Input.SEND_DETACH)


def _same(pair: Pair, inputs: tuple[Input, ...]) -> dict[Input, Pair | _Discard]:
    return {i: pair for i in inputs}


# ------------------------------------------------------------------ connection (spec 2.4.6)
# The server answers an open at once, so (UNINIT, ACTIVE) lasts only until our open is written; a
# close we send ends the connection for us (the transport closes after flushing), so what the peer
# sends after it is dropped.
CONNECTION_TRANSITIONS: Table = {
    (UNINIT, UNINIT): {Input.RECV_OPEN: (UNINIT, ACTIVE), Input.SEND_OPEN: (ACTIVE, UNINIT)},
    (ACTIVE, UNINIT): {Input.RECV_OPEN: (ACTIVE, ACTIVE), Input.SEND_CLOSE: (CLOSED, UNINIT)},
    (UNINIT, ACTIVE): {Input.SEND_OPEN: (ACTIVE, ACTIVE), Input.RECV_CLOSE: (UNINIT, CLOSED)},
    (ACTIVE, ACTIVE): {
        **_same((ACTIVE, ACTIVE), (Input.RECV_BEGIN, *_FRAMES, Input.RECV_END, Input.SEND_BEGIN, *_SENDS,
                                   Input.SEND_END)),
        Input.RECV_CLOSE: (ACTIVE, CLOSED),
        Input.SEND_CLOSE: (CLOSED, ACTIVE),
    },
    (ACTIVE, CLOSED): {Input.SEND_CLOSE: (CLOSED, CLOSED)},
    (UNINIT, CLOSED): {Input.SEND_OPEN: (ACTIVE, CLOSED)},
    (CLOSED, UNINIT): {i: DISCARD for i in RECEIVED},
    (CLOSED, ACTIVE): {**{i: DISCARD for i in RECEIVED}, Input.RECV_CLOSE: (CLOSED, CLOSED)},
    (CLOSED, CLOSED): {i: DISCARD for i in RECEIVED},
}

# ------------------------------------------------------------------ session (spec 2.5.5)
# A session that does not exist (no begin on that channel) is (UNINIT, UNINIT). (CLOSED, ACTIVE) is
# END_SENT or, after an end with an error, DISCARDING: the peer's frames are dropped until its end.
SESSION_TRANSITIONS: Table = {
    (UNINIT, UNINIT): {Input.RECV_BEGIN: (UNINIT, ACTIVE)},
    (UNINIT, ACTIVE): {Input.SEND_BEGIN: (ACTIVE, ACTIVE)},
    (ACTIVE, ACTIVE): {
        **_same((ACTIVE, ACTIVE), (*_FRAMES, *_SENDS)),
        Input.RECV_END: (ACTIVE, CLOSED),
        Input.SEND_END: (CLOSED, ACTIVE),
    },
    (ACTIVE, CLOSED): {Input.SEND_END: (CLOSED, CLOSED)},
    (CLOSED, ACTIVE): {
        **{i: DISCARD for i in (Input.RECV_BEGIN, *_FRAMES)},
        Input.RECV_END: (CLOSED, CLOSED),
    },
    (CLOSED, CLOSED): {},
}

# ------------------------------------------------------------------ link (spec 2.6)
# (UNINIT, ACTIVE): the peer attached and the application has not answered yet (a session receiver
# may wait for a session). (CLOSED, ACTIVE): we sent a detach; transfers, flows and dispositions the
# peer sent before it saw ours are dropped (spec 2.6.5).
LINK_TRANSITIONS: Table = {
    (UNINIT, UNINIT): {Input.RECV_ATTACH: (UNINIT, ACTIVE)},
    (UNINIT, ACTIVE): {
        **_same((UNINIT, ACTIVE), (Input.RECV_FLOW, Input.RECV_TRANSFER, Input.RECV_DISPOSITION)),
        Input.SEND_ATTACH: (ACTIVE, ACTIVE),
        Input.RECV_DETACH: (UNINIT, CLOSED),
        Input.SEND_DETACH: (CLOSED, ACTIVE),
    },
    (ACTIVE, ACTIVE): {
        **_same((ACTIVE, ACTIVE), (Input.RECV_FLOW, Input.RECV_TRANSFER, Input.RECV_DISPOSITION,
                                   Input.SEND_FLOW, Input.SEND_TRANSFER, Input.SEND_DISPOSITION)),
        Input.RECV_DETACH: (ACTIVE, CLOSED),
        Input.SEND_DETACH: (CLOSED, ACTIVE),
    },
    (UNINIT, CLOSED): {Input.SEND_DETACH: (CLOSED, CLOSED)},
    (ACTIVE, CLOSED): {Input.SEND_DETACH: (CLOSED, CLOSED)},
    (CLOSED, ACTIVE): {
        **{i: DISCARD for i in (Input.RECV_FLOW, Input.RECV_TRANSFER, Input.RECV_DISPOSITION)},
        Input.RECV_DETACH: (CLOSED, CLOSED),
    },
    (CLOSED, CLOSED): {},
}

# What a received frame that has no transition means, per kind: (scope, condition). The scope says
# what the error ends: "connection" closes it, "session" ends the session the frame arrived on.
CONNECTION_REFUSALS: dict[Input, tuple[str, str]] = {
    Input.RECV_OPEN: ("connection", NOT_ALLOWED),  # a second open
}
SESSION_REFUSALS: dict[Input, tuple[str, str]] = {
    Input.RECV_BEGIN: ("connection", FRAMING_ERROR),  # a begin on a channel already in use
}
LINK_REFUSALS: dict[Input, tuple[str, str]] = {
    Input.RECV_ATTACH: ("session", HANDLE_IN_USE),  # an attach on a handle already attached
}
DEFAULT_REFUSALS = {
    "connection": ("connection", NOT_ALLOWED),  # e.g. a frame before open
    "session": ("connection", NOT_ALLOWED),  # a frame on a channel with no session (spec 2.7.x)
    "link": ("session", UNATTACHED_HANDLE),  # a frame on a handle with no link (spec 2.7.3 - 2.7.7)
}
SENT_REFUSAL = ("connection", ILLEGAL_STATE)  # what sending in a state that forbids it would be: our bug


def refusal(kind: str, input_: Input) -> tuple[str, str]:
    """The (scope, condition) for ``input_`` arriving where the ``kind`` table has no transition."""
    if input_ in SENT:
        return SENT_REFUSAL
    table = {"connection": CONNECTION_REFUSALS, "session": SESSION_REFUSALS, "link": LINK_REFUSALS}[kind]
    return table.get(input_, DEFAULT_REFUSALS[kind])


def _target(to: Pair | _Discard, states: dict[Pair, State]) -> State | _Discard:
    return DISCARD if to is DISCARD else states[to]


def _compile(kind: str, table: Table) -> dict[Pair, State]:
    states = {(local, remote): State(kind, local, remote) for local in EndpointState for remote in EndpointState}
    for pair, state in states.items():
        row = table.get(pair, {})
        state.next = tuple(
            _target(row[i], states) if i in row else None for i in Input
        )
    return states


CONNECTION_STATES = _compile("connection", CONNECTION_TRANSITIONS)
SESSION_STATES = _compile("session", SESSION_TRANSITIONS)
LINK_STATES = _compile("link", LINK_TRANSITIONS)

CONNECTION_START = CONNECTION_STATES[(UNINIT, UNINIT)]
CONNECTION_OPENED = CONNECTION_STATES[(ACTIVE, ACTIVE)]
NO_SESSION = SESSION_STATES[(UNINIT, UNINIT)]
SESSION_MAPPED = SESSION_STATES[(ACTIVE, ACTIVE)]
NO_LINK = LINK_STATES[(UNINIT, UNINIT)]
LINK_ATTACHED = LINK_STATES[(ACTIVE, ACTIVE)]

KINDS = {"connection": CONNECTION_STATES, "session": SESSION_STATES, "link": LINK_STATES}
TABLES = {"connection": CONNECTION_TRANSITIONS, "session": SESSION_TRANSITIONS, "link": LINK_TRANSITIONS}


class StateMachineError(Exception):
    """An input with no transition from the endpoint's state: ``condition`` names it (spec 2.8.15-18)."""

    def __init__(self, state: State, input_: Input) -> None:
        self.state = state
        self.input = input_
        self.scope, self.condition = refusal(state.kind, input_)
        super().__init__(f"{input_.name} not allowed on a {state.kind} in state local={state.local.name} "
                         f"remote={state.remote.name}")


def step(state: State, input_: Input) -> State | _Discard:
    """The state ``input_`` leads to from ``state`` (or DISCARD); StateMachineError where it leads nowhere."""
    nxt = state.next[input_]
    if nxt is None:
        raise StateMachineError(state, input_)
    return nxt
