"""The management backend over a real Broker and SQLite store (no sockets): validation, create/update
semantics, persistence of what the admin API creates or changes, purge and reset; the ARM JSON mapping."""

from __future__ import annotations

import json

import pytest

from sbemulator.admin import arm
from sbemulator.admin.backend import Namespace, entity_name_from_forward
from sbemulator.admin.errors import BadRequest, Conflict, NotFound
from sbemulator.broker.core import Broker
from sbemulator.config import NamespaceConfig, QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig
from sbemulator.model import IncomingMessage
from sbemulator.store.sqlite import SqliteStore

CONFIG = NamespaceConfig(
    queues=(QueueConfig("orders"),),
    topics=(TopicConfig("events", subscriptions=(SubscriptionConfig("all"),)),),
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ns(clock: Clock) -> Namespace:
    broker = Broker(CONFIG, SqliteStore(None), clock=clock)
    return Namespace(broker, clock=clock)


def send(ns: Namespace, path: str, n: int = 1, **kwargs) -> None:
    ns.broker.send(path, [IncomingMessage(body_raw=b"x", size=10, **kwargs) for _ in range(n)])


@pytest.mark.parametrize("name", ["a", "a.b-c_d", "a/b/c", "Q1", "x" * 260])
def test_valid_queue_names(ns: Namespace, name: str) -> None:
    info, created = ns.put("queue", name, {}, mode="create")
    assert created and info.name == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "a b", "a//b", "a/$resources", "x" * 261, "ä", "aäb", "a?b",
                                  "t/subscriptions/x"])
def test_invalid_queue_names(ns: Namespace, name: str) -> None:
    with pytest.raises(BadRequest):
        ns.put("queue", name, {}, mode="create")


def test_subscription_and_rule_names_are_shorter_and_flat(ns: Namespace) -> None:
    with pytest.raises(BadRequest):
        ns.put("subscription", "a/b", {}, mode="create", topic="events")
    with pytest.raises(BadRequest):
        ns.put("subscription", "s" * 51, {}, mode="create", topic="events")
    with pytest.raises(BadRequest):
        ns.put_rule("events", "all", RuleConfig("bad rule", "Sql", "1=1"), mode="create")


def test_create_update_and_upsert_modes(ns: Namespace, clock: Clock) -> None:
    with pytest.raises(Conflict):
        ns.put("queue", "ORDERS", {}, mode="create")  # names are case-insensitive
    with pytest.raises(Conflict):
        ns.put("topic", "orders", {}, mode="upsert")  # a queue of that name exists
    with pytest.raises(NotFound):
        ns.put("queue", "ghost", {}, mode="update")
    clock.now += 10
    info, created = ns.put("queue", "orders", {"MaxDeliveryCount": 7, "LockDuration": 5.0}, mode="update")
    assert not created and info.config.max_delivery_count == 7 and info.updated_at == clock.now
    ref = ns.broker.resolve("orders")  # what the AMQP side now uses
    assert ref.lock_duration_ms == 5000
    assert ns.broker.entity_view("orders").config.max_delivery_count == 7
    clock.now += 10
    info, _ = ns.put("queue", "orders", {"MaxDeliveryCount": 7, "LockDuration": 5.0}, mode="upsert")
    assert info.updated_at == clock.now - 10  # nothing changed: not an update


def test_settings_that_cannot_change_or_are_out_of_range(ns: Namespace) -> None:
    with pytest.raises(BadRequest, match="RequiresSession"):
        ns.put("queue", "orders", {"RequiresSession": True}, mode="update")
    with pytest.raises(BadRequest, match="LockDuration"):
        ns.put("queue", "q", {"LockDuration": 301.0}, mode="create")
    with pytest.raises(BadRequest, match="MaxDeliveryCount"):
        ns.put("queue", "q", {"MaxDeliveryCount": 0}, mode="create")
    with pytest.raises(BadRequest, match="AutoDeleteOnIdle"):
        ns.put("queue", "q", {"AutoDeleteOnIdle": 60.0}, mode="create")
    with pytest.raises(BadRequest, match="Status"):
        ns.put("queue", "q", {"Status": "Sleeping"}, mode="create")
    with pytest.raises(BadRequest, match="MaxMessageSizeInKilobytes"):
        ns.put("queue", "q", {"MaxMessageSizeInKilobytes": 1024}, mode="create")
    with pytest.raises(BadRequest, match="could not be found"):
        ns.put("queue", "q", {"ForwardTo": "missing"}, mode="create")


def test_forward_to_accepts_urls_and_names() -> None:
    assert entity_name_from_forward("sb://127.0.0.1:5300/orders") == "orders"
    assert entity_name_from_forward("a/b") == "a/b"
    assert entity_name_from_forward("") is None


def test_counts_size_and_times(ns: Namespace, clock: Clock) -> None:
    send(ns, "orders", 3)
    send(ns, "orders", 1, scheduled_enqueue_time_ms=int((clock.now + 60) * 1000))
    clock.now += 5
    info = ns.get("queue", "orders")
    assert info.counts["active"] == 3 and info.counts["scheduled"] == 1
    assert info.size_in_bytes == 40
    assert info.created_at == ns.started_at
    assert info.accessed_at is not None and info.accessed_at >= info.updated_at  # sent to: not the zero time


