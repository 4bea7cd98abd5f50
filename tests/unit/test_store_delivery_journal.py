"""The delivery journal beside the SQLite store: a completion confirmed before a kill stays completed
and a delivery counted before it stays counted, a torn record is ignored, a fold empties it, and a
key written again after its deletion survives."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from sbemulator.broker import ReceiveMode
from sbemulator.store import SqliteStore
from sbemulator.store.journal import DeliveryJournal
from sbemulator.store.sqlite import stored_rows
from tests.fixtures.broker import FakeClock, bodies, make_broker, msg, receiver

REPO = Path(__file__).resolve().parents[2]
QUEUES = [{"Name": "q", "Properties": {}}]


def _rows(db: Path) -> int:
    return _query(db, "SELECT COUNT(*) FROM message_index")


def _stored(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return stored_rows(conn)
    finally:
        conn.close()


def _query(db: Path, sql: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_completions_confirmed_before_a_kill_stay_completed(tmp_path):
    db = tmp_path / "sb.db"
    # A separate process that completes two of three locked messages, commits (the point after which
    # the emulator confirms), and dies without closing anything.
    script = textwrap.dedent(f"""
        import os
        from tests.fixtures.broker import make_broker, msg, receiver
        from sbemulator.store import SqliteStore
        b, _ = make_broker({QUEUES!r}, [], store=SqliteStore({str(db)!r}))
        b.send("q", [msg(body=str(i).encode()) for i in range(5)])
        b.commit()
        r = receiver(b, "q")
        taken = r.take(3)
        b.commit()
        r.complete(taken[0].lock_token)
        r.complete(taken[1].lock_token)
        b.commit()
        os._exit(9)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, timeout=60, capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    assert _rows(db) == 5  # the two deletions are only in the journal so far
    assert max(row[3] for row in _stored(db)) == 0  # and so are the deliveries

    b, _ = make_broker(QUEUES, [], clock=FakeClock(), store=SqliteStore(db))
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    again = r.take(10)
    assert bodies(again) == [b"2", b"3", b"4"]
    # the one locked when the process died was delivered once before: that delivery still counts
    assert [d.message.delivery_count for d in again] == [2, 1, 1]
    b.close()


def test_a_torn_record_and_what_follows_it_are_ignored(tmp_path):
    journal = DeliveryJournal(tmp_path / "j")
    assert journal.append([("q", 1)])
    assert journal.append([("q", 2), ("t/subscriptions/s", 3)])
    journal.close()
    raw = bytearray((tmp_path / "j").read_bytes())
    raw[-1 - raw[::-1].index(b"s"[0])] ^= 0xFF  # one byte of the second record's payload
    (tmp_path / "j").write_bytes(bytes(raw))
    assert DeliveryJournal(tmp_path / "j").keys == {("q", 1)}


def test_records_of_a_folded_journal_are_not_read_back(tmp_path):
    journal = DeliveryJournal(tmp_path / "j")
    journal.append([("q", 1), ("q", 2)])
    journal.reset()
    journal.append([("q", 7)])
    journal.close()
    assert DeliveryJournal(tmp_path / "j").keys == {("q", 7)}


def test_updates_are_read_back_with_the_deletions(tmp_path):
    journal = DeliveryJournal(tmp_path / "j")
    assert journal.append([("q", 1)], [(("q", 2), (0, 3, 1000, None)), (("t/subscriptions/s", 4), (2, 1, 5, 9))])
    assert journal.append([], [(("q", 2), (0, 4, 1000, None))])
    journal.close()
    again = DeliveryJournal(tmp_path / "j")
    assert again.deletes == {("q", 1)}
    assert again.updates == {("q", 2): (0, 4, 1000, None), ("t/subscriptions/s", 4): (2, 1, 5, 9)}


def test_a_full_journal_refuses_and_the_store_folds_it_into_sqlite(tmp_path):
    small = DeliveryJournal(tmp_path / "j", size=64)
    assert small.append([("q", 1)])
    assert not small.append([("q", n) for n in range(2, 10)])

    db = tmp_path / "sb.db"
    store = SqliteStore(db)
    b, _ = make_broker(QUEUES, [], store=store)
    b.send("q", [msg() for _ in range(3000)])
    b.commit()
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    for _ in range(3000):
        assert len(r.take(1)) == 1
        b.commit()
    in_journal = len(store._journal.keys)
    assert 0 < in_journal < 3000  # it filled up at least once and was folded
    assert len(stored_rows(store._db)) == in_journal
    b.close()
    assert _rows(db) == 0  # a clean shutdown folds the rest


