"""A data directory written by an older emulator opens and loses nothing: schema 1 (one ``messages``
table, bodies in its rows, a size column added later) is rewritten into schema 2 (``message_index`` and
``message_data``, sbemulator/store/sqlite.py) when it is opened, and the delivery journal it left behind
still applies."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sbemulator.broker import MessageState, ReceiveMode
from sbemulator.model import BrokerMessage
from sbemulator.store import SqliteStore
from sbemulator.store.journal import DeliveryJournal
from sbemulator.store.serialize import encode_message
from sbemulator.store.sqlite import stored_rows
from tests.fixtures.broker import FakeClock, make_broker, msg, receiver

# The schema-1 messages table as the previous release created it (the size column came later: a store
# older still has none, and its rows' sizes are in their data).
_V1_MESSAGES = """
CREATE TABLE messages(
    entity TEXT NOT NULL, seq INTEGER NOT NULL, state INTEGER NOT NULL, delivery_count INTEGER NOT NULL,
    enqueued_ms INTEGER NOT NULL, expires_ms INTEGER, data BLOB NOT NULL{size}, PRIMARY KEY(entity, seq)
);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sequences(entity TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
INSERT INTO meta(key, value) VALUES ('schema', '1');
"""
_FAR = 4_000_000_000_000  # an expiry in 2096
QUEUES = [{"Name": "q", "Properties": {}}, {"Name": "other", "Properties": {}}]
TOPICS = [{"Name": "t", "Subscriptions": [{"Name": "s"}]}]


def _v1_store(path: Path, *, with_size: bool) -> None:
    """Seven messages in q (one deferred, one with two deliveries), three in t/subscriptions/s."""
    db = sqlite3.connect(path)
    db.executescript(_V1_MESSAGES.format(size=", size INTEGER" if with_size else ""))
    rows = []
    for entity, seq, state, count in [*(("q", i, 0, 0) for i in range(1, 8)), *(("t/subscriptions/s", i, 0, 0)
                                                                                 for i in range(1, 4))]:
        if (entity, seq) == ("q", 3):
            state = int(MessageState.DEFERRED)
        if (entity, seq) == ("q", 5):
            count = 2
        message = BrokerMessage.from_incoming(msg(f"{entity}-{seq}".encode(), message_id=f"{entity}-{seq}",
                                                  application_properties={"n": seq}, size=100 + seq))
        row = [entity, seq, state, count, 1_000 + seq, None if seq % 2 else _FAR + seq, encode_message(message)]
        rows.append((*row, 100 + seq) if with_size else tuple(row))
    db.executemany(f"INSERT INTO messages VALUES ({', '.join('?' * len(rows[0]))})", rows)
    db.executemany("INSERT INTO sequences VALUES (?, ?)", [("q", 7), ("t", 3)])
    db.commit()
    db.close()


@pytest.mark.parametrize("with_size", [True, False], ids=["with-sizes", "before-sizes"])
def test_a_schema_1_store_opens_migrated_and_loses_nothing(tmp_path: Path, with_size: bool) -> None:
    path = tmp_path / "sbemulator.db"
    _v1_store(path, with_size=with_size)
    # The old process completed q's message 1 and locked message 2 (its count went to 1) through the
    # journal, then died before folding it: both must hold after the migration.
    journal = DeliveryJournal(path.with_name(path.name + "-delivery-log"))
    assert journal.append([("q", 1)], [(("q", 2), (0, 1, 1_002, _FAR + 2))])
    journal.close()

    store = SqliteStore(path, page_window=2)
    db = store._db
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("2",)
    assert db.execute("SELECT name FROM sqlite_master WHERE name = 'messages'").fetchone() is None
    rows = {(e, s): (state, count, enq, exp, size) for e, s, state, count, enq, exp, size in stored_rows(db)}
    assert set(rows) == {*(("q", i) for i in range(2, 8)), *(("t/subscriptions/s", i) for i in range(1, 4))}
    assert rows[("q", 2)] == (0, 1, 1_002, _FAR + 2, 102)  # the journaled update, size from the row
    assert rows[("q", 3)][0] == int(MessageState.DEFERRED)
    assert rows[("q", 5)] == (0, 2, 1_005, None, 105)
    assert all(size == 100 + seq for (_, seq), (*_, size) in rows.items())

    # The broker over the migrated store: every message once, in order, bodies and properties intact.
    b, _ = make_broker(QUEUES, TOPICS, clock=FakeClock(), store=store)
    got = [(d.message.sequence_number, d.message.body_raw, d.message.application_properties["n"],
            d.message.delivery_count) for d in receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE).take(10)]
    assert got == [(seq, f"q-{seq}".encode(), seq, count) for seq, count in ((2, 2), (4, 1), (5, 3), (6, 1), (7, 1))]
    (deferred,) = b.receive_deferred("q", [3], ReceiveMode.RECEIVE_AND_DELETE)
    assert (deferred.message.sequence_number, deferred.message.body_raw) == (3, b"q-3")
    subscription = receiver(b, "t/subscriptions/s", ReceiveMode.RECEIVE_AND_DELETE).take(10)
    assert [d.message.body_raw for d in subscription] == [f"t/subscriptions/s-{i}".encode() for i in range(1, 4)]
    b.commit()
    b.close()
    assert SqliteStore(path).load_sequences() == {"q": 7, "t": 3}


def test_a_migration_killed_before_its_commit_leaves_the_old_layout(tmp_path: Path) -> None:
    path = tmp_path / "sbemulator.db"
    _v1_store(path, with_size=True)

    # The process dies (no cleanup at all) after every row was copied, before the commit.
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os
        from sbemulator.store import SqliteStore
        SqliteStore._write_ids = lambda self: os._exit(9)
        SqliteStore({str(path)!r})
    """)], timeout=60)
    assert killed.returncode == 9
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone() == (10,)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("1",)
    db.close()
    store = SqliteStore(path)  # the next start migrates it
    assert len(stored_rows(store._db)) == 10
    store.close()
