"""An OS crash (or a power loss) simulated at the store layer: what the durability modes keep of what
the store confirmed.

An OS crash loses what the kernel had not written to the disk; what a process fsynced (msync for a
mapping) before the crash is there. The simulation intercepts the store's two writers: SQLite's
connection (after each COMMIT that returned, the database and WAL files as they are now count as on
the disk only when the connection runs with ``synchronous=FULL``: SQLite fsyncs the WAL before such a
COMMIT returns, "PRAGMA synchronous", sqlite.org/pragma.html; with ``NORMAL`` in WAL mode, "a
transaction committed in WAL mode with synchronous=NORMAL might roll back following a power loss or
system crash", so nothing after the last checkpoint is counted, conservatively none) and the delivery
journal (its file as it is after each ``sync``, the msync that ``full`` makes before a record is
confirmed). The crash then puts those last synced copies in a fresh directory, and a new store opens
them as after a reboot.

What a confirmation is here: the broker's commit returned (the server writes an accept or a
settlement's echo only after it, runtime/server.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sbemulator.store.base import FULL, PROCESS
from sbemulator.store.journal import DeliveryJournal
from sbemulator.store.sqlite import SqliteStore
from tests.fixtures.broker import FakeClock, make_broker, msg, receiver

FILES = ("sbemulator.db", "sbemulator.db-wal", "sbemulator.db-delivery-log")


class _Disk:
    """The copies of the store's files that an OS crash would leave: taken when each writer synced."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.synced: dict[str, bytes | None] = {}

    def take(self, *names: str) -> None:
        for name in names:
            path = self.directory / name
            self.synced[name] = path.read_bytes() if path.exists() else None

    def crash_into(self, target: Path) -> None:
        target.mkdir()
        for name, data in self.synced.items():
            if data is not None:
                (target / name).write_bytes(data)


class _Connection:
    """The store's SQLite connection: after a COMMIT returns, its files count as on the disk when SQLite
    fsynced them (``synchronous=FULL``)."""

    def __init__(self, db: sqlite3.Connection, disk: _Disk) -> None:
        self._db = db
        self._disk = disk
        self._full = db.execute("PRAGMA synchronous").fetchone()[0] >= 2

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._db.execute(sql, *args)
        if self._full and sql.strip().upper() == "COMMIT":
            self._disk.take("sbemulator.db", "sbemulator.db-wal")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


@pytest.fixture
def intercepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Disk:
    disk = _Disk(tmp_path / "data")
    real_sync = DeliveryJournal.sync

    def sync(self: DeliveryJournal) -> None:
        real_sync(self)
        disk.take(self.path.name)

    monkeypatch.setattr(DeliveryJournal, "sync", sync)
    return disk


def _run(durability: str, disk: _Disk) -> tuple[set[int], set[int], SqliteStore]:
    """Sends confirmed, then completions confirmed, locks in between, as the server commits them (each
    batch one commit); returns (sequence numbers of confirmed sends, of confirmed completions)."""
    store = SqliteStore(disk.directory / "sbemulator.db", durability=durability)
    disk.take(*FILES)  # what was there before this process wrote anything
    store._db = _Connection(store._db, disk)  # type: ignore[assignment]
    broker, _ = make_broker([{"Name": "q"}], clock=FakeClock(), store=store)
    sent: set[int] = set()
    completed: set[int] = set()
    for batch in range(75):  # 1,500 sends, 20 a commit
        broker.send("q", [msg(f"m{batch}-{i}".encode()) for i in range(20)])
        broker.commit()
        sent.update(range(batch * 20 + 1, batch * 20 + 21))
    r = receiver(broker, "q")
    for _ in range(60):  # 1,200 completions, one a commit: more than the journal holds, so it folds on its way
        taken = r.take(20)
        broker.commit()  # the locks' delivery counts
        for delivery in taken:
            r.complete(delivery.lock_token)
            broker.commit()
            completed.add(delivery.message.sequence_number)
    return sent, completed, store


def _after_crash(disk: _Disk, target: Path) -> set[int]:
    disk.crash_into(target)
    store = SqliteStore(target / "sbemulator.db")
    try:
        return {m.sequence_number for entity, m in store.load_messages() if entity == "q"}  # type: ignore[union-attr]
    finally:
        store.close()


def test_full_loses_nothing_confirmed_in_an_os_crash(intercepted: _Disk, tmp_path: Path) -> None:
    sent, completed, _store = _run(FULL, intercepted)
    left = _after_crash(intercepted, tmp_path / "rebooted")
    assert left == sent - completed  # every confirmed send there, no confirmed completion back


def test_process_may_lose_confirmed_sends_and_completions_in_an_os_crash(intercepted: _Disk, tmp_path: Path) -> None:
    """What ``process`` promises is a killed process, not an OS crash: here (no WAL checkpoint counted)
    the crash takes every send and completion since start-up. What a real crash takes is what the kernel
    had not written back yet: by default up to about 30 s of writes (vm.dirty_expire_centisecs)."""
    sent, _completed, _store = _run(PROCESS, intercepted)
    left = _after_crash(intercepted, tmp_path / "rebooted")
    assert not left & sent  # the confirmed sends are gone
