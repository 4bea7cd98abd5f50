"""Snapshots (sbemulator/runtime/snapshot.py, docs/emulator.md "Snapshots"): a namespace exported with its
entities, rules and messages in every state, imported into a fresh emulator, seen the same by the SDK
(same sequence numbers, properties, states, delivery counts, enqueued times, session state).

Message states follow https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing
(sequence numbers, scheduled messages), .../message-deferral and .../service-bus-dead-letter-queues.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

from sbemulator import Emulator
from sbemulator.runtime import snapshot
from sbemulator.runtime.snapshot import SnapshotError
from tests.fixtures.emulator import queue, topology
from tests.integration.test_admin_http import call

WAIT_S = 5
TOPOLOGY = topology(
    queues=[queue("orders", MaxDeliveryCount=5), queue("payments", RequiresSession=True)],
    topics=[{"Name": "events", "Properties": {}, "Subscriptions": [{"Name": "all", "Properties": {}}]}],
)
EMPTY = topology(queues=[], topics=[])


def export(emu: Emulator) -> dict[str, Any]:
    status, headers, body = call(emu, "GET", "/$admin/snapshot")
    assert status == 200, body
    assert headers["content-disposition"].startswith("attachment;")
    return json.loads(body)


def seed(emu: Emulator) -> None:
    """Messages in every state, a runtime entity with a rule, a session state."""
    assert emu.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                               connection_verify=emu.ca_path) as admin:
        admin.create_queue("invoices", lock_duration=dt.timedelta(seconds=45), max_delivery_count=7)
        admin.create_subscription("events", "high")
        admin.create_rule("events", "high", "high-only", filter=SqlRuleFilter("Priority = 'High'"))
        admin.delete_rule("events", "high", "$Default")
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([
                ServiceBusMessage(f"m{i}", message_id=f"id-{i}", subject="s", content_type="text/plain",
                                  correlation_id="c", application_properties={"n": i, "f": 1.5, "b": True, "t": "x"})
                for i in range(1, 6)])
            sender.schedule_messages(ServiceBusMessage("later"), dt.datetime(2099, 1, 1, tzinfo=dt.UTC))
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            got = receiver.receive_messages(max_message_count=3, max_wait_time=WAIT_S)
            assert [m.sequence_number for m in got] == [1, 2, 3]
            receiver.dead_letter_message(got[0], reason="Bad", error_description="bad order")
            receiver.defer_message(got[1])
            receiver.abandon_message(got[2])  # delivery counted: 1
        with client.get_queue_sender("payments") as sender:
            sender.send_messages([ServiceBusMessage("p1", session_id="a"), ServiceBusMessage("p2", session_id="b")])
        with client.get_queue_receiver("payments", session_id="a", max_wait_time=WAIT_S) as receiver:
            receiver.session.set_state(b"step 2")
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage("e1", application_properties={"Priority": "High"}),
                                  ServiceBusMessage("e2", application_properties={"Priority": "Low"})])


def peeked(emu: Emulator, name: str, **kw: Any) -> list[tuple[Any, ...]]:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        if "/" in name:
            topic, sub = name.split("/")
            receiver = client.get_subscription_receiver(topic, sub, **kw)
        else:
            receiver = client.get_queue_receiver(name, **kw)
        with receiver:
            return [(m.sequence_number, str(m), m.message_id, m.subject, m.content_type, m.correlation_id,
                     m.application_properties, m.delivery_count, m.enqueued_time_utc, m.state,
                     m.scheduled_enqueue_time_utc, m.dead_letter_reason, m.dead_letter_error_description,
                     m.session_id) for m in receiver.peek_messages(max_message_count=50)]


VIEWS: list[tuple[str, dict[str, Any]]] = [
    ("orders", {}), ("orders", {"sub_queue": ServiceBusSubQueue.DEAD_LETTER}), ("events/all", {}),
    ("events/high", {}), ("payments", {"session_id": "a"}), ("payments", {"session_id": "b"})]


def test_a_snapshot_round_trip_keeps_what_the_sdk_sees() -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as first:
        seed(first)
        before = {f"{name} {kw}": peeked(first, name, **kw) for name, kw in VIEWS}
        data = export(first)
    assert data["format"] == "sbemulator-snapshot" and data["version"] == 1
    states = sorted({(m["entity"], m["subQueue"], m["state"]) for m in data["messages"]})
    assert ("orders", "active", "deferred") in states and ("orders", "active", "scheduled") in states
    assert ("orders", "deadletter", "active") in states

    # A fresh emulator whose config file declares nothing: everything comes from the snapshot.
    with Emulator(config=copy.deepcopy(EMPTY), in_memory=True, snapshot=json.dumps(data).encode()) as second:
        after = {f"{name} {kw}": peeked(second, name, **kw) for name, kw in VIEWS}
        assert after == before
        assert [row[0] for row in after["orders {}"]] == [2, 3, 4, 5, 6]
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
                [deferred] = receiver.receive_deferred_messages([2])
                assert str(deferred) == "m2"
                receiver.complete_message(deferred)
                got = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT_S)
                assert got[0].sequence_number == 3 and got[0].delivery_count == 1  # abandoned once before
                receiver.complete_message(got[0])
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("new"))
            with client.get_queue_receiver("orders", session_id=None) as receiver:
                assert receiver.peek_messages(max_message_count=50)[-1].sequence_number == 7  # numbering goes on
            with client.get_queue_receiver("payments", session_id="a", max_wait_time=WAIT_S) as receiver:
                assert receiver.session.get_state() == b"step 2"
            with client.get_topic_sender("events") as sender:  # the imported rule filters
                sender.send_messages([ServiceBusMessage("e3", application_properties={"Priority": "Low"})])
        assert [row[1] for row in peeked(second, "events/high")] == ["e1"]
        assert second.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(second.admin_connection_string,
                                                                   connection_verify=second.ca_path) as admin:
            props = admin.get_queue("invoices")
            assert props.lock_duration == dt.timedelta(seconds=45) and props.max_delivery_count == 7


def test_a_durable_emulator_keeps_an_imported_snapshot(tmp_path: Path) -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as first:
        seed(first)
        before = peeked(first, "orders")
        data = export(first)
    path = tmp_path / "state.snapshot.json"
    path.write_text(json.dumps(data))
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=False, data_dir=tmp_path / "data", snapshot=path) as emu:
        assert peeked(emu, "orders") == before
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=False, data_dir=tmp_path / "data") as emu:
        assert peeked(emu, "orders") == before  # restarted without the snapshot: the store kept it


def test_a_snapshot_above_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages([ServiceBusMessage("x" * 1000) for _ in range(5)])
        data = export(emu)
        path = tmp_path / "big.json"
        path.write_text(json.dumps(data))
        monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 2000)
        status, _, body = call(emu, "GET", "/$admin/snapshot")
        assert status == 413 and b"more than a snapshot may (2000 bytes); purge some messages first" in body
    with pytest.raises(SnapshotError, match="above the limit"):
        Emulator(config=copy.deepcopy(TOPOLOGY), snapshot=path)


@pytest.mark.parametrize("broken, message", [
    (b"not json", "not valid JSON"),
    (b'{"format": "other"}', "Not an sbemulator snapshot"),
    (b'{"format": "sbemulator-snapshot", "version": 99}', "version 99 is not supported"),
    (b'{"format": "sbemulator-snapshot", "version": 1, "messages": [{"entity": "orders", "sequenceNumber": "1"}]}',
     "messages[0]: 'sequenceNumber' must be a int"),
])
def test_a_broken_snapshot_is_refused_with_what_is_wrong(broken: bytes, message: str) -> None:
    with pytest.raises(SnapshotError) as info:
        Emulator(config=copy.deepcopy(TOPOLOGY), snapshot=broken)
    assert message in str(info.value)


def test_the_snapshot_needs_a_manage_key() -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emu:
        assert call(emu, "GET", "/$admin/snapshot", auth=None)[0] == 401


# --- import into a running emulator (POST /$admin/snapshot, Emulator.import_snapshot): replaces the namespace
def test_a_snapshot_imported_through_the_api_replaces_the_running_namespace() -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as first:
        seed(first)
        before = {f"{name} {kw}": peeked(first, name, **kw) for name, kw in VIEWS}
        data = export(first)
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emu:
        # What an earlier test left: a runtime queue, messages, a session state, a duplicate-detection entry.
        assert emu.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                                   connection_verify=emu.ca_path) as admin:
            admin.create_queue("leftover")
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages([ServiceBusMessage(f"old{i}") for i in range(8)])
            with client.get_queue_sender("payments") as sender:
                sender.send_messages(ServiceBusMessage("old", session_id="z"))
            with client.get_queue_receiver("payments", session_id="z", max_wait_time=WAIT_S) as receiver:
                receiver.session.set_state(b"old state")
        status, _, body = call(emu, "POST", "/$admin/snapshot", json.dumps(data).encode())
        assert status == 200, body
        assert json.loads(body)["imported"]["messages"] == len(data["messages"])
        # The SDK sees exactly what the exporting emulator held, nothing of what was there before.
        after = {f"{name} {kw}": peeked(emu, name, **kw) for name, kw in VIEWS}
        assert after == before
        assert peeked(emu, "payments", session_id="z") == []
        assert emu.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                                   connection_verify=emu.ca_path) as admin:
            assert "leftover" not in [q.name for q in admin.list_queues()]
            assert admin.get_queue("invoices").max_delivery_count == 7
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_receiver("payments", session_id="z", max_wait_time=WAIT_S) as receiver:
                assert receiver.session.get_state() is None
            with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
                [deferred] = receiver.receive_deferred_messages([2])
                assert str(deferred) == "m2"
                receiver.complete_message(deferred)
                [got] = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT_S)
                assert got.sequence_number == 3 and got.delivery_count == 1
                receiver.complete_message(got)
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("new"))
        # numbering goes on after the highest the entity ever gave (the 8 sent before the import)
        assert peeked(emu, "orders")[-1][0] > 6


def test_emulator_import_snapshot_and_a_durable_restart_keeps_it(tmp_path: Path) -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as first:
        seed(first)
        before = peeked(first, "orders")
        data = export(first)
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=False, data_dir=tmp_path / "data") as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("before the import"))
        assert emu.import_snapshot(data)["entities"] == len(data["entities"])
        assert peeked(emu, "orders") == before
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=False, data_dir=tmp_path / "data") as emu:
        assert peeked(emu, "orders") == before  # the store has the import, not what was there before


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=2), "Snapshot version 2 is not supported"),
    (lambda d: d["messages"][0].update(sequenceNumber="x"), "messages[0]: 'sequenceNumber' must be a int"),
    (lambda d: d["messages"][-1].update(entity="nosuchqueue"),
     "the entity 'nosuchqueue' is neither in the snapshot nor in the config file"),
    (lambda d: d["entities"].append({"kind": "subscription", "path": "gone/Subscriptions/s", "topic": "gone",
                                     "description": d["entities"][-1]["description"]}),
     "cannot be created (a subscription needs its topic"),
    (lambda d: d["entities"][0]["description"].update(no_such_setting=1), "no_such_setting"),
])
def test_a_bad_snapshot_is_a_400_naming_the_problem_and_changes_nothing(change: Any, message: str) -> None:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as first:
        seed(first)
        data = export(first)
    change(data)
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("stays"))
        before = peeked(emu, "orders")
        status, _, body = call(emu, "POST", "/$admin/snapshot", json.dumps(data).encode())
        assert status == 400, body
        error = json.loads(body)["error"]
        assert error["code"] == "BadRequest" and message in error["message"]
        assert peeked(emu, "orders") == before
        with pytest.raises(SnapshotError, match=message.replace("(", r"\(").replace("[", r"\[")):
            emu.import_snapshot(data)
        assert call(emu, "POST", "/$admin/snapshot", b"not json")[0] == 400
        assert call(emu, "POST", "/$admin/snapshot", json.dumps(data).encode(), auth=None)[0] == 401
