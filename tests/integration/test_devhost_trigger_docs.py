"""devhost's Service Bus trigger and output binding, checked against the Azure Functions docs.

Each test names the page it follows. The real azure-servicebus SDK talks to sbemulator (started by
the host, in memory, on a free port); each test has its own topology and host.json under tmp_path.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from devhost.host import Host, HostOptions
from devhost.scale import RoleScale
from shared.settings import SettingsError
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def _options(tmp_path: Path, app: func.FunctionApp, queues: list[dict[str, Any]],
             service_bus: dict[str, Any] | None = None) -> HostOptions:
    topology = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": []}],
                               "Logging": {"Type": "Console"}}}
    (tmp_path / "topology.json").write_text(json.dumps(topology))
    (tmp_path / "host.json").write_text(json.dumps(
        {"version": "2.0", "extensions": {"serviceBus": service_bus or {}}}))
    return HostOptions(roles=(), use_local_settings=False, env={}, topology=tmp_path / "topology.json",
                       host_json=tmp_path / "host.json",
                       extra_apps={"test": (app, RoleScale("test", 1, 16))})


def _queue(name: str, **properties: Any) -> dict[str, Any]:
    return {"Name": name, "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 10, **properties}}


def _active(host: Host, queue: str) -> list[Any]:
    with host.service_bus_client() as client, client.get_queue_receiver(queue) as receiver:
        return receiver.peek_messages(max_message_count=50)


def _dead_lettered(host: Host, queue: str) -> list[Any]:
    with host.service_bus_client() as client, client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        return dlq.peek_messages(max_message_count=50)


# "Azure Service Bus trigger for Azure Functions" (Python v2: cardinality="many" passes a list of
# messages) and "host.json settings" of the Service Bus extension: at most maxMessageBatchSize per call;
# the trigger waits up to maxBatchWaitTime for minMessageBatchSize messages, then calls with a partial
# batch; with autoCompleteMessages the messages are completed after the function succeeded.
def test_a_batch_trigger_gets_lists_of_at_most_max_message_batch_size(tmp_path: Path) -> None:
    app = func.FunctionApp()
    batches: list[list[str]] = []

    @app.function_name("batch")
    @app.service_bus_queue_trigger(arg_name="messages", queue_name="batch", connection="ServiceBusConnection",
                                   cardinality="many")
    def batch(messages: list[func.ServiceBusMessage]) -> None:
        batches.append([m.get_body().decode() for m in messages])

    options = _options(tmp_path, app, [_queue("batch")],
                       {"maxMessageBatchSize": 5, "minMessageBatchSize": 5, "maxBatchWaitTime": "00:00:02"})
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("batch") as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(8)])
        assert wait_until(lambda: sum(map(len, batches)) >= 8, 30)
        assert wait_until(lambda: not _active(host, "batch"), 10)  # completed, not left locked
    assert [len(b) for b in batches] == [5, 3]  # a full batch, then a partial one after maxBatchWaitTime
    assert sorted(int(body) for b in batches for body in b) == list(range(8))


# Same pages: a batch whose function raises is abandoned as a whole ("PeekLock behavior": Abandon when
# the function fails), so every message comes back with its delivery count raised, and Service Bus, not
# the host, dead-letters them after MaxDeliveryCount deliveries ("Poison messages").
def test_a_failing_batch_is_abandoned_and_dead_lettered_by_service_bus(tmp_path: Path) -> None:
    app = func.FunctionApp()
    deliveries: list[list[int]] = []

    @app.function_name("batch_fails")
    @app.service_bus_queue_trigger(arg_name="messages", queue_name="flaky", connection="ServiceBusConnection",
                                   cardinality="many")
    def batch_fails(messages: list[func.ServiceBusMessage]) -> None:
        deliveries.append(sorted(m.delivery_count or 0 for m in messages))
        raise ValueError("the whole batch fails")

    options = _options(tmp_path, app, [_queue("flaky", MaxDeliveryCount=2)],
                       {"maxMessageBatchSize": 10, "minMessageBatchSize": 3, "maxBatchWaitTime": "00:00:02"})
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("flaky") as sender:
            sender.send_messages([ServiceBusMessage(str(i), message_id=f"m-{i}") for i in range(3)])
        assert wait_until(lambda: len(_dead_lettered(host, "flaky")) == 3, 30)
        dead = _dead_lettered(host, "flaky")
    assert deliveries[:2] == [[1, 1, 1], [2, 2, 2]]
    assert {m.message_id for m in dead} == {"m-0", "m-1", "m-2"}
    assert {m.dead_letter_reason for m in dead} == {"MaxDeliveryCountExceeded"}


# "Azure Service Bus trigger for Azure Functions", "PeekLock behavior": "If the function runs longer than
# the PeekLock timeout, the lock is automatically renewed" (up to maxAutoLockRenewalDuration).
def test_the_lock_is_renewed_while_a_long_function_runs(tmp_path: Path) -> None:
    app = func.FunctionApp()
    deliveries: list[int] = []

    @app.function_name("slow")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="slow", connection="ServiceBusConnection")
    def slow(message: func.ServiceBusMessage) -> None:
        deliveries.append(message.delivery_count or 0)
        time.sleep(4)  # twice the lock duration

    options = _options(tmp_path, app, [_queue("slow", LockDuration="PT2S")],
                       {"maxAutoLockRenewalDuration": "00:01:00"})
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("slow") as sender:
            sender.send_messages(ServiceBusMessage(b"x"))
        assert wait_until(lambda: host.stats.by_function().get("slow", {}).get("succeeded", 0) >= 1, 30)
        assert wait_until(lambda: not _active(host, "slow"), 10)
        failed = host.stats.by_function()["slow"]["failed"]
    assert deliveries == [1] and failed == 0  # completed on the first delivery: its lock did not lapse


# "Azure Service Bus output binding for Azure Functions": the messages set on the output are sent when the
# function returns (a list sends several); a function that raises sends nothing and its trigger message is
# abandoned.
def test_output_messages_are_sent_on_success_only(tmp_path: Path) -> None:
    app = func.FunctionApp()
    lock = threading.Lock()
    calls: list[str] = []

    @app.function_name("fan_out")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="inbox", connection="ServiceBusConnection")
    @app.service_bus_queue_output(arg_name="out", queue_name="outbox", connection="ServiceBusConnection")
    def fan_out(message: func.ServiceBusMessage, out: func.Out[list[str]]) -> None:
        body = message.get_body().decode()
        with lock:
            calls.append(body)
        out.set([f"{body}-1", f"{body}-2"])
        if body == "bad":
            raise ValueError("fails after setting its output")

    options = _options(tmp_path, app, [_queue("inbox", MaxDeliveryCount=1), _queue("outbox")])
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("inbox") as sender:
            sender.send_messages([ServiceBusMessage("bad"), ServiceBusMessage("good")])
        assert wait_until(lambda: len(_dead_lettered(host, "inbox")) == 1 and len(calls) == 2, 30)
        assert wait_until(lambda: len(_active(host, "outbox")) >= 2, 10)
        sent = sorted(str(m) for m in _active(host, "outbox"))
    assert sent == ["good-1", "good-2"]


# "Azure Service Bus trigger for Azure Functions", "Message metadata": DeliveryCount is the number of
# deliveries, 1 on the first one (the .NET client the host runs on reports it so; the AMQP header the
# Python SDK exposes counts the prior ones), with the message's id, session, properties and times.
def test_the_trigger_passes_the_documented_metadata(tmp_path: Path) -> None:
    app = func.FunctionApp()
    seen: list[func.ServiceBusMessage] = []

    @app.function_name("meta")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="meta", connection="ServiceBusConnection",
                                   is_sessions_enabled=True)
    def meta(message: func.ServiceBusMessage) -> None:
        seen.append(message)

    options = _options(tmp_path, app, [_queue("meta", RequiresSession=True)], {"sessionIdleTimeout": "00:00:01"})
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("meta") as sender:
            sender.send_messages(ServiceBusMessage(
                b"{}", message_id="id-1", session_id="s-1", correlation_id="c-1", subject="greeting",
                content_type="application/json", application_properties={"tenant": "t-7", "attempt": 3}))
        assert wait_until(lambda: bool(seen), 30)
    (message,) = seen
    assert (message.message_id, message.session_id, message.correlation_id, message.label,
            message.content_type) == ("id-1", "s-1", "c-1", "greeting", "application/json")
    assert message.delivery_count == 1
    assert message.user_properties == {"tenant": "t-7", "attempt": 3}
    assert message.enqueued_time_utc is not None and (message.sequence_number or 0) >= 1
    assert message.dead_letter_reason is None and message.lock_token


# "Azure Functions Python developer guide", Outputs: "To use the return value of a function as the value
# of an output binding, the name property of the binding should be set to $return" (arg_name="$return").
def test_a_return_value_output_binding_sends_what_the_function_returns(tmp_path: Path) -> None:
    app = func.FunctionApp()

    @app.function_name("echo")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="inbox", connection="ServiceBusConnection")
    @app.service_bus_queue_output(arg_name="$return", queue_name="outbox", connection="ServiceBusConnection")
    def echo(message: func.ServiceBusMessage) -> str:
        return f"echo {message.get_body().decode()}"

    options = _options(tmp_path, app, [_queue("inbox"), _queue("outbox")])
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("inbox") as sender:
            sender.send_messages(ServiceBusMessage("hi"))
        assert wait_until(lambda: bool(_active(host, "outbox")), 30)
        sent = [str(m) for m in _active(host, "outbox")]
        failed = host.stats.by_function()["echo"]["failed"]
    assert sent == ["echo hi"] and failed == 0


# "host.json settings" (Service Bus bindings page): maxAutoLockRenewalDuration "only applies for functions
# that receive a single message at a time and doesn't apply to functions receiving a batch of messages":
# a batch that outlives its lock loses it and comes back with a higher delivery count.
def test_a_batch_is_not_lock_renewed(tmp_path: Path) -> None:
    app = func.FunctionApp()
    deliveries: list[list[int]] = []

    @app.function_name("slow_batch")
    @app.service_bus_queue_trigger(arg_name="messages", queue_name="slow", connection="ServiceBusConnection",
                                   cardinality="many")
    def slow_batch(messages: list[func.ServiceBusMessage]) -> None:
        deliveries.append([m.delivery_count or 0 for m in messages])
        if len(deliveries) == 1:
            time.sleep(3)  # past the 1 s lock: without renewal the lock lapses

    options = _options(tmp_path, app, [_queue("slow", LockDuration="PT1S")],
                       {"maxMessageBatchSize": 10, "maxAutoLockRenewalDuration": "00:01:00"})
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("slow") as sender:
            sender.send_messages(ServiceBusMessage(b"x"))
        assert wait_until(lambda: len(deliveries) >= 2, 30)
        assert wait_until(lambda: not _active(host, "slow"), 10)
    # the lapsed lock counted a delivery (more than one if the redelivery waited in the receiver's buffer
    # while the first run still slept); a later run completed it
    assert deliveries[0] == [1] and deliveries[1][0] >= 2


# "Azure Service Bus trigger for Azure Functions": "When the Connection property isn't defined, Functions
# looks for an app setting named AzureWebJobsServiceBus".
def test_a_binding_without_a_connection_uses_azure_web_jobs_service_bus(tmp_path: Path) -> None:
    app = func.FunctionApp()

    @app.function_name("default_connection")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="inbox", connection="")
    @app.service_bus_queue_output(arg_name="out", queue_name="outbox", connection="")
    def default_connection(message: func.ServiceBusMessage, out: func.Out[str]) -> None:
        out.set(message.get_body().decode().upper())

    options = _options(tmp_path, app, [_queue("inbox"), _queue("outbox")])
    with Host(options) as host:  # the embedded emulator is offered under both names
        assert host.settings is not None
        assert host.settings.get("AzureWebJobsServiceBus") == host.settings.get("ServiceBusConnection")
        assert host.wait_connected(30)
        with host.service_bus_client("AzureWebJobsServiceBus") as client, client.get_queue_sender("inbox") as sender:
            sender.send_messages(ServiceBusMessage("hi"))
        assert wait_until(lambda: bool(_active(host, "outbox")), 30)
        assert [str(m) for m in _active(host, "outbox")] == ["HI"]


def test_a_missing_azure_web_jobs_service_bus_is_named(tmp_path: Path, sb_connection_string: str) -> None:
    app = func.FunctionApp()

    @app.function_name("default_connection")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="inbox", connection="")
    def default_connection(message: func.ServiceBusMessage) -> None: ...

    options = _options(tmp_path, app, [_queue("inbox")])
    options.overrides["ServiceBusConnection"] = sb_connection_string  # set, but not the default name
    with pytest.raises(SettingsError, match="'AzureWebJobsServiceBus' is not set"):
        Host(options).start()


# "Azure Service Bus trigger for Azure Functions" (Python, SDK types): with autoCompleteMessages on, the
# host completes what the function left unsettled; a message the function settled itself through
# ServiceBusMessageActions is left alone (no second settlement, no receiver error).
def test_a_message_settled_by_the_function_is_not_settled_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = func.FunctionApp()
    handled: list[str] = []

    @app.function_name("self_settling")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="inbox", connection="ServiceBusConnection")
    def self_settling(message: servicebus.ServiceBusReceivedMessage,
                      message_actions: servicebus.ServiceBusMessageActions) -> None:
        handled.append(str(message))
        message_actions.deadletter(message, deadletter_reason="Rejected", deadletter_error_description="by app")

    caplog.set_level(logging.WARNING, logger="devhost")
    options = _options(tmp_path, app, [_queue("inbox")])
    with Host(options) as host:
        assert host.wait_connected(30)
        with host.service_bus_client() as client, client.get_queue_sender("inbox") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        assert wait_until(lambda: len(_dead_lettered(host, "inbox")) == 2, 30)
        dead = _dead_lettered(host, "inbox")
    assert sorted(handled) == ["a", "b"]  # each once: nothing was abandoned and redelivered
    assert {m.dead_letter_reason for m in dead} == {"Rejected"}
    assert not [r for r in caplog.records if r.name == "devhost" and r.levelno >= logging.WARNING]
