"""A deleted entity's stored rows: out of sight with the delete's commit, deleted later a slice at a time.

Why: range-deleting 100,000 rows in the delete's own commit held the event loop for ~167 ms (issue #19).
The delete's transaction only takes the containers' ids out of ``entity_ids`` and records them in
``dropped_ids``; ``Store.fold`` then deletes their rows ``Slices.drop_rows`` at a time (store/sqlite.py).
"""

from __future__ import annotations

import sqlite3

from sbemulator.config import QueueConfig
from sbemulator.scheduling import DEFAULT_SLICES, Slices
from sbemulator.store import SqliteStore
from sbemulator.store.sqlite import dropped_rows, stored_rows
from tests.fixtures.broker import FakeClock, make_broker, msg, receiver

QUEUES = [{"Name": "q"}, {"Name": "other"}]


def _broker(path, clock, slices: Slices = DEFAULT_SLICES):
    store = SqliteStore(path, slices=slices)
    return make_broker(QUEUES, clock=clock, store=store)[0], store


def _fill(b, path: str, n: int) -> None:
    for start in range(0, n, 500):
        b.send(path, [msg(f"m{i}".encode()) for i in range(start, min(n, start + 500))])
    b.commit()


def _clean_up(store: SqliteStore) -> int:
    """Run the store's deferred work as the server does (one fold per callback) until none is due."""
    folds = 0
    while store.fold_due():
        store.fold()
        folds += 1
        assert folds < 10_000
    return folds


def test_a_delete_hides_the_rows_at_once_and_the_folds_delete_them_a_slice_at_a_time(tmp_path):
    clock = FakeClock()
    b, store = _broker(tmp_path / "sb.db", clock, Slices(drop_rows=64))
    _fill(b, "q", 1000)
    _fill(b, "other", 10)
    r = receiver(b, "q")
    assert len(r.take(30)) == 30  # some of them locked when the queue goes
    b.commit()
    b.delete_entity("q")
    b.commit()
    # nothing of q is visible any more, but its rows are still there, to be deleted later
    assert {row[0] for row in stored_rows(store._db)} == {"other"}
    assert dropped_rows(store._db) == 2000  # index and data rows
    assert store.fold_due()
    assert _clean_up(store) >= 1000 // 64
    assert dropped_rows(store._db) == 0
    assert store._db.execute("SELECT count(*) FROM dropped_ids").fetchone()[0] == 0
    assert len(stored_rows(store._db)) == 10
    # re-created: empty, and its new messages are its own
    b.create_queue(QueueConfig(name="q"))
    assert b.peek("q", 0, 10) == []
    b.send("q", [msg(b"new")])
    b.close()
    b, store = _broker(tmp_path / "sb.db", clock)
    assert [m.body_raw for m in b.peek("q", 0, 10)] == [b"new"]
    assert len(b.peek("other", 0, 100)) == 10
    b.close()


def test_rows_left_by_a_process_that_stopped_before_the_cleanup_stay_hidden_and_are_deleted_later(tmp_path):
    clock = FakeClock()
    b, store = _broker(tmp_path / "sb.db", clock)
    _fill(b, "q", 300)
    b.delete_entity("q")
    b.close()  # the cleanup never ran
    b, store = _broker(tmp_path / "sb.db", clock)
    assert b.peek("other", 0, 10) == []
    assert dropped_rows(store._db) == 600
    b.create_queue(QueueConfig(name="q"))
    assert b.peek("q", 0, 10) == []
    b.send("q", [msg(b"new")])
    b.commit()
    _clean_up(store)
    assert dropped_rows(store._db) == 0
    assert [row[:2] for row in stored_rows(store._db)] == [("q", 1)]
    b.close()


def test_ids_are_never_reused_after_the_cleanup(tmp_path):
    clock = FakeClock()
    b, store = _broker(tmp_path / "sb.db", clock)
    _fill(b, "other", 1)
    _fill(b, "q", 5)  # the highest id
    dropped = store._ids["q"]
    b.delete_entity("q")
    b.commit()
    _clean_up(store)
    b.close()
    b, store = _broker(tmp_path / "sb.db", clock)
    b.create_queue(QueueConfig(name="q"))
    _fill(b, "q", 1)
    assert store._ids["q"] > dropped
    b.close()


def test_a_delete_taken_back_keeps_the_rows(tmp_path):
    clock = FakeClock()
    b, store = _broker(tmp_path / "sb.db", clock)
    _fill(b, "q", 20)
    savepoint = store.savepoint()
    store.delete_entity("q")
    store.rollback_to(savepoint)
    store.commit()
    assert not store.fold_due()
    assert dropped_rows(store._db) == 0
    assert len(stored_rows(store._db)) == 20
    b.close()
    b, store = _broker(tmp_path / "sb.db", clock)
    assert len(b.peek("q", 0, 100)) == 20
    b.close()


def test_a_data_directory_without_the_dropped_ids_table_opens_and_gains_it(tmp_path):
    clock = FakeClock()
    b, store = _broker(tmp_path / "sb.db", clock)
    _fill(b, "q", 3)
    b.close()
    db = sqlite3.connect(tmp_path / "sb.db")
    db.execute("DROP TABLE dropped_ids")
    db.commit()
    db.close()
    b, store = _broker(tmp_path / "sb.db", clock)
    assert len(b.peek("q", 0, 10)) == 3
    b.delete_entity("q")
    b.commit()
    assert dropped_rows(store._db) == 6
    _clean_up(store)
    assert dropped_rows(store._db) == 0
    b.close()


def test_a_deleted_topic_takes_its_subscriptions_rows_and_a_new_one_of_the_name_starts_empty(tmp_path):
    from sbemulator.config import SubscriptionConfig, TopicConfig

    clock = FakeClock()
    store = SqliteStore(tmp_path / "sb.db")
    b = make_broker([], [{"Name": "t", "Subscriptions": [{"Name": "a"}, {"Name": "b"}]}], clock=clock,
                    store=store)[0]
    b.send("t", [msg(f"m{i}".encode()) for i in range(50)])
    b.commit()
    r = receiver(b, "t/Subscriptions/a")
    r.dead_letter(r.take(1)[0].lock_token)  # a row in a sub-queue too
    b.commit()
    b.delete_entity("t")
    b.commit()
    assert stored_rows(store._db) == []
    # 50 messages in each subscription, plus the dead-lettered one's copy in a's sub-queue, whose original row
    # the delivery journal deleted (a journal record of a dropped container is not folded: the cleanup takes it)
    assert dropped_rows(store._db) == 2 * 101
    while b.drops:  # what the server's deferred-work callbacks do
        b.drop_step()
    _clean_up(store)
    assert dropped_rows(store._db) == 0
    b.create_topic(TopicConfig(name="t", subscriptions=(SubscriptionConfig(name="a"),)))
    assert b.peek("t/Subscriptions/a", 0, 10) == []
    assert b.peek("t/Subscriptions/a/$DeadLetterQueue", 0, 10) == []
    b.close()
