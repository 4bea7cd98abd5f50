"""The management plane on a full or failing store: entity and rule writes through the Atom API (the real
``ServiceBusAdministrationClient``), ARM and the web console, and the console's resubmit, are answered
only once the store has written them. A write the store cannot take is refused the way Service Bus's
management API refuses a request it cannot take (the .NET administration client maps 403 to
``ServiceBusFailureReason.QuotaExceeded`` and 503 to ``ServiceBusy``; the JavaScript one to
``QuotaExceededError`` and ``ServerBusyError``; the Python one raises ``HttpResponseError`` with that
status): 403 ``QuotaExceeded`` for a full disk, 503 ``ServerBusy`` for another write error. Nothing of
a refused request applies: not in memory (entities, rules, receivers and their locks as before) and not
later, when the store has room again (a restart shows none of it).

The faults are the fault-injecting SQLite wrapper of test_store_faults.py.
"""

from __future__ import annotations

import copy
import http.client
import json
import sqlite3
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import EntityStatus, ServiceBusAdministrationClient, SqlRuleFilter

from sbemulator import Emulator
from sbemulator.admin import arm_auth
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive
from tests.integration.test_console_api import Console
from tests.integration.test_store_faults import FULL, Faults, data_dir, emu, faults  # noqa: F401 (fixtures)

BUSY = "disk I/O error"


@pytest.fixture
def admin(emu: Emulator) -> Iterator[ServiceBusAdministrationClient]:  # noqa: F811
    assert emu.admin_connection_string is not None
    # retry_total=0: azure-core retries a 503 by itself; the test wants to see the first answer
    with ServiceBusAdministrationClient.from_connection_string(
        emu.admin_connection_string, connection_verify=emu.ca_path, retry_total=0
    ) as client:
        yield client


def _refused(status: int, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(HttpResponseError) as refused:
        call(*args, **kwargs)
    assert refused.value.status_code == status, refused.value
    return str(refused.value.message)


def _topology(admin: ServiceBusAdministrationClient) -> dict[str, Any]:
    """What a person would check after a refused request: entities, one setting, rules."""
    return {
        "queues": sorted(q.name for q in admin.list_queues()),
        "topics": sorted(t.name for t in admin.list_topics()),
        "subscriptions": sorted(s.name for s in admin.list_subscriptions("events")),
        "orders.max_delivery_count": admin.get_queue("orders").max_delivery_count,
        "rules": {s: sorted(r.name for r in admin.list_rules("events", s)) for s in ("all", "high")},
    }


def test_a_full_store_refuses_entity_and_rule_writes_and_applies_none_of_them(
    emu: Emulator, faults: Faults, data_dir: Path, admin: ServiceBusAdministrationClient  # noqa: F811
) -> None:
    before = _topology(admin)
    orders = admin.get_queue("orders")
    orders.max_delivery_count = 3
    faults.fail(sqlite3.OperationalError(FULL))
    assert FULL in _refused(403, admin.create_queue, "refused-queue")
    _refused(403, admin.update_queue, orders)
    _refused(403, admin.create_topic, "refused-topic")
    _refused(403, admin.create_subscription, "events", "refused-sub")
    _refused(403, admin.create_rule, "events", "all", "refused-rule", filter=SqlRuleFilter("Priority = 'Low'"))
    _refused(403, admin.delete_rule, "events", "high", "high")
    _refused(403, admin.delete_subscription, "events", "all")
    _refused(403, admin.delete_topic, "events")
    _refused(403, admin.delete_queue, "orders")
    faults.fail(sqlite3.OperationalError(BUSY))
    assert BUSY in _refused(503, admin.create_queue, "refused-busy")
    _refused(503, admin.delete_queue, "orders")
    assert _topology(admin) == before  # nothing half applied, in memory
    faults.fail(None)
    admin.create_queue("stored-queue")
    admin.create_rule("events", "all", "stored-rule", filter=SqlRuleFilter("Priority = 'Low'"))
    after = _topology(admin)
    assert after["queues"] == sorted([*before["queues"], "stored-queue"])
    emu.stop()
    # Nothing refused was written once the store had room again: a restart shows the same namespace.
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again:
        assert again.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            again.admin_connection_string, connection_verify=again.ca_path
        ) as restarted:
            assert _topology(restarted) == after
            with pytest.raises(ResourceNotFoundError):
                restarted.get_queue("refused-queue")


