"""Invoke the registered user functions the way the host would, with the binding objects the Python
library defines, and check they delegate to sender/ and consumers/ correctly. Service Bus and Table
Storage are stand-ins here (their real behaviour is covered by the Azurite and emulator tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import azure.functions as func
import pytest
from azure.functions.servicebus import ServiceBusMessage
from azure.functions.timer import TimerRequest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Message

import function_app
from consumers.leveling import LevelingWorker
from consumers.table_sink import InMemorySink
from functions import runtime
from shared.contract import ContractMessage, parse_message
from shared.settings import AppSettings
from shared.write_budget import SharedWritePacer


class Out(func.Out):
    def __init__(self) -> None:
        self.value: object = None

    def set(self, val: object) -> None:
        self.value = val

    def get(self) -> object:
        return self.value


class RecordingSender:
    def __init__(self) -> None:
        self.batches: list = []

    def __enter__(self) -> RecordingSender:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def create_message_batch(self):
        from azure.servicebus import ServiceBusMessageBatch

        return ServiceBusMessageBatch(max_size_in_bytes=256 * 1024)

    def send_messages(self, batch: object) -> None:
        self.batches.append(batch)


class StandInClient:
    def __init__(self) -> None:
        self.sender = RecordingSender()
        self.queue_sender = RecordingSender()
        self.topics: list[str] = []
        self.queues: list[str] = []

    def get_topic_sender(self, topic: str) -> RecordingSender:
        self.topics.append(topic)
        return self.sender

    def get_queue_sender(self, queue: str) -> RecordingSender:
        self.queues.append(queue)
        return self.queue_sender


@pytest.fixture
def functions(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    runtime.reset()
    monkeypatch.setattr(runtime, "app_settings",
                        lambda: AppSettings(sender_batch_size=3, consumer_work_ms_high=0,
                                            consumer_work_ms_low=0))
    app = function_app.create_app(["sender", "consumer-high", "consumer-low", "leveler", "ordered"])
    yield {fn.get_function_name(): fn.get_user_function() for fn in app.get_functions()}
    runtime.reset()


def test_sender_publishes_n_high_and_n_low_to_the_topic(functions: dict, monkeypatch) -> None:
    client = StandInClient()
    monkeypatch.setattr(runtime, "service_bus", lambda: client)
    functions["sender"](TimerRequest(past_due=False))
    assert client.topics == ["messages"]
    (batch,) = client.sender.batches
    priorities = [m.application_properties["Priority"] for m in batch._messages]
    assert sorted(priorities) == ["High"] * 3 + ["Low"] * 3


def test_sender_feeds_one_ordered_write_per_tenant_per_tick(functions: dict, monkeypatch) -> None:
    client = StandInClient()
    monkeypatch.setattr(runtime, "service_bus", lambda: client)
    functions["sender"](TimerRequest(past_due=False))
    functions["sender"](TimerRequest(past_due=False))
    assert client.queues == ["ordered-writes"]
    first, second = client.queue_sender.batches
    assert [m.session_id for m in first] == list(runtime.DEFAULT_TENANTS)
    for before, after in zip(first, second, strict=True):
        body_before, body_after = (json.loads(b"".join(m.body)) for m in (before, after))
        assert body_after["tenant_id"] == body_before["tenant_id"] == after.session_id
        assert body_after["payload"]["sequence"] > body_before["payload"]["sequence"]


def test_ordered_writer_applies_new_writes_and_completes_duplicates(functions: dict, monkeypatch) -> None:
    from consumers.ordered import build_ordered_messages

    applied: list = []

    class Store:
        def apply(self, write: object) -> str:
            if write in applied:
                return "duplicate"
            applied.append(write)
            return "applied"

    class Actions:
        calls: list = []

        def complete(self, m: object) -> None:
            self.calls.append("complete")

        def abandon(self, m: object) -> None:
            self.calls.append("abandon")

        def deadletter(self, m: object, deadletter_reason=None, deadletter_error_description=None) -> None:
            self.calls.append(("deadletter", deadletter_reason))

    monkeypatch.setattr(runtime, "ordered_store", lambda: Store())
    (sent,) = build_ordered_messages("tenant-3", ["v"], start_sequence=4)
    received = ServiceBusReceivedMessage(Message(data=[b"".join(sent.body)], properties=None), receiver=None)
    actions = Actions()
    functions["ordered_writer"](message=received, message_actions=actions)
    functions["ordered_writer"](message=received, message_actions=actions)  # a redelivery
    assert [(w.tenant_id, w.sequence) for w in applied] == [("tenant-3", 4)]
    assert actions.calls == ["complete", "complete"]


@pytest.mark.parametrize("name", ["consumer_high", "consumer_low"])
def test_consumers_forward_the_processed_message_to_leveling(functions: dict, name: str) -> None:
    body = ContractMessage("m-9", "tenant-2", "High" if name == "consumer_high" else "Low",
                           datetime(2026, 1, 1, tzinfo=UTC), {"x": 1}).to_json().encode()
    message = ServiceBusMessage(body=body, message_id="m-9", application_properties={}, user_properties={},
                                enqueued_time_utc=datetime(2026, 1, 1))
    out = Out()
    functions[name](message=message, leveling=out)
    assert isinstance(out.value, str | bytes)
    forwarded = parse_message(out.value)
    assert forwarded.message_id == "m-9" and (forwarded.result or {})["consumer"] == name


def test_leveler_settles_through_the_message_actions(functions: dict, monkeypatch) -> None:
    sink = InMemorySink()
    monkeypatch.setattr(runtime, "leveling_worker", lambda: LevelingWorker(sink))
    calls: list = []

    class Actions:
        def complete(self, m: object) -> None:
            calls.append("complete")

        def abandon(self, m: object) -> None:
            calls.append("abandon")

        def deadletter(self, m: object, deadletter_reason=None, deadletter_error_description=None) -> None:
            calls.append(("deadletter", deadletter_reason))

    good = ContractMessage("m-1", "t", "Low", datetime(2026, 1, 1, tzinfo=UTC), {}, {"ok": 1}).to_json().encode()
    functions["leveler"](message=ServiceBusReceivedMessage(Message(data=[good]), receiver=None),
                         message_actions=Actions())
    functions["leveler"](message=ServiceBusReceivedMessage(Message(data=[b"{"]), receiver=None),
                         message_actions=Actions())
    assert calls == ["complete", ("deadletter", "InvalidJson")]
    assert list(sink.rows) == [("t", "m-1")]


def test_runtime_leveler_leases_from_the_app_wide_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime.reset()
    monkeypatch.setenv("TableStorageConnection", "UseDevelopmentStorage=true")
    monkeypatch.setenv("LEVELER_MAX_WRITES_PER_SECOND", "60")
    monkeypatch.setenv("LEVELER_BUDGET_TABLE", "budgetx")
    try:
        worker = runtime.leveling_worker()  # builds clients only: nothing connects yet
        assert isinstance(worker.limiter, SharedWritePacer)
        assert worker.limiter.rate == 60.0  # the whole cap: instances share it, nothing is split
        assert worker.limiter.budget.table.table_name == "budgetx"
        assert runtime.leveling_worker() is worker
    finally:
        runtime.reset()


def test_output_binding_annotation_is_a_real_type(functions: dict) -> None:
    import inspect

    params = inspect.signature(functions["consumer_high"]).parameters
    assert params["leveling"].annotation == func.Out[str]
    assert params["message"].annotation is func.ServiceBusMessage
    assert json.dumps(sorted(params))


def test_ordered_writer_is_a_session_trigger_that_settles_itself() -> None:
    app = function_app.create_app(["ordered"])
    (function,) = app.get_functions()
    declared = function.get_trigger()
    assert declared is not None
    trigger = declared.get_dict_repr()
    assert trigger["queueName"] == "ordered-writes"
    assert trigger["isSessionsEnabled"] is True and trigger["autoCompleteMessages"] is False
