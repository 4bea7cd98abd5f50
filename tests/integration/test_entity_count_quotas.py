"""Service Bus quotas, Basic and Standard tiers: "Number of topics or queues per namespace: 10,000" and
"Number of subscriptions per topic: 2,000", each "Subsequent requests ... are rejected"; the REST API
answers a create over a quota with "403 Quota exceeded; ... not created". The bounds are lowered here so
the test creates a handful of entities, not thousands."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus.management import ServiceBusAdministrationClient

import sbemulator.broker.topology as topology
from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY


def test_the_documented_bounds() -> None:
    assert (topology.MAX_QUEUES_AND_TOPICS, topology.MAX_SUBSCRIPTIONS_PER_TOPIC) == (10_000, 2_000)


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ServiceBusAdministrationClient]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True) as emu:
        assert emu.admin_connection_string is not None
        held = len(STANDARD_TOPOLOGY["UserConfig"]["Namespaces"][0]["Queues"]) + 1  # and the topic "events"
        monkeypatch.setattr(topology, "MAX_QUEUES_AND_TOPICS", held + 1)
        monkeypatch.setattr(topology, "MAX_SUBSCRIPTIONS_PER_TOPIC", 3)  # "events" has 2
        with ServiceBusAdministrationClient.from_connection_string(
            emu.admin_connection_string, connection_verify=emu.ca_path
        ) as client:
            yield client


def test_a_queue_or_topic_over_the_namespace_quota_is_refused_with_403(admin: ServiceBusAdministrationClient) -> None:
    admin.create_queue("one-more")
    for create in (lambda: admin.create_queue("too-many"), lambda: admin.create_topic("too-many")):
        with pytest.raises(HttpResponseError) as refused:
            create()
        assert refused.value.status_code == 403
        assert "topics or queues per namespace" in str(refused.value)
    assert "too-many" not in {q.name for q in admin.list_queues()} | {t.name for t in admin.list_topics()}
    admin.delete_queue("one-more")  # deleting makes room again
    admin.create_topic("now-there-is-room")


def test_a_subscription_over_its_topics_quota_is_refused_with_403(admin: ServiceBusAdministrationClient) -> None:
    admin.create_subscription("events", "third")
    with pytest.raises(HttpResponseError) as refused:
        admin.create_subscription("events", "fourth")
    assert refused.value.status_code == 403 and "subscriptions per topic" in str(refused.value)
    assert [s.name for s in admin.list_subscriptions("events")] == ["all", "high", "third"]


def test_the_documented_filter_bounds() -> None:
    # quotas page: "Number of SQL filters per topic: 2,000", "Number of correlation filters per topic: 100,000"
    assert (topology.MAX_SQL_FILTERS_PER_TOPIC, topology.MAX_CORRELATION_FILTERS_PER_TOPIC) == (2_000, 100_000)


def test_a_sql_filter_over_its_topics_quota_is_refused_with_403_and_counts_the_default_rules(
        admin: ServiceBusAdministrationClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.servicebus.management import CorrelationRuleFilter, SqlRuleFilter

    # "events" holds two SQL filters: the $Default (true filter) of "all" and "high"'s rule
    monkeypatch.setattr(topology, "MAX_SQL_FILTERS_PER_TOPIC", 3)
    admin.create_rule("events", "all", "third", filter=SqlRuleFilter("Priority = 'Low'"))
    with pytest.raises(HttpResponseError) as refused:
        admin.create_rule("events", "high", "fourth", filter=SqlRuleFilter("Priority = 'Mid'"))
    assert refused.value.status_code == 403 and "SQL filters per topic" in str(refused.value)
    assert "fourth" not in {r.name for r in admin.list_rules("events", "high")}
    with pytest.raises(HttpResponseError) as refused:  # a new subscription brings its $Default rule
        admin.create_subscription("events", "third")
    assert refused.value.status_code == 403 and "SQL filters per topic" in str(refused.value)
    admin.create_rule("events", "high", "by-correlation", filter=CorrelationRuleFilter(correlation_id="c1"))
    admin.delete_rule("events", "all", "third")  # deleting makes room again
    admin.create_rule("events", "high", "fourth", filter=SqlRuleFilter("Priority = 'Mid'"))


def test_a_correlation_filter_over_its_topics_quota_is_refused_with_403(
        admin: ServiceBusAdministrationClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from azure.servicebus.management import CorrelationRuleFilter

    monkeypatch.setattr(topology, "MAX_CORRELATION_FILTERS_PER_TOPIC", 1)
    admin.create_rule("events", "all", "c1", filter=CorrelationRuleFilter(correlation_id="c1"))
    with pytest.raises(HttpResponseError) as refused:
        admin.create_rule("events", "high", "c2", filter=CorrelationRuleFilter(correlation_id="c2"))
    assert refused.value.status_code == 403 and "correlation filters per topic" in str(refused.value)
    rule = admin.get_rule("events", "all", "c1")  # replacing a rule in place frees its own place
    rule.filter = CorrelationRuleFilter(correlation_id="c1-again")
    admin.update_rule("events", "all", rule)
