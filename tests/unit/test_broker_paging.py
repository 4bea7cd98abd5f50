"""Durable queues and subscriptions keep an index of the messages beyond their read-ahead window and page
the bodies from the store (broker/paging.py): the broker over a real SQLite store with a tiny window."""

from __future__ import annotations

from sbemulator.broker import MessageState, ReceiveMode
from sbemulator.scheduling import DEFAULT_SLICES, Slices
from sbemulator.store import SqliteStore
from sbemulator.store import sqlite as sqlite_store
from tests.fixtures.broker import FakeClock, bodies, make_broker, msg, receiver

QUEUES = [{"Name": "q", "Properties": {"MaxDeliveryCount": 5}}]
TOPICS = [{"Name": "t", "Subscriptions": [{"Name": "s"}]}]
WINDOW = 2


def open_broker(path, clock, window: int = WINDOW, slices: Slices = DEFAULT_SLICES):
    return make_broker(QUEUES, TOPICS, clock=clock, store=SqliteStore(path, page_window=window), slices=slices)[0]


def _entity(b, path):
    return b._topology.entity(path)


def _send(b, path, n, start=0):
    b.send(path, [msg(f"m{i}".encode(), message_id=str(i), application_properties={"i": i})
                  for i in range(start, start + n)])


def test_messages_beyond_the_window_wait_in_the_store_and_arrive_in_order_exactly_once(tmp_path):
    b = open_broker(tmp_path / "sb.db", FakeClock())
    _send(b, "q", 10)
    ent = _entity(b, "q")
    assert len(ent.messages) == WINDOW and len(ent.cold) == 8  # the rest are index entries only
    assert b.message_count("q") == 10 and b.counts("q")["active"] == 10
    assert b.entity_view("q").size_in_bytes == sum(len(f"m{i}") + 10 for i in range(10))
    assert ent.held_bytes == b.entity_view("q").size_in_bytes  # what MaxSizeInMegabytes counts
    r = receiver(b, "q")
    got = []
    for _ in range(10):
        batch = r.take(3)
        if not batch:
            break
        assert len(ent.messages) <= 2 * WINDOW + 3  # in memory: the window and what is locked
        for d in batch:
            got.append(d.message.body_raw)
            assert d.message.application_properties["i"] == int(d.message.body_raw[1:])
            r.complete(d.lock_token)
        b.commit()
    assert got == [f"m{i}".encode() for i in range(10)]
    assert ent.cold is None and not ent.messages and ent.held_bytes == 0
    b.close()


def test_peek_reads_paged_out_messages_without_paging_them_in(tmp_path):
    b = open_broker(tmp_path / "sb.db", FakeClock())
    _send(b, "q", 6)
    peeked = b.peek("q", 1, 10)  # before the commit: the store's pending writes are read too
    assert [(m.sequence_number, m.body_raw) for m in peeked] == [(i + 1, f"m{i}".encode()) for i in range(6)]
    b.commit()
    assert [m.body_raw for m in b.peek("q", 4, 2)] == [b"m3", b"m4"]
    assert [m.application_properties["i"] for m in b.peek("q", 1, 10)] == list(range(6))
    assert len(_entity(b, "q").cold) == 4
    b.close()


def test_a_restart_reads_only_the_index_and_keeps_delivery_counts(tmp_path):
    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    _send(b, "q", 8)
    r = receiver(b, "q")
    first = r.take(1)
    r.abandon(first[0].lock_token)  # delivery count 1, back in front
    b.close()

    b2 = open_broker(db, clock)
    ent = _entity(b2, "q")
    assert not ent.messages and len(ent.cold) == 8  # no message was read whole at start-up
    r2 = receiver(b2, "q", ReceiveMode.RECEIVE_AND_DELETE)
    got = r2.take(10) + r2.take(10) + r2.take(10) + r2.take(10) + r2.take(10)
    assert bodies(got) == [f"m{i}".encode() for i in range(8)]
    assert got[0].header_delivery_count == 1 and got[1].header_delivery_count == 0
    _send(b2, "q", 1, start=8)
    assert b2.peek("q", 0, 1)[0].sequence_number == 9  # the counter survived the paged restart
    b2.close()


