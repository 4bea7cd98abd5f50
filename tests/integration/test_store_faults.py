"""A store that cannot write, with the real Python SDK: the send is refused with the error Service Bus
gives when it cannot take a message, the connection and links stay, receiving and completing go on,
the refused send is never delivered nor written later, and sends are taken again once the store
writes.

Which error: a full disk (``database or disk is full``, ENOSPC) stays full until space is freed, so
the send gets QuotaExceeded (``amqp:resource-limit-exceeded`` -> ``ServiceBusQuotaExceededError``), what
Service Bus answers when an entity or namespace can take no more ("Service Bus messaging exceptions",
QuotaExceededException: "reduce the size of the entity by receiving messages"), and which the SDKs do
not retry. Any other write error may pass: ServerBusy (``com.microsoft:server-busy`` ->
``ServiceBusServerBusyError``), which the SDKs retry after a pause ("ServerBusyException").

The faults are injected into the store's SQLite connection (every statement but BEGIN/ROLLBACK raises
what SQLite raises), so the store's own commit, rollback and buffering run as they would on a full disk.
Completions go to the store's delivery journal, whose file is allocated up front, so they keep working.
"""

from __future__ import annotations

import copy
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError, ServiceBusServerBusyError

import sbemulator.runtime.composition as composition_module
from sbemulator import Emulator
from sbemulator.store.sqlite import SqliteStore
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive

FULL = "database or disk is full"


class _FailingDb:
    """The store's SQLite connection, raising ``fail`` (while set) from every statement that writes."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.fail: BaseException | None = None

    def _check(self, sql: str) -> None:
        if self.fail is not None and sql.strip().upper() not in ("BEGIN", "ROLLBACK"):
            raise self.fail

    def execute(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._db.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self._db.executemany(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class Faults:
    def __init__(self) -> None:
        self.dbs: list[_FailingDb] = []

    def fail(self, exc: BaseException | None) -> None:
        for db in self.dbs:
            db.fail = exc


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> Faults:
    faults = Faults()

    def store(path: str | Path | None = None, *args: Any, **kwargs: Any) -> SqliteStore:
        s = SqliteStore(path, *args, **kwargs)
        db = _FailingDb(s._db)
        s._db = db  # type: ignore[assignment]
        faults.dbs.append(db)
        return s

    monkeypatch.setattr(composition_module, "SqliteStore", store)
    return faults


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def emu(faults: Faults, data_dir: Path) -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as e:
        yield e


def _bodies(messages: list) -> list[str]:
    return [str(m) for m in messages]


def test_a_full_store_refuses_sends_with_quota_exceeded_keeps_the_connection_and_recovers(
    emu: Emulator, faults: Faults, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_queue_sender("orders") as sender, client.get_queue_receiver("orders") as receiver:
        sender.send_messages(ServiceBusMessage("stored-1"))
        faults.fail(sqlite3.OperationalError(FULL))
        with pytest.raises(ServiceBusQuotaExceededError) as refused:
            sender.send_messages(ServiceBusMessage("refused-1"))
        assert FULL in str(refused.value)
        with pytest.raises(ServiceBusQuotaExceededError):  # the same link, still refused, still up
            sender.send_messages([ServiceBusMessage("refused-2"), ServiceBusMessage("refused-3")])
        got = receive(receiver, 1)  # receiving and completing go on while the store is full
        assert _bodies(got) == ["stored-1"]
        receiver.complete_message(got[0])
        assert receiver.receive_messages(max_wait_time=1) == []  # nothing refused was delivered

        faults.fail(None)  # space is back: the same sender is taken again, no restart
        sender.send_messages(ServiceBusMessage("stored-2"))
        sender.send_messages(ServiceBusMessage("stored-3"))
        got = receive(receiver, 2)
        assert _bodies(got) == ["stored-2", "stored-3"]
        receiver.complete_message(got[0])
        assert receiver.receive_messages(max_wait_time=1) == []
    assert any("the store is full" in r.getMessage() for r in caplog.records)
    assert any("the store writes again" in r.getMessage() for r in caplog.records)
    emu.stop()
    # Nothing refused comes back after a restart: what is left is the one sent, not completed message.
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client, \
            client.get_queue_receiver("orders") as receiver:
        assert _bodies(receiver.peek_messages(max_message_count=10)) == ["stored-3"]


def test_another_write_error_refuses_with_server_busy(emu: Emulator, faults: Faults) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_queue_sender("orders") as sender, client.get_queue_receiver("orders") as receiver:
        faults.fail(sqlite3.OperationalError("disk I/O error"))
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("refused"))
        faults.fail(None)
        sender.send_messages(ServiceBusMessage("stored"))
        assert _bodies(receive(receiver, 2, wait=3)) == ["stored"]


def test_a_refused_send_is_not_remembered_by_duplicate_detection(emu: Emulator, faults: Faults) -> None:
    """A sender that tries again with the same MessageId after a refusal is taken, not dropped as a
    duplicate of a message that was never stored."""
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_queue_sender("dedup") as sender, client.get_queue_receiver("dedup") as receiver:
        faults.fail(OSError(28, "No space left on device"))
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage("first try", message_id="order-1"))
        faults.fail(None)
        sender.send_messages(ServiceBusMessage("second try", message_id="order-1"))
        sender.send_messages(ServiceBusMessage("third try", message_id="order-1"))  # a real duplicate now
        assert _bodies(receive(receiver, 2, wait=3)) == ["second try"]


def test_a_refused_topic_send_reaches_no_subscription(emu: Emulator, faults: Faults) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_topic_sender("events") as sender, \
            client.get_subscription_receiver("events", "all") as all_, \
            client.get_subscription_receiver("events", "high") as high:
        faults.fail(sqlite3.OperationalError(FULL))
        with pytest.raises(ServiceBusQuotaExceededError):
            sender.send_messages(ServiceBusMessage("refused", application_properties={"Priority": "High"}))
        faults.fail(None)
        sender.send_messages(ServiceBusMessage("stored", application_properties={"Priority": "High"}))
        assert _bodies(receive(all_, 2, wait=3)) == ["stored"]
        assert _bodies(receive(high, 2, wait=3)) == ["stored"]


def test_a_refused_send_into_a_paged_backlog_leaves_nothing_in_its_index(
    faults: Faults, data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A queue holding more than its read-ahead window keeps new messages only in the store and its index
    (broker/paging.py): a refused send into it is taken out of that index too, so it is never delivered,
    its size no longer counts, and no index entry names a row that was never written."""
    caplog.set_level(logging.ERROR)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False, page_window=2,
                  admin_port=None) as paged, \
            ServiceBusClient.from_connection_string(paged.connection_string, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            for i in range(4):  # two in memory, two paged out
                sender.send_messages(ServiceBusMessage(f"stored-{i}"))
            size = paged.call(lambda: paged.broker.entity_view("orders").size_in_bytes)
            faults.fail(sqlite3.OperationalError(FULL))
            with pytest.raises(ServiceBusQuotaExceededError):
                sender.send_messages(ServiceBusMessage("refused"))
            faults.fail(None)
            assert paged.call(lambda: paged.broker.entity_view("orders").size_in_bytes) == size
        with client.get_queue_receiver("orders") as receiver:
            got = receive(receiver, 5, wait=4)
            assert _bodies(got) == [f"stored-{i}" for i in range(4)]
            for m in got:
                receiver.complete_message(m)
    assert not [r for r in caplog.records if "is not in the store" in r.getMessage()]
