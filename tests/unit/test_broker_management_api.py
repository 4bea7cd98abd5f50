"""The broker's public management API (views, update, purge, reset, resubmit) and what survives a
restart when the config file and the store disagree (see sbemulator.broker.topology)."""

from __future__ import annotations

import pytest

from sbemulator.broker import ReceiveMode
from sbemulator.broker.errors import (
    EntityNotFoundError,
    InvalidOperationError,
    MessageLockLostError,
    MessageNotFoundError,
)
from sbemulator.broker.views import SessionView
from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig
from sbemulator.store import SqliteStore
from tests.fixtures.broker import FakeClock, make_broker, msg, receiver

QUEUES = [{"Name": "orders", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 1}}]
SESSIONS = {"Name": "sq", "Properties": {"RequiresSession": True, "LockDuration": "PT30S"}}
TOPICS = [{"Name": "events", "Subscriptions": [{"Name": "all"}]}]


def broker():
    b, _ = make_broker(QUEUES, TOPICS)
    return b


def dead_letter_one(b, path: str, body: bytes) -> None:
    r = receiver(b, path)
    (d,) = r.take(1)
    r.dead_letter(d.lock_token, reason="Bad", description="why")
    r.close()


def test_views_list_entities_with_counts_and_sizes() -> None:
    b = broker()
    b.send("orders", [msg(b"a"), msg(b"b"), msg(b"c", scheduled_enqueue_time_ms=b._now() + 60_000)])
    dead_letter_one(b, "orders", b"a")
    assert [(v.kind, v.path) for v in b.entity_views()] == [
        ("queue", "orders"), ("topic", "events"), ("subscription", "events/Subscriptions/all")]
    view = b.entity_view("ORDERS")
    assert (view.counts.active, view.counts.scheduled, view.counts.dead_letter, view.counts.total) == (1, 1, 1, 3)
    assert view.size_in_bytes == 33 and view.last_enqueued_ms > 0 and not view.created_at_runtime
    (sub,) = b.entity_views(topic="events")
    assert (sub.name, sub.topic, [r.name for r in sub.rules]) == ("all", "events", ["$Default"])
    assert b.find_entity("orders/$DeadLetterQueue") is None and b.find_entity("ghost") is None
    with pytest.raises(EntityNotFoundError):
        b.entity_views(topic="orders")


def test_update_changes_settings_in_place_and_keeps_messages() -> None:
    b = broker()
    b.send("orders", [msg(b"kept")])
    b.update_entity("orders", QueueConfig(name="orders", lock_duration=5.0, max_delivery_count=9))
    assert b.resolve("orders").lock_duration_ms == 5000
    assert b.entity_view("orders").counts.active == 1
    with pytest.raises(InvalidOperationError, match="RequiresSession"):
        b.update_entity("orders", QueueConfig(name="orders", requires_session=True))
    with pytest.raises(InvalidOperationError):
        b.update_entity("orders", SubscriptionConfig(name="orders"))


def test_purge_a_dead_letter_queue_only_or_everything() -> None:
    b = broker()
    b.send("orders", [msg(b"a"), msg(b"b")])
    dead_letter_one(b, "orders", b"a")
    assert b.purge("orders/$DeadLetterQueue") == 1
    assert b.entity_view("orders").counts.as_dict()["active"] == 1
    b.send("events", [msg(b"e")])
    assert b.purge("events") == 1 and b.purge("orders") == 1
    assert b.entity_view("orders").counts.total == 0


def test_purge_without_sub_queues_keeps_dead_letters_and_subscriptions() -> None:
    b = broker()
    b.send("orders", [msg(b"a"), msg(b"b"), msg(b"later", scheduled_enqueue_time_ms=b.now_ms() + 60_000)])
    dead_letter_one(b, "orders", b"a")
    assert b.purge("orders", sub_queues=False) == 2
    assert b.entity_view("orders").counts.as_dict() == {
        "active": 0, "deferred": 0, "scheduled": 0, "dead_letter": 1, "transfer_dead_letter": 0}
    b.send("events", [msg(b"now"), msg(b"later", scheduled_enqueue_time_ms=b.now_ms() + 60_000)])
    assert b.purge("events", sub_queues=False) == 1  # the topic's own (scheduled) message only
    assert b.entity_view("events/Subscriptions/all").counts.active == 1


def test_resubmit_dead_lettered_messages_as_new_messages() -> None:
    b = broker()
    b.send("orders", [msg(b"a", application_properties={"k": 1})])
    dead_letter_one(b, "orders", b"a")
    (dead,) = b.peek("orders/$DeadLetterQueue", 0, 10)
    (new_seq,) = b.resubmit_dead_lettered("orders").sequence_numbers
    assert new_seq > dead.sequence_number
    (again,) = b.peek("orders", 0, 10)
    assert (again.sequence_number, again.body_raw, again.delivery_count) == (new_seq, b"a", 0)
    assert again.application_properties == {"k": 1} and again.dead_letter_reason is None
    assert b.peek("orders/$DeadLetterQueue", 0, 10) == []
    with pytest.raises(MessageNotFoundError):
        b.resubmit_dead_lettered("orders", [12345])