def test_a_restart_loads_the_index_in_chunks_with_every_entry_as_stored(tmp_path, monkeypatch):
    # The store hands the index over in chunks that SQLite concatenates (store/sqlite.py _load_index):
    # chunks of 3 entries over 11 messages, entries holding zero bytes (small numbers) and large ones
    # (times), a deferred message among them that must not enter the index. (Entries without an expiry,
    # -1, load in test_store_migration.)
    monkeypatch.setattr(sqlite_store, "_LOAD_ROWS", 3)
    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    b.send("q", [msg(f"m{i}".encode(), message_id=str(i), time_to_live_ms=None if i % 2 else 1_000_000 + i)
                 for i in range(11)])
    r = receiver(b, "q")
    (taken,) = r.take(1)
    r.defer(taken.lock_token)
    b.close()

    b2 = open_broker(db, clock)
    ent = _entity(b2, "q")
    assert list(ent.cold.seqs) == list(range(2, 12)) and list(ent.messages) == [1]
    assert list(ent.cold.sizes) == [len(f"m{i}") + 10 for i in range(1, 11)]
    assert ent.held_bytes == sum(len(f"m{i}") + 10 for i in range(11))
    got = []
    r2 = receiver(b2, "q", ReceiveMode.RECEIVE_AND_DELETE)
    while batch := r2.take(4):
        got += batch
    assert [d.message.body_raw for d in got] == [f"m{i}".encode() for i in range(1, 11)]
    ttls = [d.message.expires_at_ms - d.message.enqueued_time_ms for d in got]
    assert ttls[1::2] == [1_000_000 + i for i in range(2, 11, 2)]  # as sent
    assert len(set(ttls[0::2])) == 1 and ttls[0] > 1_000_010  # the entity default
    b2.close()


def test_deferral_and_receive_by_sequence_number_on_a_paged_backlog(tmp_path):
    b = open_broker(tmp_path / "sb.db", FakeClock())
    _send(b, "q", 9)
    r = receiver(b, "q")
    d1, d2 = r.take(2)
    r.defer(d2.lock_token)
    r.complete(d1.lock_token)
    b.commit()
    (deferred,) = b.receive_deferred("q", [d2.message.sequence_number], ReceiveMode.PEEK_LOCK)
    assert deferred.message.body_raw == b"m1" and deferred.message.state == MessageState.DEFERRED
    b.update_disposition("q", [deferred.lock_token], "completed")
    rest = []
    while batch := r.take(4):
        rest += batch
        for d in batch:
            r.complete(d.lock_token)
    assert bodies(rest) == [f"m{i}".encode() for i in range(2, 9)]
    b.close()


def test_scheduled_messages_activate_behind_a_paged_backlog(tmp_path):
    clock = FakeClock()
    b = open_broker(tmp_path / "sb.db", clock)
    (seq,) = b.schedule("q", [msg(b"later", scheduled_enqueue_time_ms=int((clock.now + 30) * 1000))])
    _send(b, "q", 5)
    clock.advance(31)
    b.tick()
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    got = []
    while batch := r.take(3):
        got += batch
    assert bodies(got) == [b"m0", b"m1", b"m2", b"m3", b"m4", b"later"]
    assert got[-1].message.sequence_number > seq
    b.close()


def test_a_subscription_pages_and_purge_removes_paged_out_messages(tmp_path):
    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    _send(b, "t", 7)
    sub = _entity(b, "t/Subscriptions/s")
    assert len(sub.cold) == 5
    r = receiver(b, "t/Subscriptions/s", ReceiveMode.RECEIVE_AND_DELETE)
    assert bodies(r.take(3)) == [b"m0", b"m1", b"m2"]
    assert b.purge("t") == 4
    assert b.message_count("t/Subscriptions/s") == 0 and not r.take(5)
    b.close()
    b2 = open_broker(db, clock)
    assert b2.message_count("t/Subscriptions/s") == 0
    b2.close()