def test_a_key_written_again_after_its_journaled_deletion_survives_a_restart(tmp_path):
    db = tmp_path / "sb.db"
    store = SqliteStore(db)
    b, _ = make_broker(QUEUES, [], store=store)
    b.send("q", [msg(body=b"first")])
    b.commit()
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    (first,) = r.take(1)
    b.commit()
    assert store._journal.keys == {("q", first.message.sequence_number)}
    # The same key stored again (as after an entity is deleted and created anew): the journal is
    # folded in that transaction, so a replay at start-up cannot delete the new row.
    first.message.body_raw = b"again"
    store.put_message("q", first.message)
    store.commit()
    assert not store._journal.keys
    assert _rows_in(store) == 1
    store._db.close()  # no clean shutdown


def _rows_in(store: SqliteStore) -> int:
    return len(stored_rows(store._db))


class _KilledRightAfterCommit:
    """A connection stand-in whose owner dies the moment the transaction that rewrote a message row
    has committed: the worst moment for a journal that still holds older values of that row."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db, self._rewrote, self._dead = db, False, False

    def execute(self, sql: str, *args):
        if self._dead:
            raise SystemExit("dead")  # nothing more happens, not even a ROLLBACK
        result = self._db.execute(sql, *args)
        if sql == "COMMIT" and self._rewrote:
            self._dead = True
            raise SystemExit("killed after COMMIT")
        return result

    def executemany(self, sql: str, rows):
        self._rewrote |= sql.lstrip().upper().startswith("INSERT") and "message_" in sql
        return self._db.executemany(sql, rows)


def test_a_kill_after_a_commit_that_met_the_journal_does_not_bring_back_older_values(tmp_path):
    """A journaled delivery-state update, then a general commit with newer values for the same
    message: whenever the process dies after that commit, a restart must not replay the older
    journaled values over the newer row."""
    db = tmp_path / "sb.db"
    store = SqliteStore(db)
    b, _ = make_broker(QUEUES, [], store=store)
    b.send("q", [msg(body=b"m")])
    b.commit()
    (delivery,) = receiver(b, "q").take(1)  # peek-lock: delivery count 1, journaled
    b.commit()
    message = delivery.message
    assert store._journal.updates
    journaled_count = message.delivery_count
    message.delivery_count = journaled_count + 5  # newer values, written with a full row
    message.body_raw = b"rewritten"
    store.put_message("q", message)
    real = store._db
    store._db = _KilledRightAfterCommit(real)
    try:
        store.commit()
    except SystemExit:
        pass
    real.close()  # no clean shutdown
    again = SqliteStore(db)
    try:
        ((*_, count, _enqueued, _expires, _size),) = stored_rows(again._db)
        assert count == journaled_count + 5
    finally:
        again.close()


def test_a_fold_deletes_exactly_the_journaled_rows_whatever_their_gaps(tmp_path):
    # The fold deletes runs of consecutive sequence numbers with one range delete each: a message
    # between two completed ones (still locked, deferred, abandoned) and the other entity's rows stay.
    db = tmp_path / "sb.db"
    queues = [{"Name": "a", "Properties": {}}, {"Name": "a2", "Properties": {}}]
    b, _ = make_broker(queues, [], store=SqliteStore(db))
    b.send("a", [msg(body=str(i).encode()) for i in range(1, 11)])
    b.send("a2", [msg(body=str(i).encode()) for i in range(1, 6)])
    b.commit()
    in_a, in_a2 = receiver(b, "a"), receiver(b, "a2")
    taken_a, taken_a2 = in_a.take(10), in_a2.take(5)
    b.commit()
    for index in (0, 1, 2, 4, 6, 7):  # sequence numbers 1-3, 5, 7-8
        in_a.complete(taken_a[index].lock_token)
        b.commit()  # one journal record per completion, as on the SDK's path
    in_a2.complete(taken_a2[1].lock_token)
    b.commit()
    b.store.fold_journal()
    b.close()  # the store holds its database exclusively while open
    assert _rows(db) == 15 - 7
    rows = _stored(db)
    assert [row[1] for row in rows if row[0] == "a"] == [4, 6, 9, 10]
    assert [row[1] for row in rows if row[0] == "a2"] == [1, 3, 4, 5]
