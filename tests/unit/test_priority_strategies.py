"""The priority strategies' pieces without a broker: routing per strategy, the aging claim, the strict
gate, and which functions each strategy registers in which app."""

from __future__ import annotations

import pytest
from azure.servicebus.exceptions import MessageNotFoundError

import function_app
from consumers.aging import claim
from consumers.strict import HighFirstGate, StarvedError
from devhost.discovery import discover
from sender.messages import build_messages
from sender.routing import route
from shared.operations import OPERATIONS
from shared.settings import SettingsError, load_app, parse_strategy
from shared.topology import AGED_FROM_PROPERTY, AGING_SEQUENCE_PROPERTY, HIGH, LOW, PRIORITY_PROPERTY


class FakeSender:
    def __init__(self) -> None:
        self.sent: list = []
        self.scheduled: list = []
        self.cancelled: list[int] = []
        self.batches = 0

    def create_message_batch(self) -> list:
        return _Batch()

    def send_messages(self, batch) -> None:
        self.sent.extend(batch)

    def schedule_messages(self, messages, at) -> list[int]:
        start = 100 + len(self.scheduled)
        self.scheduled.extend((m, at) for m in messages)
        return list(range(start, start + len(messages)))

    def cancel_scheduled_messages(self, number: int) -> None:
        self.cancelled.append(number)


class _Batch(list):
    def add_message(self, message) -> None:
        self.append(message)


def _props(message) -> dict:
    return dict(message.application_properties or {})


def test_fifo_sends_everything_to_the_one_queue() -> None:
    topic, fifo = FakeSender(), FakeSender()
    route("fifo", build_messages(2, 3, ["t"]), topic_sender=lambda: topic, fifo_sender=lambda: fifo, aging_after=5)
    assert len(fifo.sent) == 5 and topic.sent == [] and topic.scheduled == []


@pytest.mark.parametrize("strategy", ["separate", "shared", "strict"])
def test_the_topic_strategies_send_to_the_topic_without_copies(strategy: str) -> None:
    topic, fifo = FakeSender(), FakeSender()
    route(strategy, build_messages(2, 3, ["t"]), topic_sender=lambda: topic, fifo_sender=lambda: fifo, aging_after=5)
    assert len(topic.sent) == 5 and topic.scheduled == [] and fifo.sent == []
    assert all(AGING_SEQUENCE_PROPERTY not in _props(m) for m in topic.sent)


def test_aging_schedules_a_promoted_copy_of_each_low_message_and_tags_the_original() -> None:
    topic = FakeSender()
    messages = build_messages(2, 3, ["t"])
    route("aging", messages, topic_sender=lambda: topic, fifo_sender=lambda: None, aging_after=30)
    copies = [m for m, _ in topic.scheduled]
    assert len(copies) == 3 and len({at for _, at in topic.scheduled}) == 1
    assert all(_props(c)[PRIORITY_PROPERTY] == HIGH and _props(c)[AGED_FROM_PROPERTY] == LOW for c in copies)
    low = [m for m in topic.sent if _props(m)[PRIORITY_PROPERTY] == LOW]
    assert [_props(m)[AGING_SEQUENCE_PROPERTY] for m in low] == ["100", "101", "102"]  # strings: 64-bit numbers
    assert [c.message_id for c in copies] == [m.message_id for m in low]  # the same message, downstream
    assert all(b"".join(c.body) == b"".join(m.body) for c, m in zip(copies, low, strict=True))
    assert all(AGING_SEQUENCE_PROPERTY not in _props(m) for m in topic.sent if _props(m)[PRIORITY_PROPERTY] == HIGH)


def test_the_aging_claim_cancels_the_copy_or_yields_to_the_high_pool() -> None:
    opened: list[FakeSender] = []

    def factory() -> FakeSender:
        opened.append(FakeSender())
        return opened[-1]

    assert claim({PRIORITY_PROPERTY: LOW}, factory) and opened == []  # no copy: no sender, no operation
    assert claim({AGING_SEQUENCE_PROPERTY.encode(): b"7"}, factory) and opened[-1].cancelled == [7]

    class Gone(FakeSender):
        def cancel_scheduled_messages(self, number: int) -> None:
            raise MessageNotFoundError(message="Messages not found. Missing sequence numbers: 7")

    assert claim({AGING_SEQUENCE_PROPERTY: "7"}, Gone) is False


def test_the_strict_gate_waits_for_high_shares_its_peeks_and_gives_up_after_the_hold() -> None:
    now = [0.0]
    answers = iter([True, True, True, False])
    peeks = []

    def pending() -> bool:
        peeks.append(now[0])
        return next(answers)

    def sleep(seconds: float) -> None:
        now[0] += seconds

    gate = HighFirstGate(pending, interval=1.0, clock=lambda: now[0], sleep=sleep)
    before = OPERATIONS.snapshot().get("peek", 0)
    assert gate.wait_for_high_idle(max_hold=10) == 3.0
    assert peeks == [0.0, 1.0, 2.0, 3.0] and OPERATIONS.snapshot()["peek"] - before == 4
    assert gate.wait_for_high_idle(max_hold=10) == 0.0 and len(peeks) == 4  # within the interval: no new peek

    starving = HighFirstGate(lambda: True, interval=1.0, clock=lambda: now[0], sleep=sleep)
    with pytest.raises(StarvedError):
        starving.wait_for_high_idle(max_hold=5)


@pytest.mark.parametrize(("strategy", "high_app", "low_app"), [
    ("separate", ["consumer_high"], ["consumer_low"]),
    ("aging", ["consumer_high"], ["consumer_low"]),
    ("shared", ["consumer_high", "consumer_low"], []),
    ("strict", ["consumer_high", "consumer_low"], []),
    ("fifo", ["consumer_fifo"], []),
])
def test_each_strategy_registers_its_functions_in_the_consumer_apps(strategy: str, high_app: list[str],
                                                                    low_app: list[str]) -> None:
    names = {role: sorted(spec.name for spec in discover(function_app.create_app([role], strategy=strategy), role))
             for role in ("consumer-high", "consumer-low")}
    assert names == {"consumer-high": high_app, "consumer-low": low_app}
    sender = discover(function_app.create_app(["sender"], strategy=strategy), "sender")
    assert [s.name for s in sender] == ["sender"]


def test_the_strategy_and_slo_settings() -> None:
    settings = load_app({})
    assert (settings.priority_strategy, settings.slo_high_seconds) == ("separate", 10.0)  # the pattern's 10 s
    assert load_app({"PRIORITY_STRATEGY": " Aging "}).priority_strategy == "aging"
    assert load_app({"SLO_HIGH_SECONDS": "2.5"}).slo_seconds(HIGH) == 2.5
    with pytest.raises(SettingsError, match="PRIORITY_STRATEGY must be one of"):
        parse_strategy("lifo")
    with pytest.raises(SettingsError, match="SLO_LOW_SECONDS"):
        load_app({"SLO_LOW_SECONDS": "0"})
