"""The leveling worker and its settlement decisions, with an in-memory sink and recorded actions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Message

from consumers.leveling import LevelingWorker, Outcome, settle
from consumers.settlement import ReceiverActions, body_bytes
from consumers.table_sink import InMemorySink
from shared.contract import ContractMessage, PoisonMessageError
from shared.rate_limit import TokenBucket


class Actions:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def complete(self, message: object) -> None:
        self.calls.append(("complete", message))

    def abandon(self, message: object) -> None:
        self.calls.append(("abandon", message))

    def deadletter(self, message: object, deadletter_reason: str | None = None,
                   deadletter_error_description: str | None = None) -> None:
        self.calls.append(("deadletter", message, deadletter_reason, deadletter_error_description))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _leveling_body(message_id: str = "m-1", tenant: str = "tenant-1") -> bytes:
    return ContractMessage(message_id, tenant, "Low", datetime(2026, 1, 1, tzinfo=UTC), {"i": 1},
                           {"consumer": "consumer_low"}).to_json().encode()


def _sdk_message(body: bytes) -> ServiceBusReceivedMessage:
    """A real SDK received message (as the Functions SDK-type binding delivers), built offline."""
    return ServiceBusReceivedMessage(Message(data=[body]), receiver=None)


def test_a_good_message_is_written_and_completed() -> None:
    sink, actions = InMemorySink(), Actions()
    message = _sdk_message(_leveling_body())
    assert settle(LevelingWorker(sink), message, actions) is Outcome.COMPLETED
    assert actions.calls == [("complete", message)]
    assert list(sink.rows) == [("tenant-1", "m-1")]


def test_redelivery_does_not_duplicate_the_row() -> None:
    sink = InMemorySink()
    worker = LevelingWorker(sink)
    for _ in range(3):
        settle(worker, _sdk_message(_leveling_body()), Actions())
    assert sink.writes == 3 and len(sink.rows) == 1


@pytest.mark.parametrize(
    ("body", "reason", "fragment"),
    [
        (b"{{{", "InvalidJson", "not JSON"),
        (b'{"message_id": "m"}', "MissingField", "tenant_id, priority, created_at, payload"),
        (ContractMessage("m", "t", "High", datetime(2026, 1, 1, tzinfo=UTC), {}).to_json().encode(),
         "MissingField", "'result'"),
        (_leveling_body(tenant="a/b"), "InvalidField", "Table Storage forbids"),
    ],
)
def test_poison_is_dead_lettered_at_once_with_the_reason(body: bytes, reason: str, fragment: str) -> None:
    sink, actions = InMemorySink(), Actions()
    clock = FakeClock()
    limiter = TokenBucket(1, 1, clock=clock, sleep=clock.sleep)
    limiter.try_acquire()  # an empty bucket: poison must not wait for (or spend) a write token
    message = _sdk_message(body)
    assert settle(LevelingWorker(sink, limiter), message, actions) is Outcome.DEAD_LETTERED
    ((verb, settled, got_reason, description),) = actions.calls
    assert (verb, settled, got_reason) == ("deadletter", message, reason)
    assert fragment in description
    assert sink.writes == 0 and clock.now == 0.0


def test_a_failed_write_is_abandoned_and_raised_for_a_retry() -> None:
    class BrokenSink:
        def upsert(self, message: ContractMessage) -> None:
            raise ConnectionError("table unavailable")

    actions = Actions()
    message = _sdk_message(_leveling_body())
    with pytest.raises(ConnectionError):
        settle(LevelingWorker(BrokenSink()), message, actions)
    assert actions.calls == [("abandon", message)]


def test_writes_are_paced_by_the_limiter() -> None:
    clock = FakeClock()
    sink = InMemorySink()
    worker = LevelingWorker(sink, TokenBucket(rate=5, capacity=1, clock=clock, sleep=clock.sleep))
    for i in range(11):
        worker.handle(_leveling_body(message_id=f"m-{i}"))
    assert len(sink.rows) == 11
    assert clock.now == pytest.approx(2.0)  # 1 immediately, 10 more at 5/s


def test_body_bytes_accepts_every_shape_a_host_may_deliver() -> None:
    from azure.functions.servicebus import ServiceBusMessage

    raw = _leveling_body()
    assert body_bytes(raw) == raw
    assert body_bytes(raw.decode()) == raw
    assert body_bytes(_sdk_message(raw)) == raw
    fn_message = ServiceBusMessage(body=raw, message_id="m", application_properties={}, user_properties={})
    assert body_bytes(fn_message) == raw


def test_receiver_actions_map_to_the_sdk_receiver() -> None:
    class Receiver:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def complete_message(self, m: object) -> None:
            self.calls.append(("complete", m))

        def abandon_message(self, m: object) -> None:
            self.calls.append(("abandon", m))

        def dead_letter_message(self, m: object, reason: str | None = None,
                                error_description: str | None = None) -> None:
            self.calls.append(("dead_letter", m, reason, error_description))

    receiver = Receiver()
    settle(LevelingWorker(InMemorySink()), _sdk_message(b"nope"), ReceiverActions(receiver))
    assert receiver.calls[0][0] == "dead_letter" and receiver.calls[0][2] == "InvalidJson"


def test_poison_error_carries_reason_and_description() -> None:
    error = PoisonMessageError("MissingField", "missing field(s): payload")
    assert str(error) == "MissingField: missing field(s): payload"