def test_resubmit_leaves_messages_a_receiver_holds_locked() -> None:
    b = broker()
    b.send("orders", [msg(b"a"), msg(b"b"), msg(b"c")])
    for body in (b"a", b"b", b"c"):
        dead_letter_one(b, "orders", body)
    dead = [m.sequence_number for m in b.peek("orders/$DeadLetterQueue", 0, 10)]
    holder = receiver(b, "orders/$DeadLetterQueue")
    (held,) = holder.take(1)
    # A missing number anywhere in the selection moves nothing.
    with pytest.raises(MessageNotFoundError):
        b.resubmit_dead_lettered("orders", [dead[1], 12345])
    assert b.entity_view("orders").counts.dead_letter == 3
    chosen = b.resubmit_dead_lettered("orders", [held.message.sequence_number, dead[1]])
    assert chosen.skipped_locked == (held.message.sequence_number,) and len(chosen.sequence_numbers) == 1
    rest = b.resubmit_dead_lettered("orders")
    assert rest.skipped_locked == (held.message.sequence_number,) and len(rest.sequence_numbers) == 1
    assert sorted(m.body_raw for m in b.peek("orders", 0, 10)) == [b"b", b"c"]
    holder.complete(held.lock_token)  # the receiver can still settle what it holds
    assert b.entity_view("orders").counts.dead_letter == 0


def test_resubmit_from_a_subscription_goes_back_to_that_subscription_only() -> None:
    b, _ = make_broker(QUEUES, [{"Name": "events", "Subscriptions": [{"Name": "all"}, {"Name": "other"}]}])
    b.send("events", [msg(b"x")])
    dead_letter_one(b, "events/Subscriptions/all", b"x")
    r = receiver(b, "events/Subscriptions/other", ReceiveMode.RECEIVE_AND_DELETE)
    assert len(r.take(5)) == 1
    b.resubmit_dead_lettered("events/Subscriptions/all/$DeadLetterQueue")
    assert [m.body_raw for m in b.peek("events/Subscriptions/all", 0, 10)] == [b"x"]
    assert r.take(5) == []


def test_session_views_show_messages_locks_and_state() -> None:
    b, clock = make_broker([SESSIONS])
    b.send("sq", [msg(b"a1", session_id="a"), msg(b"a2", session_id="a"), msg(b"b1", session_id="b")])
    holder = receiver(b, "sq", session_id="b")
    b.set_session_state("sq", "b", b"step 2")
    until = int(clock.now * 1000) + 30_000
    assert b.session_views("sq") == [SessionView("a", 2, None, None), SessionView("b", 1, until, b"step 2")]
    clock.advance(31)  # the session lock has ended: the view says so even before the broker's timer runs
    assert b.session_views("sq")[1].locked_until_ms is None
    holder.close()
    b.purge("sq")
    assert [s.id for s in b.session_views("sq")] == ["b"]  # no messages, but state
    assert b.now_ms() == clock.now * 1000


def test_reset_restores_the_file_topology() -> None:
    b = broker()
    b.create_queue(QueueConfig(name="extra"))
    b.update_entity("orders", QueueConfig(name="orders", max_delivery_count=9))
    b.delete_entity("events/Subscriptions/all")
    b.send("orders", [msg(b"a")])
    assert b.reset() == {"deleted": 1, "purged": 1}
    assert [v.path for v in b.entity_views()] == ["orders", "events", "events/Subscriptions/all"]
    assert b.entity_view("orders").config.max_delivery_count == 1


# ------------------------------------------------------------------ restart: the config file and the store
def _restart(db, queues=QUEUES, topics=TOPICS, clock=None):
    clock = clock or FakeClock()
    b, _ = make_broker(queues, topics, clock=clock, store=SqliteStore(db))
    return b


def _stop(b) -> None:
    b.commit()
    b.close()


