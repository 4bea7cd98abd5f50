"""A purge in slices (broker/purge.py), on the broker over a real SQLite store with a tiny read-ahead window.

The messages leave the entity when the purge begins (nothing of them is delivered, peeked or counted after
that, a lock on one is lost), everything that arrives later stays, the slices drop exactly the purged
messages' rows, and a restart in the middle of a purge keeps every message the purge had not finished with
(issue #19: a purge of 100,000 no longer holds the event loop in one call).
"""

from __future__ import annotations

import pytest

from sbemulator.broker import MessageLockLostError, ReceiveMode
from sbemulator.scheduling import Budget, Slices
from sbemulator.store import SqliteStore
from tests.fixtures.broker import FakeClock, make_broker, msg, receiver

QUEUES = [{"Name": "q", "Properties": {"MaxDeliveryCount": 5}}]
TOPICS = [{"Name": "t", "Subscriptions": [{"Name": "s"}]}]



def _slice(items: int) -> Budget:
    """One chunk of ``items`` messages: a slice whose time is spent at once (Slices.purge_items)."""
    return Budget(0.0, slices=Slices(purge_items=items))

def _broker(path, clock, window: int = 2):
    return make_broker(QUEUES, TOPICS, clock=clock, store=SqliteStore(path, page_window=window))[0]


def _send(b, path, n, start=0):
    b.send(path, [msg(f"m{i}".encode(), message_id=str(i)) for i in range(start, start + n)])


def _drain(b, path):
    r = receiver(b, path, ReceiveMode.RECEIVE_AND_DELETE)
    got = []
    while batch := r.take(5):
        got += batch
    b.commit()
    return sorted(int(d.message.body_raw[1:]) for d in got)


def test_a_purge_removes_what_was_there_when_it_began_and_keeps_what_came_after(tmp_path):
    clock = FakeClock()
    b = _broker(tmp_path / "sb.db", clock)
    _send(b, "q", 20)
    b.commit()
    r = receiver(b, "q")
    locked = r.take(3)  # in memory, locked; the rest partly paged out (window 2)
    b.commit()
    job = b.begin_purge("q")
    assert job.removed == 20
    assert b.counts("q")["active"] == 0 and b.message_count("q") == 0
    with pytest.raises(MessageLockLostError):  # "the message has already been removed from the queue"
        r.complete(locked[0].lock_token)
    _send(b, "q", 4, start=100)  # sent while the purge runs: kept
    b.commit()
    while not job.step(_slice(3)):
        b.commit()
    b.commit()
    assert b.counts("q")["active"] == 4
    assert b._topology.entity("q").held_bytes == sum(len(f"m{i}") + 10 for i in range(100, 104))
    b.close()
    again = _broker(tmp_path / "sb.db", clock)
    assert _drain(again, "q") == [100, 101, 102, 103]
    again.close()


def test_a_message_dead_lettered_during_a_purge_of_the_dead_letter_queue_is_kept(tmp_path):
    """Dead-lettered messages keep their sequence numbers, so one dead-lettered while its dead-letter queue
    is purged can fall between purged ones: the slices delete exactly the purged numbers' rows."""
    clock = FakeClock()
    b = _broker(tmp_path / "sb.db", clock, window=0)
    _send(b, "q", 5)
    r = receiver(b, "q")
    taken = r.take(5)
    for i in (0, 1, 3, 4):
        r.dead_letter(taken[i].lock_token, reason="poison")
    b.commit()
    job = b.begin_purge("q/$DeadLetterQueue")
    r.dead_letter(taken[2].lock_token, reason="late")  # its number lies between the purged ones
    b.commit()
    while not job.step(_slice(1)):
        b.commit()
    b.commit()
    assert job.removed == 4 and b.message_count("q/$DeadLetterQueue") == 1
    b.close()
    again = _broker(tmp_path / "sb.db", clock, window=0)
    assert _drain(again, "q/$DeadLetterQueue") == [2]
    again.close()


def test_a_restart_in_the_middle_of_a_purge_keeps_what_it_had_not_dropped(tmp_path):
    """A process killed between slices: the rows of the slices committed are gone, every other message is
    still there (the purge had not answered, so none of them was reported purged); nothing sent during
    the purge is lost."""
    clock = FakeClock()
    b = _broker(tmp_path / "sb.db", clock)
    _send(b, "q", 30)
    b.commit()
    job = b.begin_purge("q")
    _send(b, "q", 2, start=200)
    b.commit()
    job.step(_slice(10))
    b.commit()
    b.store._db.close()  # the process dies: nothing more is written (no close, no final commit)
    again = _broker(tmp_path / "sb.db", clock)
    left = _drain(again, "q")
    assert len(left) == 22 and left[-2:] == [200, 201] and set(left[:-2]) <= set(range(30))
    again.close()


def test_purging_a_topic_in_slices_purges_its_subscriptions_and_counts_every_message(tmp_path):
    clock = FakeClock()
    b = _broker(tmp_path / "sb.db", clock)
    receiver(b, "t/Subscriptions/s")
    _send(b, "t", 9)
    b.commit()
    job = b.begin_purge("t")
    assert job.removed == 9 and b.message_count("t/Subscriptions/s") == 0
    assert job.run() == 9 and job.done
    b.commit()
    _send(b, "t", 1, start=50)
    b.commit()
    assert _drain(b, "t/Subscriptions/s") == [50]
    b.close()