def test_admin_entities_and_updates_are_persisted(tmp_path, clock: Clock) -> None:
    db = tmp_path / "db.sqlite"
    broker = Broker(CONFIG, SqliteStore(db), clock=clock)
    ns = Namespace(broker, clock=clock)
    ns.put("queue", "made", {"MaxDeliveryCount": 4}, mode="create")
    ns.put("queue", "made", {"MaxDeliveryCount": 6}, mode="update")
    ns.put("subscription", "sub", {"LockDuration": 10.0}, mode="create", topic="events")
    ns.put_rule("events", "sub", RuleConfig("r", "Sql", "a = 1"), mode="create")
    ns.put_rule("events", "sub", RuleConfig("r", "Sql", "a = 2"), mode="update")
    broker.close()  # the runtime's to call, not the admin plane's (broker/api.py RuntimeBroker)

    broker = Broker(CONFIG, SqliteStore(db), clock=clock)
    again = Namespace(broker, clock=clock)
    assert again.get("queue", "made").config.max_delivery_count == 6
    assert again.get("subscription", "events/Subscriptions/sub").config.lock_duration == 10.0
    assert [(r.rule.name, r.rule.sql_expression) for r in again.list_rules("events", "sub")] == [
        ("$Default", "1=1"), ("r", "a = 2")]
    broker.close()


def test_arm_rules_replace_the_implicit_default_rule(ns: Namespace) -> None:
    ns.put_rule("events", "all", RuleConfig("first", "Sql", "a = 1"), mode="upsert", replace_implicit_default=True)
    ns.put_rule("events", "all", RuleConfig("second", "Sql", "a = 2"), mode="upsert", replace_implicit_default=True)
    assert [r.rule.name for r in ns.list_rules("events", "all")] == ["first", "second"]
    # The Service Bus API keeps $Default, as Service Bus does.
    ns.put("subscription", "keep", {}, mode="create", topic="events")
    ns.put_rule("events", "keep", RuleConfig("r", "Sql", "a = 1"), mode="create")
    assert [r.rule.name for r in ns.list_rules("events", "keep")] == ["$Default", "r"]


def test_rule_errors(ns: Namespace) -> None:
    with pytest.raises(BadRequest):
        ns.put_rule("events", "all", RuleConfig("r", "Sql", "a = = 1"), mode="create")
    with pytest.raises(Conflict):
        ns.put_rule("events", "all", RuleConfig("$Default", "Sql", "1=1"), mode="create")
    with pytest.raises(NotFound):
        ns.delete_rule("events", "all", "ghost")
    with pytest.raises(NotFound):
        ns.list_rules("events", "ghost")


def test_purge_and_reset(ns: Namespace) -> None:
    send(ns, "orders", 2)
    send(ns, "events", 1)
    ns.put("queue", "extra", {}, mode="create")
    ns.put("queue", "orders", {"MaxDeliveryCount": 9}, mode="update")
    ns.delete("subscription", "events/Subscriptions/all")
    assert ns.purge("orders") == 2
    assert ns.get("queue", "orders").counts["active"] == 0
    send(ns, "orders", 1)
    assert ns.reset() == {"deleted": 1, "purged": 1}
    assert sorted(i.name for i in ns.list_entities("queue")) == ["orders"]
    assert ns.get("queue", "orders").config.max_delivery_count == CONFIG.queues[0].max_delivery_count
    assert [i.name for i in ns.list_entities("subscription", "events")] == ["all"]
    with pytest.raises(NotFound):
        ns.purge("ghost")


def test_arm_entity_spec_and_rules() -> None:
    spec = arm.entity_spec(json.dumps({"properties": {
        "lockDuration": "PT30S", "maxDeliveryCount": 3, "countDetails": {"activeMessageCount": 1},
        "forwardTo": None}}).encode())
    assert spec == {"LockDuration": 30.0, "MaxDeliveryCount": 3}
    for bad in (b"[1]", b"{", b'{"properties": 3}', b'{"properties": {"lockDuration": "soon"}}',
                b'{"properties": {"unknown": 1}}'):
        with pytest.raises(BadRequest):
            arm.entity_spec(bad)
    rule = arm.rule_config(json.dumps({"properties": {"filterType": "CorrelationFilter", "correlationFilter": {
        "correlationId": "c", "properties": {"k": "v"}}, "action": {"sqlExpression": "SET a = 1"}}}).encode(), "r")
    assert rule == RuleConfig("r", "Correlation", correlation={"CorrelationId": "c", "Properties": {"k": "v"}},
                              action_expression="SET a = 1")
    assert arm.rule_config(b'{"properties": {}}', "d") == RuleConfig("d", "Sql", "1=1")
    with pytest.raises(BadRequest):
        arm.rule_config(b'{"properties": {"filterType": "Magic"}}', "r")
