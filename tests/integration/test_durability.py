"""Durability: messages, sequence numbers, dead letters and scheduled messages survive a SIGKILL."""

from __future__ import annotations

import datetime as dt
import json

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

from devhost.local_services import emulator_admin_connection_string
from tests.fixtures.emulator import STANDARD_TOPOLOGY, queue, topology
from tests.fixtures.process import start_emulator_process


def _receive(receiver, count: int, wait: float = 5) -> list:
    out: list = []
    for _ in range(int(wait)):
        out += receiver.receive_messages(max_message_count=count - len(out), max_wait_time=1)
        if len(out) >= count:
            break
    return out


def test_state_survives_a_process_kill(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(STANDARD_TOPOLOGY))
    data = tmp_path / "data"
    args = ("--config", str(config), "--data-dir", str(data))

    first = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("orders") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(20)])
                scheduled = sender.schedule_messages(
                    ServiceBusMessage("scheduled"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
                )
            with client.get_queue_receiver("orders") as receiver:
                taken = _receive(receiver, 3)
                receiver.complete_message(taken[0])
                receiver.dead_letter_message(taken[1], reason="Bad", error_description="kept across restart")
                # taken[2] stays locked by this process when it dies
            last_sequence = max(m.sequence_number for m in taken)
    finally:
        first.kill()  # no clean shutdown: SIGKILL right after the accepts were sent

    second = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("orders") as receiver:
                peeked = receiver.peek_messages(max_message_count=50, sequence_number=1)
                assert scheduled[0] in [p.sequence_number for p in peeked]
                messages = _receive(receiver, 18, wait=10)
                bodies = [str(m) for m in messages]
                # the completed and the dead-lettered one are gone; the locked one is back (lock released)
                assert sorted(bodies) == sorted(f"m{i}" for i in range(2, 20))
                assert [m.application_properties[b"i"] for m in messages] == list(range(2, 20))
                for m in messages:
                    receiver.complete_message(m)
            with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                (dead,) = _receive(dlq, 1)
                assert (str(dead), dead.dead_letter_reason) == ("m1", "Bad")
                assert dead.dead_letter_error_description == "kept across restart"
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("after restart"))
            with client.get_queue_receiver("orders") as receiver:
                (new,) = _receive(receiver, 1)
                assert new.sequence_number > max(last_sequence, scheduled[0])
                receiver.complete_message(new)
    finally:
        assert second.terminate() == 0


def test_session_state_and_session_messages_survive_a_process_kill(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(STANDARD_TOPOLOGY))
    args = ("--config", str(config), "--data-dir", str(tmp_path / "data"))

    first = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("sessions") as sender:
                sender.send_messages([ServiceBusMessage(f"t{i}", session_id="tenant-1") for i in range(3)])
            with client.get_queue_receiver("sessions", session_id="tenant-1") as receiver:
                (first_message,) = _receive(receiver, 1)
                receiver.complete_message(first_message)
                receiver.session.set_state(b"applied-up-to:0")
    finally:
        first.kill()

    second = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("sessions", session_id="tenant-1") as receiver:
                assert receiver.session.get_state() == b"applied-up-to:0"
                rest = _receive(receiver, 2)
                assert [str(m) for m in rest] == ["t1", "t2"]
                for m in rest:
                    receiver.complete_message(m)
    finally:
        assert second.terminate() == 0


def _admin(proc) -> ServiceBusAdministrationClient:
    conn = emulator_admin_connection_string(proc.connection_string, proc.admin_url)
    return ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=proc.ca_path)


def test_entities_changed_through_the_admin_api_survive_a_restart_until_the_file_changes_them(tmp_path):
    """Durable mode: entities created, changed or deleted through the management API come back after a
    restart. For an entity the config file declares, the runtime change stands while the file's
    description of it is unchanged; editing the file afterwards makes the file win (docs/emulator.md,
    "Config file and store")."""
    def write(lock: str) -> None:
        config.write_text(json.dumps(topology(
            queues=[queue("orders", LockDuration=lock), queue("retired")],
            topics=[{"Name": "events", "Properties": {}, "Subscriptions": [{"Name": "all", "Properties": {}}]}],
        )))

    config = tmp_path / "config.json"
    write("PT30S")
    args = ("--config", str(config), "--data-dir", str(tmp_path / "data"))

    first = start_emulator_process(*args)
    try:
        with _admin(first) as admin:
            admin.create_queue("made", max_delivery_count=8)
            orders = admin.get_queue("orders")
            orders.lock_duration = dt.timedelta(seconds=10)
            admin.update_queue(orders)
            admin.create_rule("events", "all", "eu", filter=SqlRuleFilter("region = 'eu'"))
            admin.delete_queue("retired")
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("made") as sender:
                sender.send_messages(ServiceBusMessage("kept"))
    finally:
        first.kill()  # no clean shutdown

    second = start_emulator_process(*args)
    try:
        with _admin(second) as admin:
            assert admin.get_queue("made").max_delivery_count == 8
            assert admin.get_queue("orders").lock_duration == dt.timedelta(seconds=10)
            assert sorted(r.name for r in admin.list_rules("events", "all")) == ["$Default", "eu"]
            assert sorted(q.name for q in admin.list_queues()) == ["made", "orders"]
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("made") as receiver:
                (kept,) = _receive(receiver, 1)
                assert str(kept) == "kept"
                receiver.complete_message(kept)
    finally:
        assert second.terminate() == 0

    write("PT45S")  # the file's description of "orders" is edited after the runtime change
    third = start_emulator_process(*args)
    try:
        with _admin(third) as admin:
            assert admin.get_queue("orders").lock_duration == dt.timedelta(seconds=45)
            assert admin.get_queue("made").max_delivery_count == 8  # runtime-only entities are unaffected
            assert sorted(q.name for q in admin.list_queues()) == ["made", "orders"]  # retired: still deleted
    finally:
        assert third.terminate() == 0
