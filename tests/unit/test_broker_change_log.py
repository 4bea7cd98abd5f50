"""The broker's change log (``begin_change`` / ``end_change``, sbemulator.broker.topology): a management
change taken back leaves entities, rules, receivers, locks and the store's pending writes as they were,
and one kept ends the receivers it ends only then. The management plane uses it for writes the store
could not take (tests/integration/test_store_faults_admin.py has them over HTTP with the SDKs)."""

from __future__ import annotations

import dataclasses

from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig
from sbemulator.store import SqliteStore
from tests.fixtures.broker import make_broker, msg, receiver

QUEUES = [{"Name": "orders", "Properties": {"LockDuration": "PT30S"}}]
TOPICS = [{"Name": "events", "Subscriptions": [{"Name": "all"}, {"Name": "high", "Rules": [
    {"Name": "high", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "Priority = 'High'"}}}]}]}]


def _shape(b) -> dict:
    return {v.path: (v.config, tuple(v.rules)) for v in b.entity_views()}


def _pending(store: SqliteStore) -> tuple:
    return (dict(store._messages), list(store._entity_ops), dict(store._sequences))


def test_a_change_taken_back_leaves_everything_as_it_was() -> None:
    store = SqliteStore(None)
    b, _ = make_broker(QUEUES, TOPICS, store=store)
    b.send("orders", [msg(b"kept")])
    r = receiver(b, "orders")
    (locked,) = r.take(1)
    store.commit()
    before, pending = _shape(b), _pending(store)

    b.begin_change()
    b.create_queue(QueueConfig(name="new-queue"))
    b.create_topic(TopicConfig(name="new-topic", subscriptions=(SubscriptionConfig(name="s"),)))
    b.create_subscription("events", SubscriptionConfig(name="new-sub"))
    b.update_entity("orders", dataclasses.replace(b.describe("orders"), max_delivery_count=2, status="Disabled"))
    b.add_rule("events/Subscriptions/all", RuleConfig(name="low", filter_type="Sql", sql_expression="1=1"))
    b.remove_rule("events/Subscriptions/high", "high")
    b.delete_entity("events/Subscriptions/all")
    b.delete_entity("orders")
    b.end_change(False)

    assert _shape(b) == before
    assert _pending(store) == pending  # nothing buffered for a later commit
    assert r.ended_by is None and not r.closed  # neither the suspension nor the delete ended it
    r.complete(locked.lock_token)  # its lock held throughout
    assert b.message_count("orders") == 0


def test_a_kept_change_ends_the_receivers_of_what_it_deleted_once_it_is_kept() -> None:
    b, _ = make_broker(QUEUES, TOPICS)
    b.send("orders", [msg(b"m")])
    r = receiver(b, "orders")
    r.take(1)
    b.begin_change()
    b.delete_entity("orders")
    assert r.ended_by is None  # held while the change may still be taken back
    b.end_change(True)
    assert r.ended_by is not None
    assert "orders" not in b.entity_paths()