def test_window_zero_keeps_every_message_in_memory(tmp_path):
    b = open_broker(tmp_path / "sb.db", FakeClock(), window=0)
    _send(b, "q", 5)
    ent = _entity(b, "q")
    assert ent.cold is None and len(ent.messages) == 5
    b.close()


def test_a_window_larger_than_one_read_pages_in_a_read_at_a_time_and_keeps_the_order(tmp_path):
    """However large the window, one page-in reads at most Slices.page_in_rows rows (one read holds the
    event loop); the next read comes when those are taken, before any newer message in memory."""
    b = open_broker(tmp_path / "sb.db", FakeClock(), window=4, slices=Slices(page_in_rows=2))
    _send(b, "q", 12)
    ent = _entity(b, "q")
    assert len(ent.messages) == 4 and len(ent.cold) == 8
    r = receiver(b, "q")
    got, indexed = [], len(ent.cold)
    while True:
        batch = r.take(1)
        if not batch:
            break
        got.append(batch[0].message.body_raw)
        r.complete(batch[0].lock_token)
        now_indexed = 0 if ent.cold is None else len(ent.cold)
        assert indexed - now_indexed <= 2  # read from the index two at a time, not a window of four
        indexed = now_indexed
        b.commit()
    assert got == [f"m{i}".encode() for i in range(12)]
    b.close()


# --- dead-letter queues: a poison flood is a backlog too ------------------------------------------------
_SHUFFLED = [3, 0, 7, 1, 9, 2, 8, 4, 6, 5]  # dead-lettered out of sequence order, as settlements come


def _dead_letter_all(b, path, n):
    """Send ``n`` messages to ``path`` (a subscription's: to its topic) and dead-letter them in the
    order of ``_SHUFFLED``."""
    _send(b, path.split("/")[0], n)
    r = receiver(b, path)
    taken = []
    while batch := r.take(4):
        taken += batch
    assert len(taken) == n
    for i in [i for i in _SHUFFLED if i < n]:
        r.dead_letter(taken[i].lock_token, reason="poison", description=f"m{i}")
    b.commit()
    return [d.message.sequence_number for d in taken]


def test_a_dead_letter_queue_beyond_the_window_pages_and_delivers_in_sequence_order(tmp_path):
    # "Dead-letter queues": messages there keep their sequence numbers; they arrive out of order here.
    b = open_broker(tmp_path / "sb.db", FakeClock())
    seqs = _dead_letter_all(b, "q", 10)
    dlq = _entity(b, "q/$DeadLetterQueue")
    assert len(dlq.messages) == WINDOW and len(dlq.cold) == 8  # the rest are index entries only
    assert list(dlq.cold.seqs) == sorted(dlq.cold.seqs)
    assert b.message_count("q/$DeadLetterQueue") == 10 and b.counts("q")["dead_letter"] == 10
    size = sum(len(f"m{i}") + 10 for i in range(10))
    assert _entity(b, "q").held_bytes == size == b.entity_view("q").size_in_bytes  # its MaxSizeInMegabytes
    peeked = b.peek("q/$DeadLetterQueue", 1, 20)
    assert [m.sequence_number for m in peeked] == seqs
    assert [m.application_properties["DeadLetterReason"] for m in peeked] == ["poison"] * 10
    r = receiver(b, "q/$DeadLetterQueue", ReceiveMode.RECEIVE_AND_DELETE)
    got = []
    while batch := r.take(3):
        got += batch
    assert bodies(got) == [f"m{i}".encode() for i in range(10)]
    assert [d.message.application_properties["DeadLetterErrorDescription"] for d in got] == [
        f"m{i}" for i in range(10)]
    assert dlq.cold is None and not dlq.messages and _entity(b, "q").held_bytes == 0
    b.close()


