"""The ``ordered`` role under devhost: session-trigger semantics of the Functions host.

Functions docs, "Azure Service Bus trigger for Azure Functions" and the host.json reference
(``extensions.serviceBus``): with ``isSessionsEnabled`` each instance processes up to
``maxConcurrentSessions`` sessions at once, one message at a time per session and in order; a session
is released after ``sessionIdleTimeout`` without messages, and the slot then accepts another session.
Both tests read the outcome from the ordered writer's table (real Azurite), not from the function.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from consumers.ordered import build_ordered_messages
from consumers.ordered_table import STATE_ROW, audit_table
from devhost.host import Host, HostOptions
from tests.fixtures.azurite import Azurite

pytestmark = pytest.mark.timeout(180)
QUEUE = "ordered-writes"


def _topology(tmp_path: Path) -> Path:
    doc = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": QUEUE, "Properties": {"RequiresSession": True, "LockDuration": "PT10S", "MaxDeliveryCount": 5}},
    ], "Topics": []}], "Logging": {"Type": "Console"}}}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    return path


def _options(tmp_path: Path, azurite: Azurite, table: str, *, instances: int, sessions: int,
             idle: str) -> HostOptions:
    return HostOptions(
        roles=("ordered",), use_local_settings=False, topology=_topology(tmp_path),
        env={"TableStorageConnection": azurite.connection_string},
        instances={"ordered": instances},
        overrides={"ORDERED_TABLE": table, "ORDERED_WORK_MS": "100",
                   "AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentSessions": str(sessions),
                   "AzureFunctionsJobHost__extensions__serviceBus__sessionIdleTimeout": idle},
    )


def _ledger(host: Host, table: str) -> list[dict[str, Any]]:
    try:
        return [r for r in host.table_client(table).list_entities() if r["RowKey"] != STATE_ROW]
    except Exception:  # created on the first write
        return []


def _wait_rows(host: Host, table: str, count: int, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _ledger(host, table)
        if len(rows) >= count:
            return rows
        time.sleep(0.2)
    raise AssertionError(f"only {len(_ledger(host, table))} of {count} writes applied after {timeout}s")


def _span(rows: list[dict[str, Any]], tenant: str) -> tuple[datetime, datetime]:
    moments = sorted(datetime.fromisoformat(r["AppliedAt"]) for r in rows if r["PartitionKey"] == tenant)
    return moments[0], moments[-1]


def _send(host: Host, writes: dict[str, int]) -> None:
    with host.service_bus_client() as client, client.get_queue_sender(QUEUE) as sender:
        for tenant, count in writes.items():
            sender.send_messages(build_ordered_messages(tenant, [f"v{i}" for i in range(count)]))


def test_two_instances_process_two_tenants_in_parallel_each_in_order(tmp_path: Path, azurite: Azurite) -> None:
    table = "d" + uuid.uuid4().hex[:16]
    with Host(_options(tmp_path, azurite, table, instances=2, sessions=1, idle="00:00:05")) as host:
        assert host.wait_connected(30)
        slots = [getattr(listener, "slots", None) for listener in host.listeners]  # Service Bus listeners have them
        assert slots == [1, 1]  # maxConcurrentSessions per instance
        _send(host, {"tenant-a": 12, "tenant-b": 12})
        rows = _wait_rows(host, table, 24, 60)
        audits = audit_table(host.table_client(table))
        stats = host.stats.by_function()["ordered_writer"]
    assert {t: (a.applied, a.out_of_order, a.double_applied) for t, a in audits.items()} == {
        "tenant-a": (12, 0, 0), "tenant-b": (12, 0, 0)}
    # one instance per tenant (the session lock), the two tenants on different instances at the same time
    assert all(len(a.writers) == 1 for a in audits.values())
    assert audits["tenant-a"].writers != audits["tenant-b"].writers
    (a_start, a_end), (b_start, b_end) = _span(rows, "tenant-a"), _span(rows, "tenant-b")
    assert a_start < b_end and b_start < a_end, "the tenants were processed one after the other"
    assert stats["instances"] == 2 and stats["failed"] == 0


def test_one_slot_serves_the_next_tenant_after_the_session_idle_timeout(tmp_path: Path, azurite: Azurite) -> None:
    table = "d" + uuid.uuid4().hex[:16]
    with Host(_options(tmp_path, azurite, table, instances=1, sessions=1, idle="00:00:02")) as host:
        assert host.wait_connected(30)
        _send(host, {"tenant-a": 3, "tenant-b": 3})
        rows = _wait_rows(host, table, 6, 60)
        audits = audit_table(host.table_client(table))
    assert {t: (a.applied, a.out_of_order, a.double_applied) for t, a in audits.items()} == {
        "tenant-a": (3, 0, 0), "tenant-b": (3, 0, 0)}
    spans = sorted([_span(rows, "tenant-a"), _span(rows, "tenant-b")])
    (_, first_end), (second_start, _) = spans
    # one session at a time: the second tenant starts only after the first one's session sat idle
    gap = (second_start - first_end).total_seconds()
    assert gap >= 1.5, f"the slot took the next session {gap:.2f}s after the last write, before the idle timeout"
