"""A durable store asks for commits in batches and folds its journal in a step of its own (issue #19).

Why: a durable commit's time grows with the rows it writes. A receiver granted 100,000 credits was
served in slices of 10 ms, but each slice's commit held 900-1,536 lock updates (measured in-process),
up to and over the delivery journal's room (~1,300), and then went to SQLite row by row after a fold of
the whole journal: callbacks of up to 52 ms of CPU, which every
other client waited for (``python -m bench.canary_stall --durable``). The store now says when work in
slices should stop for a commit (``commit_wanted``), and when its journal should be folded before a
commit finds it full (``fold_due`` / ``fold``); the server runs that fold as a callback of its own.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sbemulator.model import BrokerMessage
from sbemulator.scheduling import DEFAULT_SLICES
from sbemulator.store.memory import MemoryStore
from sbemulator.store.sqlite import WAL_CHECKPOINT_PAGES, SqliteStore, stored_rows

COMMIT_BATCH = DEFAULT_SLICES.commit_rows


def _message(seq: int) -> BrokerMessage:
    m = BrokerMessage(b"", {}, b"body", str(seq), None, None, None, None, None, None, None, None, None, None, 10)
    m.sequence_number = seq
    m.enqueued_time_ms = 1_000 + seq
    return m


def _filled(path: Path, count: int) -> tuple[SqliteStore, list[BrokerMessage]]:
    store = SqliteStore(path / "store.db")
    messages = [_message(seq) for seq in range(1, count + 1)]
    for m in messages:
        store.put_message("q", m)
    store.commit()
    return store, messages


def test_commit_is_wanted_once_a_batch_of_writes_is_buffered(tmp_path: Path) -> None:
    store, messages = _filled(tmp_path, COMMIT_BATCH + 10)
    for m in messages[:COMMIT_BATCH - 1]:
        m.delivery_count += 1
        store.update_message("q", m)
    assert not store.commit_wanted()
    messages[COMMIT_BATCH - 1].delivery_count += 1
    store.update_message("q", messages[COMMIT_BATCH - 1])
    assert store.commit_wanted()
    store.commit()
    assert not store.commit_wanted()
    store.close()


def test_a_purge_slice_counts_its_rows_toward_the_batch(tmp_path: Path) -> None:
    store, _ = _filled(tmp_path, COMMIT_BATCH)
    store.delete_messages("q", range(1, COMMIT_BATCH + 1))  # one range, COMMIT_BATCH rows
    assert store.commit_wanted()
    store.commit()
    assert not store.commit_wanted()
    store.close()
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert stored_rows(db) == []


def test_the_memory_store_never_wants_a_commit() -> None:
    store = MemoryStore()
    for seq in range(1, 2 * COMMIT_BATCH):
        store.update_message("q", _message(seq))
    assert not store.commit_wanted()
    assert not store.fold_due()
    store.fold()  # nothing to do, and no error


def test_the_journal_is_due_for_a_fold_before_it_is_full_and_a_fold_writes_it_to_sqlite(tmp_path: Path) -> None:
    store, messages = _filled(tmp_path, 4 * COMMIT_BATCH)
    rounds = 0
    while not store.fold_due():
        batch = messages[rounds * COMMIT_BATCH:(rounds + 1) * COMMIT_BATCH]
        assert batch, "the journal never came due for a fold"
        for m in batch:
            m.delivery_count += 1
            store.update_message("q", m)
        store.commit()  # a batch of delivery-state updates: one journal record, nothing in SQLite yet
        rounds += 1
    journal = store._journal
    assert journal is not None and journal.updates and journal.filled < 1.0  # due with room to spare
    updated = rounds * COMMIT_BATCH
    store.fold()
    assert not store.fold_due() and not journal
    # the delivery counts are in SQLite now (read over the store's own connection: it holds the file)
    counts = {seq: count for _, seq, _, count, *_ in stored_rows(store._db)}
    assert all(counts[seq] == 1 for seq in range(1, updated + 1))
    assert all(counts[seq] == 0 for seq in range(updated + 1, 4 * COMMIT_BATCH + 1))
    store.close()


def test_the_wal_is_checkpointed_in_small_steps(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (WAL_CHECKPOINT_PAGES,)
    store.close()