def test_a_refused_delete_or_disable_keeps_the_receivers_and_their_locks(
    emu: Emulator, faults: Faults, admin: ServiceBusAdministrationClient  # noqa: F811
) -> None:
    """A delete or a suspension ends the entity's receivers (their links are detached): one the store
    refused must not, so a message locked before it can still be completed by its receiver."""
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_queue_sender("orders") as sender, client.get_queue_receiver("orders") as receiver:
        sender.send_messages([ServiceBusMessage("locked-1"), ServiceBusMessage("locked-2")])
        first, second = receive(receiver, 2)
        faults.fail(sqlite3.OperationalError(FULL))
        _refused(403, admin.delete_queue, "orders")
        disabled = admin.get_queue("orders")
        disabled.status = EntityStatus.DISABLED
        _refused(403, admin.update_queue, disabled)
        faults.fail(None)
        receiver.complete_message(first)  # the lock and the link survived the refused delete and update
        assert admin.get_queue("orders").status == EntityStatus.ACTIVE
        admin.delete_queue("orders")  # a delete that is stored ends the receiver as before
        with pytest.raises(Exception):  # noqa: B017 (the SDK's lock or entity error, depending on timing)
            receiver.complete_message(second)


def _arm(target: Emulator, method: str, path: str, body: Any) -> tuple[int, Any]:
    root = f"https://127.0.0.1:{target.admin_port}/"
    token = "Bearer " + arm_auth.bearer_token(root, target.key_name, target.key, int(time.time()) + 300)
    conn = http.client.HTTPSConnection("127.0.0.1", target.admin_port, timeout=10,
                                       context=ssl.create_default_context(cafile=target.ca_path))
    try:
        conn.request(method, path, json.dumps(body), {"Authorization": token, "Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


ARM_NS = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/local/providers/" \
         "Microsoft.ServiceBus/namespaces/sbemulatorns"
API = "?api-version=2021-11-01"


def test_arm_and_console_writes_are_refused_by_a_full_store_too(
    emu: Emulator, faults: Faults, admin: ServiceBusAdministrationClient  # noqa: F811
) -> None:
    console = Console(emu)
    console.login()
    faults.fail(sqlite3.OperationalError(FULL))
    status, body = _arm(emu, "PUT", f"{ARM_NS}/queues/arm-refused{API}", {"properties": {}})
    assert status == 403 and body["error"]["code"] == "QuotaExceeded", body
    assert FULL in body["error"]["message"]
    status, body = _arm(emu, "DELETE", f"{ARM_NS}/queues/orders{API}", None)
    assert status == 403, body
    status, _, answer = console.call("POST", "/console/api/create-entity", {"kind": "queue", "name": "console-refused"})
    assert status == 403 and answer["error"] == "QuotaExceeded", answer
    faults.fail(sqlite3.OperationalError(BUSY))
    status, _, answer = console.call("POST", "/console/api/delete-entity", {"path": "orders"})
    assert status == 503 and answer["error"] == "ServerBusy", answer
    faults.fail(None)
    queues = {q.name for q in admin.list_queues()}
    assert "orders" in queues and not queues & {"arm-refused", "console-refused"}


def test_a_console_resubmit_the_store_refuses_leaves_the_message_dead_lettered(
    emu: Emulator, faults: Faults, data_dir: Path  # noqa: F811
) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("dead"))
        with client.get_queue_receiver("orders") as receiver:
            [message] = receive(receiver, 1)
            receiver.dead_letter_message(message, reason="test")
    console = Console(emu)
    console.login()
    faults.fail(sqlite3.OperationalError(FULL))
    status, _, answer = console.call("POST", "/console/api/resubmit", {"path": "orders", "all": True})
    assert status == 403 and answer["error"] == "QuotaExceeded", answer
    faults.fail(sqlite3.OperationalError(BUSY))
    status, _, answer = console.call("POST", "/console/api/resubmit", {"path": "orders", "all": True})
    assert status == 503 and answer["error"] == "ServerBusy", answer
    faults.fail(None)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("orders") as receiver:
            assert receiver.peek_messages(max_message_count=5) == []
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert [str(m) for m in dlq.peek_messages(max_message_count=5)] == ["dead"]
    status, _, answer = console.call("POST", "/console/api/resubmit", {"path": "orders", "all": True})
    assert status == 200 and answer["resubmitted"] == 1, answer
    emu.stop()
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client:
        with client.get_queue_receiver("orders") as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=5)] == ["dead"]
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.peek_messages(max_message_count=5) == []
