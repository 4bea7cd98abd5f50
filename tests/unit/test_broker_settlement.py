"""The fast path of completion (``Settlement.complete``: a plainly valid lock, removed without the
general checks) agrees with the general settlement (``Settlement.settle`` with ``Outcome.COMPLETED``)
on every state a lock can be in: taken and valid, expired (its timer run or not), renewed, already
settled, unknown, held through a session whose lock is valid, expired or lost. Two brokers are driven
through the same steps; one completes through the receiver (the fast path), the other through the
general settlement; the error and everything observable afterwards must be the same."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbemulator.broker import BrokerError, Outcome
from tests.fixtures.broker import make_broker, msg, receiver

QUEUES = [
    {"Name": "q", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 2}},
    {"Name": "sq", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 2, "RequiresSession": True}},
]
LOCK_S = 30

STEP = st.one_of(
    st.tuples(st.just("advance"), st.sampled_from([0, 1, LOCK_S - 1, LOCK_S, LOCK_S + 1, 3 * LOCK_S])),
    st.tuples(st.just("tick"), st.just(0)),
    st.tuples(st.just("renew"), st.integers(0, 2)),
    st.tuples(st.just("complete_other"), st.integers(0, 2)),
    st.tuples(st.just("abandon_other"), st.integers(0, 2)),
    st.tuples(st.just("renew_session"), st.just(0)),
)
SCENARIO = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["q", "sq"]),
        "sent": st.integers(1, 3),
        "taken": st.integers(0, 3),
        "steps": st.lists(STEP, max_size=4),
        # which token to complete: one taken (by index) or one no lock ever had
        "token": st.one_of(st.integers(0, 2), st.just("unknown")),
    }
)


def _run(scenario: dict, fast: bool) -> tuple:
    b, clock = make_broker(QUEUES)
    path = scenario["path"]
    session: dict[str, Any] = {"session_id": "s1"} if path == "sq" else {}
    b.send(path, [msg(str(i).encode(), message_id=f"m{i}", **session) for i in range(scenario["sent"])])
    r = receiver(b, path, **session)
    taken = r.take(scenario["taken"])
    tokens = [d.lock_token for d in taken]

    def guarded(call) -> str | None:
        try:
            call()
        except BrokerError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    log = []
    for kind, arg in scenario["steps"]:
        if kind == "advance":
            clock.advance(arg)
        elif kind == "tick":
            b.tick()
        elif kind == "renew" and arg < len(tokens):
            log.append(guarded(lambda t=tokens[arg]: b.renew_lock(path, [t])))
        elif kind == "complete_other" and arg < len(tokens):
            log.append(guarded(lambda t=tokens[arg]: r.complete(t)))
        elif kind == "abandon_other" and arg < len(tokens):
            log.append(guarded(lambda t=tokens[arg]: r.abandon(t)))
        elif kind == "renew_session" and session:
            log.append(guarded(lambda: b.renew_session_lock(path, "s1")))
    choice = scenario["token"]
    token = uuid.uuid4() if choice == "unknown" or choice >= len(tokens) else tokens[choice]
    ent = r.entity
    if fast:
        error = guarded(lambda: r.complete(token))
    else:
        error = guarded(lambda: b._settlement.settle(ent, token, Outcome.COMPLETED, receiver=r))
    state = sorted(
        (m.sequence_number, m.body_raw, int(m.state), m.delivery_count, m.locked, m.dead_letter_reason)
        for p in (path, f"{path}/$DeadLetterQueue")
        for m in b.peek(p, 0, 100)
    )
    sessions = [(s.id, s.message_count, s.locked_until_ms) for s in b.session_views(path)]
    return error, log, state, sessions, b.counts(path), r.on_available.calls, r.session_lost


@settings(max_examples=400, deadline=None)
@given(SCENARIO)
def test_the_fast_completion_agrees_with_the_general_settlement(scenario: dict) -> None:
    assert _run(scenario, fast=True) == _run(scenario, fast=False)


@pytest.mark.parametrize(
    ("advance", "expected"),
    [(0, None), (LOCK_S, "MessageLockLostError: The lock supplied has expired.")],
)
def test_the_differential_sees_both_paths_of_a_plain_lock(advance: int, expected: str | None) -> None:
    # the fast path's own branch (a valid lock) and its fallback (an expired one) both occur
    scenario = {"path": "q", "sent": 1, "taken": 1, "steps": [("advance", advance)], "token": 0}
    assert _run(scenario, fast=True)[0] == expected


def test_outcomes_are_the_management_disposition_statuses() -> None:
    assert [o.value for o in Outcome] == ["completed", "abandoned", "released", "defered", "suspended"]
    assert Outcome("defered") is Outcome.DEFERRED
