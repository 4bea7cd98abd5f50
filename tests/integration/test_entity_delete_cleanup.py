"""Deleting a durable queue that holds thousands of messages, through the SDK's administration client.

The delete is answered once it is durable and the queue is gone at once; its stored rows are deleted
afterwards, a slice per event-loop callback (store/sqlite.py ``drop_slice``, issue #19). Whatever happens
to the process meanwhile (a restart before the cleanup ended, a SIGKILL right after the answer), a queue
re-created under the same name starts empty (Service Bus: "Deleting a queue also deletes its messages",
learn.microsoft.com/azure/service-bus-messaging/service-bus-queues-topics-subscriptions).
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError
from azure.servicebus.management import ServiceBusAdministrationClient

from devhost.local_services import emulator_admin_connection_string
from sbemulator import Emulator
from sbemulator.scheduling import Slices
from sbemulator.store.sqlite import SqliteStore, dropped_rows, stored_rows
from tests.fixtures.emulator import queue, receive, topology
from tests.fixtures.process import start_emulator_process

COUNT = 3000
TOPOLOGY = topology(queues=[queue("big"), queue("other")])


def _fill(connection_string: str, name: str, count: int) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_sender(name) as sender:
        for start in range(0, count, 500):
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(start, min(count, start + 500))])


def _admin(emu: Emulator) -> ServiceBusAdministrationClient:
    assert emu.admin_connection_string is not None
    return ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                                 connection_verify=emu.ca_path)


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _rows(emu: Emulator) -> tuple[int, list]:
    """(rows of deleted containers still stored, rows of live ones) over the store's own connection."""
    assert emu.server is not None
    db = emu.server.store._db  # type: ignore[attr-defined]
    return emu.call(lambda: (dropped_rows(db), stored_rows(db)))


def _only_new(connection_string: str) -> list[str]:
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_receiver("big") as receiver:
        return [str(m) for m in receiver.peek_messages(max_message_count=50, sequence_number=0)]


def test_a_deleted_queue_of_thousands_is_cleaned_up_in_slices_and_a_new_one_starts_empty(tmp_path, monkeypatch):
    small = Slices(drop_rows=100)  # every slice boundary crossed many times
    slices = []
    real = SqliteStore.drop_slice
    monkeypatch.setattr(SqliteStore, "drop_slice", lambda self, rows=0: (slices.append(1), real(self, rows))[1])
    data = tmp_path / "data"
    with Emulator(TOPOLOGY, in_memory=False, data_dir=data, slices=small) as emu:
        _fill(emu.connection_string, "big", COUNT)
        _fill(emu.connection_string, "other", 3)
        with ServiceBusClient.from_connection_string(emu.connection_string) as client, \
                client.get_queue_receiver("big") as receiver, _admin(emu) as admin:
            locked = receive(receiver, 40)
            assert len(locked) == 40
            admin.delete_queue("big")
            # gone at once: the receiver's link is detached with amqp:not-found
            with pytest.raises(MessagingEntityNotFoundError):
                receiver.receive_messages(max_message_count=1, max_wait_time=2)
            _wait_for(lambda: _rows(emu)[0] == 0)
            assert len(slices) >= COUNT // 100
            assert {row[0] for row in _rows(emu)[1]} == {"other"}
            admin.create_queue("big")
        assert _only_new(emu.connection_string) == []
        _fill(emu.connection_string, "big", 1)
    with Emulator(TOPOLOGY, in_memory=False, data_dir=data) as emu:
        assert _only_new(emu.connection_string) == ["m0"]
        dropped, rows = _rows(emu)
        assert dropped == 0
        assert sorted(row[0] for row in rows) == ["big", "other", "other", "other"]


def test_a_restart_before_the_cleanup_ended_brings_nothing_back(tmp_path, monkeypatch):
    data = tmp_path / "data"
    with monkeypatch.context() as patch:
        patch.setattr(SqliteStore, "drop_slice", lambda self, rows=0: None)  # this process never cleans up
        with Emulator(TOPOLOGY, in_memory=False, data_dir=data) as emu:
            _fill(emu.connection_string, "big", COUNT)
            with _admin(emu) as admin:
                admin.delete_queue("big")
            assert _rows(emu)[0] == 2 * COUNT
    with Emulator(TOPOLOGY, in_memory=False, data_dir=data) as emu:
        with _admin(emu) as admin:
            assert "big" not in [q.name for q in admin.list_queues()]
            admin.create_queue("big")
        assert _only_new(emu.connection_string) == []
        _wait_for(lambda: _rows(emu)[0] == 0)
        assert _rows(emu)[1] == []


def test_a_kill_right_after_the_delete_brings_nothing_back(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TOPOLOGY))
    data = tmp_path / "data"
    args = ("--config", str(config), "--data-dir", str(data))

    def admin_of(proc) -> ServiceBusAdministrationClient:
        conn = emulator_admin_connection_string(proc.connection_string, proc.admin_url)
        return ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=proc.ca_path)

    first = start_emulator_process(*args)
    try:
        _fill(first.connection_string, "big", COUNT)
        with admin_of(first) as admin:
            admin.delete_queue("big")
    finally:
        first.kill()  # SIGKILL wherever the cleanup had got to
    second = start_emulator_process(*args)
    try:
        with admin_of(second) as admin:
            assert "big" not in [q.name for q in admin.list_queues()]
            admin.create_queue("big")
        assert _only_new(second.connection_string) == []
        _fill(second.connection_string, "big", 1)
    finally:
        second.kill()
    third = start_emulator_process(*args)
    try:
        assert _only_new(third.connection_string) == ["m0"]
    finally:
        assert third.terminate() == 0
    db = sqlite3.connect(data / "sbemulator.db")
    try:
        live = stored_rows(db)
        assert [row[:2] for row in live] == [("big", 1)]
        # every other row is a deleted container's, still to be deleted by a later start's cleanup
        assert db.execute("SELECT count(*) FROM message_index").fetchone()[0] * 2 == 2 * len(live) + dropped_rows(db)
    finally:
        db.close()
