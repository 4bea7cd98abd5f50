"""devhost against real local services: sbemulator (started by the host) and Azurite.

The whole pipeline runs through the real Functions code for a few seconds; then the host's own
behaviour is checked on small apps: a failing function (abandoned, logged with its name, finally
dead-lettered by the broker), a session trigger (ordered per session) and the SDK-type binding
(the leveler dead-letters poison with its reason through ``ReceiverActions``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from devhost.demo.metrics import TelemetryCollector
from devhost.host import Host, HostOptions
from devhost.instances import InstanceId
from devhost.listeners import ServiceBusListener
from devhost.local_services import AZURITE_KEY
from devhost.scale import RoleScale
from shared.topology import QUEUE_LEVELING
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]


def _azurite_available() -> bool:
    return (ROOT / "node_modules" / ".bin" / "azurite").exists()


@pytest.mark.slow
@pytest.mark.skipif(not _azurite_available(), reason="azurite is not installed (npm install)")
def test_the_pipeline_runs_under_devhost_with_separate_pools() -> None:
    options = HostOptions(
        use_local_settings=False, env={},
        overrides={"SENDER_SCHEDULE": "*/1 * * * * *", "SENDER_BATCH_SIZE": "3", "RESULTS_TABLE": "devhostit",
                   "CONSUMER_WORK_MS_HIGH": "0", "CONSUMER_WORK_MS_LOW": "0",
                   "LEVELER_MAX_WRITES_PER_SECOND": "100"},
        instances={"consumer-high": 2, "consumer-low": 2, "leveler": 2},
    )
    previous_table = os.environ.get("RESULTS_TABLE")
    with TelemetryCollector() as collector, Host(options) as host:
        assert host.services.service_bus_connection and host.services.storage_connection  # both started
        assert host.settings is not None and AZURITE_KEY in str(host.settings.get("TableStorageConnection"))
        with host.service_bus_client() as client, client.get_queue_sender(QUEUE_LEVELING) as sender:
            sender.send_messages(ServiceBusMessage(b"{not json", message_id="poison-devhost"))
        table = host.table_client("devhostit")

        def rows() -> list[dict]:
            try:
                return list(table.list_entities())
            except Exception:  # the leveler creates the table on its first write
                return []

        assert wait_until(lambda: len(rows()) >= 12, 40), "fewer than two sender ticks reached the table"
        workers = host.instance_values("functions.runtime.leveling_worker")
        host.stop_functions()
        landed = rows()
        with host.service_bus_client() as client, client.get_queue_receiver(
                QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            dead = dlq.peek_messages(max_message_count=10)
        stats = host.stats

    assert os.environ.get("RESULTS_TABLE") == previous_table  # the host restored the environment
    assert {row["Priority"] for row in landed} == {"High", "Low"}
    assert all(json.loads(row["Result"])["consumer"] in ("consumer_high", "consumer_low") for row in landed)
    high, low = stats.instances_of("consumer_high"), stats.instances_of("consumer_low")
    assert high and {i.role for i in high} == {"consumer-high"}
    assert low and {i.role for i in low} == {"consumer-low"}
    assert {i.role for i in stats.instances_of("sender")} == {"sender"}
    # each leveler instance has its own worker, as separate processes would; all lease from one budget
    assert workers and all(isinstance(key, InstanceId) and key.role == "leveler" for key in workers)
    assert len({id(worker) for worker in workers.values()}) == len(workers)
    assert all(worker.limiter.rate == 100 for worker in workers.values())  # the app-wide cap, not a share
    # the SDK-type binding: the leveler dead-lettered the poison message itself, with the reason
    assert [(m.message_id, m.dead_letter_reason) for m in dead] == [("poison-devhost", "InvalidJson")]
    by_priority = {p: [s for s in collector.snapshot() if s.stage == f"consumer_{p.lower()}"] for p in ("High", "Low")}
    assert all(s.priority == "High" for s in by_priority["High"]) and by_priority["High"]
    assert all(s.priority == "Low" for s in by_priority["Low"]) and by_priority["Low"]


def _topology(tmp_path: Path) -> Path:
    doc = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": "flaky", "Properties": {"MaxDeliveryCount": 2, "LockDuration": "PT30S"}},
        {"Name": "sessions", "Properties": {"RequiresSession": True, "LockDuration": "PT30S"}},
    ], "Topics": []}], "Logging": {"Type": "Console"}}}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    return path


def _only(app: func.FunctionApp, tmp_path: Path, calls: int = 2) -> HostOptions:
    return HostOptions(roles=(), use_local_settings=False, env={}, topology=_topology(tmp_path),
                       extra_apps={"test": (app, RoleScale("test", 1, calls))})


def test_a_failing_function_is_logged_abandoned_and_finally_dead_lettered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    app = func.FunctionApp()
    attempts: list[int] = []

    @app.function_name("always_fails")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="flaky", connection="ServiceBusConnection")
    def always_fails(message: func.ServiceBusMessage) -> None:
        attempts.append(message.delivery_count or 0)
        raise ValueError("cannot handle this")

    caplog.set_level(logging.ERROR, logger="devhost")
    with Host(_only(app, tmp_path)) as host:
        with host.service_bus_client() as client, client.get_queue_sender("flaky") as sender:
            sender.send_messages(ServiceBusMessage(b"x", message_id="m-1"))
        assert wait_until(lambda: len(attempts) >= 2, 30)
        with host.service_bus_client() as client, client.get_queue_receiver(
                "flaky", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert wait_until(lambda: bool(dlq.peek_messages(max_message_count=1, sequence_number=1)), 10)
            (dead,) = dlq.peek_messages(max_message_count=5, sequence_number=1)
        failed = host.stats.by_function()["always_fails"]["failed"]
    assert dead.message_id == "m-1" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert failed == 2 and len(attempts) == 2  # abandoned each time, redelivered, then dead-lettered
    messages = [r.getMessage() for r in caplog.records]
    assert any("function always_fails (instance test#0) failed on message m-1; abandoning it" in m for m in messages)
    assert any("cannot handle this" in (r.exc_text or "") for r in caplog.records)


@pytest.mark.slow
def test_a_session_trigger_processes_each_session_in_order(tmp_path: Path) -> None:
    app = func.FunctionApp()
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    @app.function_name("ordered")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="sessions", connection="ServiceBusConnection",
                                   is_sessions_enabled=True)
    def ordered(message: func.ServiceBusMessage) -> None:
        with lock:
            seen.setdefault(str(message.session_id), []).append(int(message.get_body()))

    with Host(_only(app, tmp_path)) as host:
        with host.service_bus_client() as client, client.get_queue_sender("sessions") as sender:
            for i in range(5):
                sender.send_messages([ServiceBusMessage(str(i), session_id=s) for s in ("a", "b", "c")])
        assert wait_until(lambda: sum(len(v) for v in seen.values()) >= 15, 60)
        listener = host.listeners[0]
    assert seen == {s: [0, 1, 2, 3, 4] for s in ("a", "b", "c")}
    assert isinstance(listener, ServiceBusListener)
    assert listener.sessions and listener.slots == 8  # maxConcurrentSessions from host.json


def test_backlog_counts_by_peeking_and_by_runtime_properties() -> None:
    """The dashboard's counts: peeking must count from the start every time (the SDK's peek otherwise
    continues after the last one), and agree with the management API where the emulator serves it."""
    from devhost.demo.backlog import PIPELINE_ENTITIES, BacklogProbe
    from devhost.local_services import LocalServices

    services = LocalServices()
    try:
        connection = services.start_service_bus(ROOT / "infra" / "servicebus.json")
        options = HostOptions(roles=(), use_local_settings=False, env={},
                              overrides={"ServiceBusConnection": connection})
        host = Host(options).start()
        try:
            with host.service_bus_client() as client, client.get_queue_sender(QUEUE_LEVELING) as sender:
                sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])
            peek = BacklogProbe(host.service_bus_client, None, PIPELINE_ENTITIES, peek_limit=2)
            assert peek.source == "peek"
            for _ in range(2):  # the same answer on every poll
                counts = peek.counts()
                assert (counts["leveling"].active, counts["leveling"].capped) == (3, True)  # 3 >= limit 2: "3+"
                assert counts["leveling"].show(3) == "3+"
                assert counts["messages/highPriority"].active == 0
            peek.close()
            assert wait_until(lambda: services.admin_url is not None, 5)  # printed after the ready line
            host.services = services  # the admin client is built from the emulator devhost knows about
            admin = BacklogProbe(host.service_bus_client, host.admin_client, PIPELINE_ENTITIES)
            assert admin.source == "runtime properties"
            assert admin.counts()["leveling"].active == 3
            admin.close()
        finally:
            host.stop()
    finally:
        services.stop()


def test_a_table_output_binding_writes_the_entity(azurite: Any) -> None:
    """A timer (runOnStartup) with a Table output: the value set on ``func.Out`` becomes a row."""
    app = func.FunctionApp()

    @app.function_name("stamp")
    @app.timer_trigger(arg_name="timer", schedule="0 0 0 1 1 *", run_on_startup=True)
    @app.table_output(arg_name="row", table_name="stamps", connection="StampStorage", partition_key="p")
    def stamp(timer: func.TimerRequest, row: func.Out[str]) -> None:
        row.set(json.dumps({"RowKey": "r1", "PastDue": timer.past_due}))

    options = HostOptions(roles=(), use_local_settings=False, env={},
                          overrides={"StampStorage": azurite.connection_string},
                          extra_apps={"stamps": (app, RoleScale("stamps", 1, 1))})
    from azure.data.tables import TableServiceClient

    with Host(options) as host:
        assert host.services.processes == []  # nothing needs Service Bus: no emulator started
        service = TableServiceClient.from_connection_string(azurite.connection_string)

        def rows() -> list[dict]:
            try:
                return list(service.get_table_client("stamps").list_entities())
            except Exception:
                return []

        assert wait_until(lambda: bool(rows()), 20)
    (row,) = rows()
    assert (row["PartitionKey"], row["RowKey"], row["PastDue"]) == ("p", "r1", False)
