"""A deleted entity's messages are freed a slice at a time after the delete (issue #19).

Why: freeing 100,000 message objects at once, and summing a deleted subscription's message sizes for its
topic's quota, held the event loop for tens of milliseconds. The topology takes the messages out of the
deleted containers (``PurgeJob.detach``) and ``Broker.drop_step`` frees them; the server runs the steps in
callbacks of its own (a job of the scheduler: runtime/background.py ``EntityCleanup``).
"""

from __future__ import annotations

import pytest

from sbemulator.broker.errors import EntityNotFoundError
from sbemulator.scheduling import Budget, Slices
from tests.fixtures.broker import make_broker, msg, receiver

TOPICS = [{"Name": "t", "Subscriptions": [{"Name": "a"}, {"Name": "b"}]}]


def _steps(b, items: int = 1024) -> int:
    steps = 0
    while b.drops:
        b.drop_step(Budget(0.0, slices=Slices(purge_items=items)))  # one chunk of ``items`` a step
        steps += 1
        assert steps < 10_000
    return steps


def test_a_deleted_subscriptions_messages_are_freed_in_slices_and_its_topic_quota_given_back():
    b, _ = make_broker([], TOPICS)
    for start in range(0, 1000, 100):
        b.send("t", [msg(b"x" * 90) for _ in range(start, start + 100)])  # size 100 each, in both subscriptions
    r = receiver(b, "t/Subscriptions/a")
    assert len(r.take(40)) == 40  # locked when it goes
    topic = b._topology.entity("t")
    assert topic.quota.held_bytes == 2 * 1000 * 100
    sub = b._topology.entity("t/Subscriptions/a")
    b.delete_entity("t/Subscriptions/a")
    assert not sub.messages and not sub.locks  # out of the entity at once
    assert b.drops
    assert _steps(b, 50) >= 1000 // 50
    assert topic.quota.held_bytes == 1000 * 100  # what b holds
    assert len(b.peek("t/Subscriptions/b", 0, 2000)) == 1000


def test_a_delete_taken_back_keeps_every_message_and_frees_nothing():
    b, _ = make_broker([{"Name": "q"}])
    b.send("q", [msg() for _ in range(30)])
    b.commit()
    b.begin_change()
    b.delete_entity("q")
    b.end_change(False)
    assert not b.drops
    assert len(b.peek("q", 0, 100)) == 30


def test_a_kept_delete_frees_its_messages_once_it_is_written():
    b, _ = make_broker([{"Name": "q"}])
    b.send("q", [msg() for _ in range(30)])
    b.commit()
    b.begin_change()
    b.delete_entity("q")
    assert not b.drops  # nothing taken out before the change is kept: it could still be taken back
    b.commit()
    b.end_change(True)
    assert b.drops
    _steps(b)
    with pytest.raises(EntityNotFoundError):
        b.peek("q", 0, 10)