def test_runtime_changes_survive_a_restart_while_the_file_is_unchanged(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.create_queue(QueueConfig(name="made", max_delivery_count=4))
    b.update_entity("orders", QueueConfig(name="orders", lock_duration=5.0))
    b.add_rule("events/Subscriptions/all", RuleConfig("r", "Sql", "a = 1"))
    b.send("orders", [msg(b"kept")])
    _stop(b)

    b = _restart(db)
    assert b.entity_view("made").config.max_delivery_count == 4 and b.entity_view("made").created_at_runtime
    assert b.resolve("orders").lock_duration_ms == 5000
    assert [r.name for r in b.list_rules("events/Subscriptions/all")] == ["$Default", "r"]
    assert b.entity_view("orders").counts.active == 1
    _stop(b)


def test_editing_the_file_after_a_runtime_change_makes_the_file_win(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.update_entity("orders", QueueConfig(name="orders", lock_duration=5.0))
    b.send("orders", [msg(b"kept")])
    _stop(b)

    edited = [{"Name": "orders", "Properties": {"LockDuration": "PT45S", "MaxDeliveryCount": 1}}]
    b = _restart(db, queues=edited)
    assert b.resolve("orders").lock_duration_ms == 45_000  # the file's newer description
    assert b.entity_view("orders").counts.active == 1  # messages stay
    _stop(b)
    b = _restart(db, queues=edited)  # the stored change was dropped, not merely overridden once
    assert b.resolve("orders").lock_duration_ms == 45_000
    _stop(b)
    b = _restart(db)  # back to the original file: still the file
    assert b.resolve("orders").lock_duration_ms == 30_000
    _stop(b)


def test_deleting_a_file_entity_lasts_until_the_file_changes_it(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.delete_entity("events")
    _stop(b)
    b = _restart(db)
    assert b.find_entity("events") is None and b.find_entity("events/Subscriptions/all") is None
    _stop(b)
    edited = [{"Name": "events", "Properties": {"DefaultMessageTimeToLive": "PT5M"},
               "Subscriptions": [{"Name": "all"}]}]
    b = _restart(db, topics=edited)
    assert b.find_entity("events/Subscriptions/all") is not None
    _stop(b)


def test_the_file_declaring_a_runtime_entity_wins_and_undeclared_changes_go(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.create_queue(QueueConfig(name="later-declared", max_delivery_count=4))
    b.update_entity("orders", QueueConfig(name="orders", lock_duration=5.0))
    _stop(b)
    queues = [{"Name": "later-declared", "Properties": {"MaxDeliveryCount": 7}}]  # orders removed from the file
    b = _restart(db, queues=queues)
    assert b.entity_view("later-declared").config.max_delivery_count == 7
    assert not b.entity_view("later-declared").created_at_runtime
    assert b.find_entity("orders") is None
    _stop(b)


def test_reset_forgets_stored_changes(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.update_entity("orders", QueueConfig(name="orders", lock_duration=5.0))
    b.delete_entity("events")
    b.reset()
    _stop(b)
    b = _restart(db)
    assert b.resolve("orders").lock_duration_ms == 30_000 and b.find_entity("events") is not None
    _stop(b)


def test_stored_subscription_of_a_vanished_topic_is_dropped(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.create_subscription("events", SubscriptionConfig(name="extra"))
    _stop(b)
    b = _restart(db, topics=[])
    assert b.entity_views() == [b.entity_view("orders")]
    _stop(b)
    b = _restart(db)  # the topic is back in the file; the runtime subscription was forgotten
    assert [v.name for v in b.entity_views(topic="events")] == ["all"]
    _stop(b)



def test_a_deleted_file_topic_recreated_through_the_api_stays_without_the_file_subscriptions(tmp_path) -> None:
    db = tmp_path / "db.sqlite"
    b = _restart(db)
    b.delete_entity("events")
    b.create_topic(TopicConfig(name="events"))
    _stop(b)
    b = _restart(db)
    assert b.find_entity("events") is not None and b.entity_views(topic="events") == []
    _stop(b)


def test_a_purge_loses_the_locks_empties_sessions_and_is_durable_but_keeps_what_comes_after(tmp_path) -> None:
    # a purge works per container (its locks, sessions and one range delete in the store), not per
    # message (issue #19: 100,000 one by one held the event loop and the commit for 0.2-0.9 s)
    db = tmp_path / "sb.db"
    b, clock = make_broker([*QUEUES, SESSIONS], store=SqliteStore(db))
    b.send("orders", [msg(str(i).encode()) for i in range(50)])
    b.send("sq", [msg(b"s", session_id=sid) for sid in ("a", "b") for _ in range(3)])
    b.commit()
    r = receiver(b, "orders")
    locked = r.take(10)
    rs = receiver(b, "sq", session_id="a")
    assert len(rs.take(3)) == 3
    b.send("orders", [msg(b"pending")])  # not committed yet: its write is dropped with the rest
    assert b.purge("orders") == 51 and b.purge("sq") == 6
    assert b.entity_view("orders").size_in_bytes == 0
    b.send("orders", [msg(b"after")])  # same commit window as the purge: kept
    b.commit()
    with pytest.raises(MessageLockLostError):
        r.complete(locked[0].lock_token)
    assert r.take(100)[0].message.body_raw == b"after"
    assert rs.take(5) == [] and b.entity_view("sq").counts.total == 0
    assert b.list_sessions("sq") == []
    b.close()
    b2, _ = make_broker([*QUEUES, SESSIONS], store=SqliteStore(db), clock=clock)
    assert [m.body_raw for m in b2.peek("orders", 0, 100)] == [b"after"]
    assert b2.peek("sq", 0, 100) == []
    b2.close()
