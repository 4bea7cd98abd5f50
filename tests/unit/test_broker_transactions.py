"""The transaction coordinator as a component: staged work, all-or-nothing commit, scope, timeout.

Driven through its seam (a fake ``TransactionalBroker`` and fake staged settlements) with a manual
clock; the protocol and SDK sides are in tests/integration/test_transactions_amqp.py and the Java suite.
"""

from __future__ import annotations

from typing import Any

import pytest

from sbemulator.broker.errors import BrokerError, InvalidOperationError, MessageLockLostError
from sbemulator.broker.transactions import (
    TransactionCoordinator,
    TransactionRollbackError,
    TransactionTimeoutError,
    TransactionUnknownError,
    top_level_entity,
)
from sbemulator.broker.unit_of_work import UnitOfWork


class FakeBroker:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any]]] = []
        self.refuse: set[str] = set()

    def check_send(self, path: str, messages: Any) -> None:
        if path in self.refuse:
            raise BrokerError(f"{path} refuses", "com.microsoft:entity-disabled")

    def send(self, path: str, messages: Any) -> None:
        self.sent.append((path, list(messages)))

    def withdraw(self, path: str, messages: Any) -> None:
        self.sent.remove((path, list(messages)))


class FakeSettlement:
    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name
        self.lock_lost = False

    def check(self) -> None:
        if self.lock_lost:
            raise MessageLockLostError("The lock supplied has expired.")

    def apply(self) -> None:
        self.log.append(self.name)

    def undo_point(self) -> Any:
        return lambda: self.log.remove(self.name)


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup() -> tuple[TransactionCoordinator, FakeBroker, Clock]:
    broker, clock = FakeBroker(), Clock()
    return TransactionCoordinator(broker, timeout_s=120, clock=clock), broker, clock


def test_commit_applies_everything_staged(setup: Any) -> None:
    coordinator, broker, _ = setup
    log: list[str] = []
    txn = coordinator.declare()
    coordinator.stage_settlement(txn, "orders", FakeSettlement(log, "complete-1"))
    coordinator.stage_send(txn, "orders", ["m1"])
    assert broker.sent == [] and log == []
    coordinator.discharge(txn, fail=False)
    assert broker.sent == [("orders", ["m1"])] and log == ["complete-1"]
    with pytest.raises(TransactionUnknownError):
        coordinator.discharge(txn, fail=False)


def test_a_lock_lost_before_the_commit_applies_nothing(setup: Any) -> None:
    coordinator, broker, _ = setup
    log: list[str] = []
    first, second = FakeSettlement(log, "a"), FakeSettlement(log, "b")
    txn = coordinator.declare()
    coordinator.stage_send(txn, "orders", ["m1"])
    coordinator.stage_settlement(txn, "orders", first)
    coordinator.stage_settlement(txn, "orders", second)
    second.lock_lost = True
    with pytest.raises(TransactionRollbackError, match="lock supplied has expired"):
        coordinator.discharge(txn, fail=False)
    assert broker.sent == [] and log == []


def test_rollback_applies_nothing(setup: Any) -> None:
    coordinator, broker, _ = setup
    txn = coordinator.declare()
    coordinator.stage_send(txn, "orders", ["m1"])
    coordinator.discharge(txn, fail=True)
    assert broker.sent == []


def test_a_refused_operation_dooms_the_commit(setup: Any) -> None:
    coordinator, broker, _ = setup
    txn = coordinator.declare()
    coordinator.stage_send(txn, "orders", ["m1"])
    broker.refuse.add("orders")
    with pytest.raises(BrokerError, match="orders refuses"):
        coordinator.stage_send(txn, "orders", ["m2"])  # the same check a send makes, at once
    broker.refuse.clear()
    with pytest.raises(TransactionRollbackError, match="orders refuses"):  # m1 is not sent either
        coordinator.discharge(txn, fail=False)
    assert broker.sent == []


def test_scope_is_the_top_level_entity_with_send_via_and_session_exceptions(setup: Any) -> None:
    coordinator, _, _ = setup
    session, other_session = object(), object()
    txn = coordinator.declare()
    coordinator.stage_settlement(txn, "Events/Subscriptions/All", FakeSettlement([], "s"), session)
    coordinator.stage_send(txn, "events", ["same topic"], None, other_session)
    coordinator.stage_send(txn, "queue-b", ["via the topic"], "events", other_session)
    coordinator.stage_send(txn, "queue-c", ["same session"], None, session)
    with pytest.raises(InvalidOperationError):
        coordinator.stage_settlement(txn, "queue-d", FakeSettlement([], "d"), session)  # receivers: no via
    assert top_level_entity("q/$DeadLetterQueue") == "q"


def test_timeout_rolls_back_and_is_reported_once(setup: Any) -> None:
    coordinator, broker, clock = setup
    txn = coordinator.declare()
    coordinator.stage_send(txn, "orders", ["m1"])
    assert coordinator.next_timeout() == 220.0
    clock.now += 121
    with pytest.raises(TransactionTimeoutError):
        coordinator.stage_send(txn, "orders", ["m2"])
    with pytest.raises(TransactionTimeoutError):
        coordinator.discharge(txn, fail=False)
    with pytest.raises(TransactionUnknownError):
        coordinator.discharge(txn, fail=False)
    assert broker.sent == [] and coordinator.next_timeout() is None


def test_connection_loss_rolls_back_everything_open(setup: Any) -> None:
    coordinator, broker, _ = setup
    txns = [coordinator.declare() for _ in range(3)]
    for txn in txns:
        coordinator.stage_send(txn, "orders", [txn])
    coordinator.rollback_all()
    assert len(coordinator) == 0
    for txn in txns:
        with pytest.raises(TransactionUnknownError):
            coordinator.discharge(txn, fail=False)
    assert broker.sent == []


def test_what_a_commit_applied_can_be_taken_back_as_a_whole(setup: Any) -> None:
    """A commit whose write the store refuses is taken back (gateway: CoordinatorLink._discharge, through
    broker/unit_of_work.apply_stored): every send withdrawn and every settlement undone, newest first."""
    coordinator, broker, _ = setup
    log: list[str] = []
    txn = coordinator.declare()
    coordinator.stage_settlement(txn, "orders", FakeSettlement(log, "complete-1"))
    coordinator.stage_send(txn, "orders", ["m1"])
    coordinator.stage_settlement(txn, "orders", FakeSettlement(log, "complete-2"))
    work = UnitOfWork()
    coordinator.discharge(txn, fail=False, work=work)
    assert broker.sent == [("orders", ["m1"])] and log == ["complete-1", "complete-2"]
    assert work.changed
    work.take_back()
    assert broker.sent == [] and log == []