def test_a_paged_dead_letter_queue_survives_a_restart_as_its_index(tmp_path):
    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    _dead_letter_all(b, "t/Subscriptions/s", 7)
    b.close()

    b2 = open_broker(db, clock)
    dlq = _entity(b2, "t/Subscriptions/s/$DeadLetterQueue")
    assert not dlq.messages and len(dlq.cold) == 7  # no dead-lettered message was read whole at start-up
    assert _entity(b2, "t").held_bytes == sum(len(f"m{i}") + 10 for i in range(7))
    r = receiver(b2, "t/Subscriptions/s/$DeadLetterQueue")
    got = []
    while batch := r.take(2):
        got += batch
        for d in batch:
            r.complete(d.lock_token)
        b2.commit()
    assert bodies(got) == [f"m{i}".encode() for i in range(7)]
    assert got[0].message.dead_letter_reason == "poison"
    b2.close()
    b3 = open_broker(db, clock)
    assert b3.message_count("t/Subscriptions/s/$DeadLetterQueue") == 0
    b3.close()


def test_resubmitting_and_purging_a_paged_dead_letter_queue(tmp_path):
    b = open_broker(tmp_path / "sb.db", FakeClock())
    seqs = _dead_letter_all(b, "q", 10)
    dlq = _entity(b, "q/$DeadLetterQueue")
    paged_out = list(dlq.cold.seqs[dlq.cold.head:])[-2:]
    one = b.resubmit_dead_lettered("q", paged_out)  # picked by number while paged out
    assert len(one.sequence_numbers) == 2 and b.message_count("q/$DeadLetterQueue") == 8
    rest = b.resubmit_dead_lettered("q")  # all of them, a store read at a time
    assert len(rest.sequence_numbers) == 8 and not rest.skipped_locked
    assert b.message_count("q/$DeadLetterQueue") == 0 and b.message_count("q") == 10
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    got = []
    while batch := r.take(4):
        got += batch
    by_body = sorted(int(d.message.body_raw[1:]) for d in got)
    assert by_body == list(range(10))
    assert all("DeadLetterReason" not in d.message.application_properties for d in got)
    assert _entity(b, "q").held_bytes == 0

    _dead_letter_all(b, "q", 6)
    assert dlq.cold is not None and b.message_count("q/$DeadLetterQueue") == 6
    assert b.purge("q/$DeadLetterQueue") == 6
    assert dlq.cold is None and b.message_count("q/$DeadLetterQueue") == 0 and _entity(b, "q").held_bytes == 0
    assert seqs  # the first flood's numbers were used
    b.close()


def test_a_resubmission_taken_back_leaves_no_index_entry_in_a_paged_queue(tmp_path):
    # A management change the store cannot write is taken back (topology.begin_change); a resubmitted
    # message that went straight to its queue's index must leave it too, or the index names a row that
    # was never written and the queue's size keeps counting it.
    b = open_broker(tmp_path / "sb.db", FakeClock())
    _dead_letter_all(b, "q", 4)
    _send(b, "q", 3)  # the queue's window (2) is full: resubmitted messages are paged out
    b.commit()
    q, dlq = _entity(b, "q"), _entity(b, "q/$DeadLetterQueue")
    held = q.held_bytes
    b.begin_change()
    moved = b.resubmit_dead_lettered("q")
    assert len(moved.sequence_numbers) == 4 and b.message_count("q") == 7
    b.end_change(False)
    assert b.message_count("q") == 3 and list(q.cold.seqs[q.cold.head:]) == [max(q.messages) + 1]
    assert b.message_count("q/$DeadLetterQueue") == 4 and q.held_bytes == held
    b.commit()
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    got = []
    while batch := r.take(4):
        got += batch
    assert bodies(got) == [b"m0", b"m1", b"m2"]
    assert len(bodies(receiver(b, "q/$DeadLetterQueue", ReceiveMode.RECEIVE_AND_DELETE).take(10))) == 4
    assert dlq.cold is None and q.held_bytes == 0
    b.close()
