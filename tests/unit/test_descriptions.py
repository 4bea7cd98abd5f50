"""The one table of entity properties (sbemulator.descriptions) and the surfaces it drives: the same
names, order and bounds everywhere (issue #18 item 1)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sbemulator.admin import arm, atom
from sbemulator.admin.backend import Namespace
from sbemulator.admin.errors import BadRequest
from sbemulator.broker.errors import InvalidOperationError
from sbemulator.config import ConfigError, QueueConfig, parse_config
from sbemulator.descriptions import (
    KINDS,
    PROPERTIES,
    QUEUE,
    SUBSCRIPTION,
    TOPIC,
    atom_order,
    by_atom,
    entity_name_problem,
    for_kind,
)
from tests.fixtures.broker import make_broker

NS = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q"}], "Topics": []}]}}
_LOCK_CAP = by_atom(QUEUE)["LockDuration"].maximum  # the one place the cap is written
assert _LOCK_CAP is not None
LOCK_CAP: float = _LOCK_CAP


def _config(queue: dict) -> dict:
    data = copy.deepcopy(NS)
    data["UserConfig"]["Namespaces"][0]["Queues"] = [queue]
    return data


def test_atom_positions_are_one_to_n_per_kind() -> None:
    for kind in KINDS:
        assert [p.order[kind] for p in for_kind(kind)] == list(range(1, len(for_kind(kind)) + 1))
        assert len(set(atom_order(kind))) == len(atom_order(kind))


# Element names, in order, of a description Service Bus returned, as the SDKs' tests record it
# (@azure/service-bus atomXmlHelper tests: a 2017-04 queue without forwarding or metadata).
RECORDED_QUEUE_2017_04 = [
    "LockDuration", "MaxSizeInMegabytes", "RequiresDuplicateDetection", "RequiresSession",
    "DefaultMessageTimeToLive", "DeadLetteringOnMessageExpiration", "DuplicateDetectionHistoryTimeWindow",
    "MaxDeliveryCount", "EnableBatchedOperations", "SizeInBytes", "MessageCount", "IsAnonymousAccessible",
    "AuthorizationRules", "Status", "CreatedAt", "UpdatedAt", "AccessedAt", "SupportOrdering", "CountDetails",
    "AutoDeleteOnIdle", "EnablePartitioning", "EntityAvailabilityStatus", "EnableExpress",
]


def _rendered(kind: str, api_version: str | None) -> list[str]:
    broker = make_broker([{"Name": "q"}], topics=[{"Name": "t", "Subscriptions": [{"Name": "s"}]}])[0]
    ns = Namespace(broker)
    path = {QUEUE: "q", TOPIC: "t", SUBSCRIPTION: "t/Subscriptions/s"}[kind]
    xml = atom.render_description(ns.get(kind, path), "host", api_version)
    import xml.etree.ElementTree as ET

    return [atom._local(c.tag) for c in ET.fromstring(xml)]


def _sdk_order(model: Any) -> list[str]:  # a generated msrest model class
    """Element names in the order azure-servicebus's model has once imported (its ``_model_workaround``
    puts the generated models in the order the service reads and writes)."""
    import azure.servicebus.management  # noqa: F401  (applies the workaround)

    unnamed = {"messageCountDetails": "CountDetails", "defaultRuleDescription": "DefaultRuleDescription"}
    return [v.get("xml", {}).get("name") or unnamed[v["key"]] for v in model._attribute_map.values()
            if not v.get("xml", {}).get("attr")]


def test_atom_order_is_the_sdk_models_order_for_every_kind() -> None:
    from azure.servicebus.management._generated.models import (
        QueueDescription,
        SubscriptionDescription,
        TopicDescription,
    )

    for kind, model in ((QUEUE, QueueDescription), (TOPIC, TopicDescription),
                        (SUBSCRIPTION, SubscriptionDescription)):
        assert list(atom_order(kind)) == _sdk_order(model), kind


def test_atom_output_follows_the_recorded_service_order() -> None:
    assert _rendered(QUEUE, "2017-04") == RECORDED_QUEUE_2017_04
    for kind in KINDS:
        for version in ("2017-04", "2021-05", "2024-05", None):
            names = _rendered(kind, version)
            expected = [n for n in atom_order(kind) if n in names]
            assert names == expected, (kind, version)
    assert "MaxMessageSizeInKilobytes" in _rendered(QUEUE, "2021-05")
    assert "SqlFilterCount" not in _rendered(TOPIC, "2021-05")
    assert "SqlFilterCount" in _rendered(TOPIC, "2024-05")


def test_authorization_rule_elements_follow_the_sdk_model() -> None:
    from azure.servicebus.management._generated.models import AuthorizationRule

    from sbemulator.descriptions import AuthorizationRuleConfig

    xml = atom._authorization_rules((AuthorizationRuleConfig("k", "p", "s", ("Send",)),))
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml.replace("i:type", "type"))
    (rule,) = root
    # Service Bus leaves CreatedTime and ModifiedTime out of an entity's rules (azservicebus
    # admin_client_test.go, TestAdminClient_UpdateQueue: the rules come back equal to those sent)
    expected = [n for n in _sdk_order(AuthorizationRule) if n not in ("CreatedTime", "ModifiedTime")]
    assert [atom._local(c.tag) for c in rule] == expected


def test_every_config_field_is_in_the_table() -> None:
    import dataclasses

    from sbemulator.config import SubscriptionConfig, TopicConfig

    for kind, cls in ((QUEUE, QueueConfig), (TOPIC, TopicConfig), (SUBSCRIPTION, SubscriptionConfig)):
        fields = {f.name for f in dataclasses.fields(cls)} - {"name", "rules", "subscriptions"}
        assert fields == {p.field for p in for_kind(kind) if p.field}, kind
    assert all(p.kinds <= set(KINDS) for p in PROPERTIES)


# --- one name validator -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ordérs", "q\n", "q\n\n", "a" * 261, "-q", "q-", "a//b", "é"])
def test_bad_queue_names_are_refused_by_every_surface(name: str) -> None:
    assert entity_name_problem(name, child=False) is not None
    with pytest.raises(ConfigError, match="invalid name"):
        parse_config(_config({"Name": name}))
    broker = make_broker([{"Name": "q"}])[0]
    with pytest.raises(BadRequest, match="invalid"):
        Namespace(broker).put(QUEUE, name, {}, mode="create")
    with pytest.raises(InvalidOperationError, match="invalid"):
        broker.create_queue(QueueConfig(name))


def test_url_segments_are_reserved_only_for_the_management_apis() -> None:
    assert entity_name_problem("a/rules", child=False, http=True) is not None
    assert entity_name_problem("rules", child=False) is None  # a config file's topic may be called so
    with pytest.raises(BadRequest, match="reserved"):
        Namespace(make_broker([{"Name": "q"}])[0]).put(QUEUE, "a/Subscriptions", {}, mode="create")


def test_good_names_pass() -> None:
    for name in ("orders", "a.b-c_d", "a/b/c", "Q1"):
        assert entity_name_problem(name, child=False) is None
    assert entity_name_problem("$Default", child=True, rule=True) is None
    assert entity_name_problem("a/b", child=True) is not None


# --- the LockDuration cap, one bound on every surface ---------------------------------------------

def test_lock_duration_cap_on_config_json() -> None:
    ns = parse_config(_config({"Name": "q", "Properties": {"LockDuration": "PT5M"}}))
    assert ns.queues[0].lock_duration == LOCK_CAP
    with pytest.raises(ConfigError, match="5 minutes"):
        parse_config(_config({"Name": "q", "Properties": {"LockDuration": "PT5M1S"}}))


def test_lock_duration_cap_on_atom() -> None:
    ns = Namespace(make_broker([{"Name": "x"}])[0])

    def desc(value: str) -> dict:
        body = ('<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
                f"<LockDuration>{value}</LockDuration></QueueDescription>")
        return atom.parse_description(atom._parse_xml(body.encode()))

    assert ns.put(QUEUE, "ok", desc("PT5M"), mode="create")[0].config.lock_duration == LOCK_CAP
    with pytest.raises(BadRequest, match="LockDuration"):
        ns.put(QUEUE, "no", desc("PT5M1S"), mode="create")


def test_lock_duration_cap_on_arm() -> None:
    ns = Namespace(make_broker([{"Name": "x"}])[0])

    def body(value: str) -> dict:
        return arm.entity_spec(json.dumps({"properties": {"lockDuration": value}}).encode(), QUEUE)

    assert ns.put(QUEUE, "ok", body("PT5M"), mode="upsert")[0].config.lock_duration == LOCK_CAP
    with pytest.raises(BadRequest, match="LockDuration"):
        ns.put(QUEUE, "no", body("PT5M1S"), mode="upsert")


def test_broker_authorization_rules_are_the_top_level_entitys() -> None:
    from sbemulator.descriptions import AuthorizationRuleConfig

    broker = make_broker([{"Name": "x"}])[0]
    rule = AuthorizationRuleConfig("k", "p", "s", ("Listen",))
    broker.create_queue(QueueConfig("guarded", authorization_rules=(rule,)))
    assert broker.authorization_rules("GUARDED") == [rule]
    assert broker.authorization_rules("guarded/$DeadLetterQueue") == [rule]
    assert broker.authorization_rules("missing") == []
    assert broker.authorization_rules("x") == []


def test_forwarding_edges_the_api_accepts_behave() -> None:
    """A session-enabled queue forwards (its session id travels with the message); a queue naming itself
    keeps its messages instead of looping."""
    from tests.fixtures.broker import msg

    broker = make_broker([{"Name": "dst"}])[0]
    ns = Namespace(broker)
    ns.put(QUEUE, "sess", {"RequiresSession": True, "ForwardTo": "dst"}, mode="create")
    ns.put(QUEUE, "self", {"ForwardTo": "self", "ForwardDeadLetteredMessagesTo": "self"}, mode="create")
    broker.send("sess", [msg(b"a", session_id="g")])
    broker.send("self", [msg(b"b")])
    assert [(m.body_raw, m.session_id) for m in broker.peek("dst", 0, 10)] == [(b"a", "g")]
    assert [m.body_raw for m in broker.peek("self", 0, 10)] == [b"b"]


def test_lock_duration_cap_on_the_broker() -> None:
    broker = make_broker([{"Name": "x"}])[0]
    broker.create_queue(QueueConfig("ok", lock_duration=LOCK_CAP))
    with pytest.raises(InvalidOperationError, match="LockDuration"):
        broker.create_queue(QueueConfig("no", lock_duration=LOCK_CAP + 1))
    from sbemulator.config import SubscriptionConfig, TopicConfig

    broker.create_topic(TopicConfig("t"))
    with pytest.raises(InvalidOperationError, match="LockDuration"):
        broker.create_subscription("t", SubscriptionConfig("s", lock_duration=LOCK_CAP + 1))
    with pytest.raises(InvalidOperationError, match="LockDuration"):
        broker.update_entity("ok", QueueConfig("ok", lock_duration=LOCK_CAP + 1))
