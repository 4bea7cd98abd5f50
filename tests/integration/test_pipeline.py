"""The pipeline with the real SDKs against sbemulator (and Azurite for the table).

The Functions host is not in the loop here: each stage runs the same code the Functions run
(sender.publish, consumers.priority.process_message, consumers.leveling.settle) through SDK
receivers, so routing, settlement, dead-lettering and sessions are the broker's real behaviour.
Each test gets a fresh in-memory emulator loaded with the project's topology, infra/servicebus.json
(the shared ``sb_connection_string`` fixture serves the emulator's own test topology instead).
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from consumers.leveling import LevelingWorker, Outcome, settle
from consumers.ordered import InMemoryLedger, build_ordered_messages, run_ordered_worker
from consumers.priority import process_message
from consumers.settlement import ReceiverActions
from consumers.table_sink import InMemorySink, TableSink
from sbemulator import Emulator
from sender.messages import build_messages, publish
from shared.contract import ContractMessage, utc_now
from shared.leader import LeaderElector
from shared.topology import (
    QUEUE_LEADER_ELECTION,
    QUEUE_LEVELING,
    QUEUE_ORDERED_WRITES,
    SUBSCRIPTION_HIGH,
    SUBSCRIPTION_LOW,
    SUBSCRIPTION_UNROUTED,
    TOPIC,
)

WAIT = 2  # seconds a receive may wait for the next message
TOPOLOGY = Path(__file__).resolve().parents[2] / "infra" / "servicebus.json"


def _record(events: list[tuple[str, str, float]], name: str, what: str) -> None:
    events.append((name, what, time.monotonic()))


@pytest.fixture
def pipeline_connection_string() -> Iterator[str]:
    with Emulator(config=str(TOPOLOGY), in_memory=True) as emu:
        yield emu.connection_string


@pytest.fixture
def client(pipeline_connection_string: str) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(pipeline_connection_string) as sb:
        yield sb


def _receive_all(receiver: Any, expected: int, timeout: float = 15.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got += receiver.receive_messages(max_message_count=expected - len(got), max_wait_time=WAIT)
    return got


def _body(message: Any) -> bytes:
    return b"".join(message.body)


def test_priority_property_routes_to_the_subscriptions(client: ServiceBusClient) -> None:
    messages = build_messages(4, 6, ["t1", "t2"], n_invalid=2, invalid_priority="Urgent")
    with client.get_topic_sender(TOPIC) as sender:
        assert publish(sender, messages) == 1
    for subscription, priority, count in [(SUBSCRIPTION_HIGH, "High", 4), (SUBSCRIPTION_LOW, "Low", 6),
                                          (SUBSCRIPTION_UNROUTED, "Urgent", 2)]:
        with client.get_subscription_receiver(TOPIC, subscription) as receiver:
            got = _receive_all(receiver, count)
            assert len(got) == count, subscription
            assert {json.loads(_body(m))["priority"] for m in got} == {priority}
            for message in got:
                receiver.complete_message(message)
            assert receiver.receive_messages(max_wait_time=0.5) == []


def _run_consumer(client: ServiceBusClient, subscription: str, name: str, count: int) -> None:
    with client.get_subscription_receiver(TOPIC, subscription) as receiver, \
            client.get_queue_sender(QUEUE_LEVELING) as out:
        for message in _receive_all(receiver, count):
            processed = process_message(_body(message), consumer=name, enqueued_at=message.enqueued_time_utc)
            out.send_messages(ServiceBusMessage(processed.body, message_id=message.message_id))
            receiver.complete_message(message)


def _run_leveler(client: ServiceBusClient, worker: LevelingWorker, count: int) -> list[Outcome]:
    outcomes = []
    with client.get_queue_receiver(QUEUE_LEVELING) as receiver:
        for message in _receive_all(receiver, count):
            outcomes.append(settle(worker, message, ReceiverActions(receiver)))
    return outcomes


def test_end_to_end_into_table_storage(client: ServiceBusClient, azurite: Any) -> None:
    from shared.clients import table_service_client
    from shared.settings import TableSettings

    messages = build_messages(3, 5, ["tenant-a", "tenant-b"])
    with client.get_topic_sender(TOPIC) as sender:
        publish(sender, messages)
        sender.send_messages(ServiceBusMessage(b"{not json", message_id="poison-1",
                                               application_properties={"Priority": "High"}))
    _run_consumer(client, SUBSCRIPTION_HIGH, "consumer_high", 4)
    _run_consumer(client, SUBSCRIPTION_LOW, "consumer_low", 5)

    settings = TableSettings(table_name="unused", connection_string=azurite.connection_string)
    with table_service_client(settings) as service:
        sink = TableSink.from_service(service, "e2e" + uuid.uuid4().hex[:12])
        outcomes = _run_leveler(client, LevelingWorker(sink), 9)
        assert sorted(o.value for o in outcomes) == ["completed"] * 8 + ["dead-lettered"]
        rows = {(r["PartitionKey"], r["RowKey"]) for r in sink.table.list_entities()}
    assert rows == {(json.loads(_body(m))["tenant_id"], m.message_id) for m in messages}
    with client.get_queue_receiver(QUEUE_LEVELING) as receiver:  # nothing left to retry
        assert receiver.receive_messages(max_wait_time=1) == []


def test_poison_is_dead_lettered_at_once_with_the_reason(client: ServiceBusClient) -> None:
    with client.get_queue_sender(QUEUE_LEVELING) as sender:
        sender.send_messages(ServiceBusMessage(b'{"message_id": "p-2"}', message_id="poison-2"))
    assert _run_leveler(client, LevelingWorker(InMemorySink()), 1) == [Outcome.DEAD_LETTERED]
    with client.get_queue_receiver(QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = _receive_all(dlq, 1)
        assert dead.message_id == "poison-2"
        assert dead.dead_letter_reason == "MissingField"
        assert "tenant_id, priority, created_at, payload" in dead.dead_letter_error_description
        assert dead.delivery_count <= 1  # dead-lettered on the first delivery, not after MaxDeliveryCount


def test_a_redelivered_message_is_written_once(client: ServiceBusClient) -> None:
    class FlakySink(InMemorySink):
        def __init__(self) -> None:
            super().__init__()
            self.failed = False

        def upsert(self, message: ContractMessage) -> None:
            super().upsert(message)
            if not self.failed:  # the write landed but the ack was lost: the broker redelivers
                self.failed = True
                raise ConnectionError("timeout after write")

    body = ContractMessage("dup-1", "tenant-x", "Low", utc_now(), {}, {"ok": True}).to_json()
    with client.get_queue_sender(QUEUE_LEVELING) as sender:
        sender.send_messages(ServiceBusMessage(body, message_id="dup-1"))
    sink = FlakySink()
    worker = LevelingWorker(sink)
    with client.get_queue_receiver(QUEUE_LEVELING) as receiver:
        (first,) = _receive_all(receiver, 1)
        with pytest.raises(ConnectionError):
            settle(worker, first, ReceiverActions(receiver))
        (second,) = _receive_all(receiver, 1)
        assert second.delivery_count == 1
        assert settle(worker, second, ReceiverActions(receiver)) is Outcome.COMPLETED
    assert sink.writes == 2 and list(sink.rows) == [("tenant-x", "dup-1")]


def test_message_groups_are_applied_in_order_per_tenant(client: ServiceBusClient) -> None:
    tenants = {f"tenant-{i}": 12 for i in range(4)}
    with client.get_queue_sender(QUEUE_ORDERED_WRITES) as sender:
        per_tenant = {t: build_ordered_messages(t, list(range(n))) for t, n in tenants.items()}
        for i in range(max(tenants.values())):  # interleave the tenants
            sender.send_messages([messages[i] for messages in per_tenant.values()])
    ledger = InMemoryLedger()
    stop = threading.Event()
    workers = [threading.Thread(target=run_ordered_worker,
                                args=(client, QUEUE_ORDERED_WRITES, ledger.apply),
                                kwargs={"stop": stop, "session_wait": 1.0, "max_wait_time": 0.5})
               for _ in range(2)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + 30
    while sum(map(len, ledger.applied.values())) < sum(tenants.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for w in workers:
        w.join(timeout=15)
    assert {t: ledger.applied[t] for t in tenants} == {t: list(range(1, n + 1)) for t, n in tenants.items()}


def test_one_leader_at_a_time_and_handover_on_stop(client: ServiceBusClient) -> None:
    session_id = f"leader-{uuid.uuid4().hex[:8]}"
    events: list[tuple[str, str, float]] = []
    electors = {}
    for name in ("a", "b"):
        electors[name] = LeaderElector(
            client, QUEUE_LEADER_ELECTION, session_id,
            on_elected=functools.partial(_record, events, name, "elected"),
            on_lost=functools.partial(_record, events, name, "lost"),
            lock_duration=30.0, retry_interval=0.2, acquire_wait=1.0,
        )
    threads = {n: threading.Thread(target=e.run, daemon=True) for n, e in electors.items()}
    threads["a"].start()
    deadline = time.monotonic() + 10
    while not electors["a"].is_leader() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert electors["a"].is_leader()
    threads["b"].start()
    time.sleep(2)
    assert not electors["b"].is_leader()  # the session lock excludes the second replica
    electors["a"].stop()
    threads["a"].join(timeout=10)
    deadline = time.monotonic() + 10
    while not electors["b"].is_leader() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert electors["b"].is_leader()
    electors["b"].stop()
    threads["b"].join(timeout=10)
    order = [(n, e) for n, e, _ in events]
    assert order == [("a", "elected"), ("a", "lost"), ("b", "elected"), ("b", "lost")]


def test_write_rate_stays_under_the_cap_across_instances(client: ServiceBusClient, azurite: Any) -> None:
    """Two leveler instances share LEVELER_MAX_WRITES_PER_SECOND = 20 through the app-wide budget the
    leveler uses (shared.write_budget: write slots leased from one Table Storage entity, as in
    functions/runtime.py): in no one-second window does the store see more than the cap."""
    from azure.data.tables import TableServiceClient

    from shared.write_budget import BudgetClock, SharedWritePacer

    budget_table = "budget" + uuid.uuid4().hex[:12]

    cap, instances, count = 20, 2, 60
    bodies = [
        ContractMessage(f"rate-{i}", f"tenant-{i % 3}", "Low", utc_now(), {}, {"ok": True}).to_json()
        for i in range(count)
    ]
    with client.get_queue_sender(QUEUE_LEVELING) as sender:
        sender.send_messages([ServiceBusMessage(b, message_id=f"rate-{i}") for i, b in enumerate(bodies)])

    write_times: list[float] = []
    sink_lock = threading.Lock()

    class TimedSink(InMemorySink):
        def upsert(self, message: ContractMessage) -> None:
            with sink_lock:
                super().upsert(message)
                write_times.append(time.monotonic())

    sink = TimedSink()

    def instance() -> None:
        service = TableServiceClient.from_connection_string(azurite.connection_string)
        pacer = SharedWritePacer(BudgetClock(service.get_table_client(budget_table), "leveler", cap))
        worker = LevelingWorker(sink, pacer)
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=5) as receiver:
            idle = 0
            while idle < 2:
                batch = receiver.receive_messages(max_message_count=5, max_wait_time=1)
                idle = 0 if batch else idle + 1
                for message in batch:
                    settle(worker, message, ReceiverActions(receiver))

    threads = [threading.Thread(target=instance) for _ in range(instances)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(sink.rows) == count and len(write_times) == count
    write_times.sort()
    busiest = max(sum(1 for t in write_times if start <= t < start + 1.0) for start in write_times)
    assert busiest <= cap
