"""Ordered processing of one session, with a stand-in session receiver (the broker's ordering and
session locks are exercised by the integration tests against the emulator)."""

from __future__ import annotations

import json

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Message

from consumers.ordered import (
    InMemoryLedger,
    OrderedWrite,
    SequenceGuard,
    build_ordered_messages,
    parse_ordered,
    process_session,
)


class FakeSession:
    def __init__(self, session_id: str, state: bytes | None = None) -> None:
        self.session_id = session_id
        self.state = state

    def get_state(self) -> bytes | None:
        return self.state

    def set_state(self, state: str) -> None:
        self.state = state.encode()


class FakeSessionReceiver:
    def __init__(self, session: FakeSession, bodies: list[bytes], batch: int = 3) -> None:
        self.session = session
        self._pending = [ServiceBusReceivedMessage(Message(data=[b]), receiver=None) for b in bodies]
        self.batch = batch
        self.completed: list[object] = []
        self.dead_lettered: list[tuple] = []

    def receive_messages(self, max_message_count: int, max_wait_time: float) -> list:
        taken, self._pending = self._pending[: self.batch], self._pending[self.batch:]
        return taken

    def complete_message(self, message: object) -> None:
        self.completed.append(message)

    def dead_letter_message(self, message: object, reason: str, error_description: str) -> None:
        self.dead_lettered.append((message, reason, error_description))


def _bodies(tenant: str, sequences: list[int]) -> list[bytes]:
    built = {json.loads(b"".join(m.body))["payload"]["sequence"]: b"".join(m.body)
             for m in build_ordered_messages(tenant, [f"v{i}" for i in range(max(sequences))])}
    return [built[s] for s in sequences]


def test_built_messages_are_grouped_by_tenant_session() -> None:
    messages = build_ordered_messages("tenant-7", ["a", "b", "c"])
    assert {m.session_id for m in messages} == {"tenant-7"}
    assert [parse_ordered(b"".join(m.body)).sequence for m in messages] == [1, 2, 3]


def test_a_session_is_applied_in_order_and_its_state_remembers_the_last_sequence() -> None:
    ledger = InMemoryLedger()
    receiver = FakeSessionReceiver(FakeSession("t1"), _bodies("t1", [1, 2, 3, 4, 5]))
    assert process_session(receiver, ledger.apply) == 5
    assert ledger.applied["t1"] == [1, 2, 3, 4, 5]
    assert json.loads(receiver.session.state or b"")["last_sequence"] == 5
    assert len(receiver.completed) == 5


def test_redelivered_writes_after_a_handover_are_not_applied_twice() -> None:
    """The next receiver of the session sees the state the previous one left."""
    ledger = InMemoryLedger()
    session = FakeSession("t1", state=json.dumps({"last_sequence": 3}).encode())
    receiver = FakeSessionReceiver(session, _bodies("t1", [3, 4, 5]))
    assert process_session(receiver, ledger.apply) == 2
    assert ledger.applied["t1"] == [4, 5]
    assert len(receiver.completed) == 3  # the duplicate is completed, not left to be redelivered


def test_poison_in_a_session_is_dead_lettered_and_the_rest_continue() -> None:
    ledger = InMemoryLedger()
    bodies = _bodies("t1", [1, 2])
    bad = json.loads(bodies[1])
    bad["payload"]["sequence"] = "two"
    mixed = [bodies[0], json.dumps(bad).encode(), *_bodies("t1", [3])]
    receiver = FakeSessionReceiver(FakeSession("t1"), mixed)
    process_session(receiver, ledger.apply)
    assert ledger.applied["t1"] == [1, 3]
    assert receiver.dead_lettered[0][1] == "InvalidField"


def test_sequence_guard_allows_gaps_but_never_going_back() -> None:
    guard = SequenceGuard()
    decisions = []
    for seq in [1, 2, 5, 4, 6]:
        write = OrderedWrite("t", seq, f"m{seq}")
        ok = guard.should_apply(write)
        decisions.append(ok)
        if ok:
            guard.applied(write)
    assert decisions == [True, True, True, False, True]


class RecordingActions:
    def __init__(self) -> None:
        self.calls: list = []

    def complete(self, message: object) -> None:
        self.calls.append("complete")

    def abandon(self, message: object) -> None:
        self.calls.append("abandon")

    def deadletter(self, message: object, deadletter_reason=None, deadletter_error_description=None) -> None:
        self.calls.append(("deadletter", deadletter_reason, deadletter_error_description))


class GuardStore:
    """``SequenceGuard`` + ledger: the same decisions the table store makes, in memory."""

    def __init__(self) -> None:
        self.guard = SequenceGuard()
        self.ledger = InMemoryLedger()

    def apply(self, write: OrderedWrite) -> str:
        if not self.guard.should_apply(write):
            return "duplicate"
        self.ledger.apply(write)
        self.guard.applied(write)
        return "applied"


def _received(body: bytes, session_id: str | None) -> ServiceBusReceivedMessage:
    from azure.servicebus._pyamqp.message import Properties

    return ServiceBusReceivedMessage(Message(data=[body], properties=Properties(group_id=session_id)),
                                     receiver=None)


def test_settle_ordered_applies_completes_and_dead_letters() -> None:
    from consumers.ordered import settle_ordered

    store, actions = GuardStore(), RecordingActions()
    bodies = _bodies("t1", [1, 2])
    outcomes = [settle_ordered(store, _received(b, "t1"), actions) for b in (bodies[0], bodies[1], bodies[0])]
    assert outcomes == ["applied", "applied", "duplicate"]
    assert store.ledger.applied["t1"] == [1, 2]
    assert actions.calls == ["complete"] * 3
    # a write for another tenant in this session would not be ordered with that tenant's writes
    assert settle_ordered(store, _received(_bodies("t2", [3])[0], "t1"), actions) == "dead-lettered"
    assert actions.calls[-1][:2] == ("deadletter", "InvalidField") and "session id" in actions.calls[-1][2]
    assert settle_ordered(store, _received(b"not json", "t1"), actions) == "dead-lettered"
    assert actions.calls[-1][1] == "InvalidJson"


def test_settle_ordered_abandons_when_the_store_fails() -> None:
    from consumers.ordered import settle_ordered

    class Down:
        def apply(self, write: OrderedWrite) -> str:
            raise ConnectionError("table unreachable")

    actions = RecordingActions()
    try:
        settle_ordered(Down(), _received(_bodies("t1", [1])[0], "t1"), actions)
    except ConnectionError:
        pass
    else:
        raise AssertionError("the failure must reach the host (it counts the invocation as failed)")
    assert actions.calls == ["abandon"]


def test_tenant_sequence_increases_per_tenant_even_when_the_clock_does_not() -> None:
    from consumers.ordered import TenantSequence

    now = [1000.0]
    sequences = TenantSequence(clock=lambda: now[0])
    assert [sequences.next("a"), sequences.next("a"), sequences.next("b")] == [1_000_000, 1_000_001, 1_000_000]
    now[0] = 999.0  # the clock stepped back: still above what was given out
    assert sequences.next("a") == 1_000_002
    now[0] = 2000.0
    assert sequences.next("a") == 2_000_000
