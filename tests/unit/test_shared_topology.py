"""The names the Functions bind to must be the ones infra/servicebus.json (the topology) defines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared import topology

CONFIG = Path(__file__).resolve().parents[2] / "infra" / "servicebus.json"


@pytest.fixture(scope="module")
def namespace() -> dict:
    if not CONFIG.exists():
        pytest.skip("infra/servicebus.json not present")
    (ns,) = json.loads(CONFIG.read_text())["UserConfig"]["Namespaces"]
    return ns


def test_queues_exist_with_the_session_setting_the_code_expects(namespace: dict) -> None:
    queues = {q["Name"]: q["Properties"] for q in namespace["Queues"]}
    assert queues[topology.QUEUE_LEVELING]["RequiresSession"] is False
    assert queues[topology.QUEUE_LEADER_ELECTION]["RequiresSession"] is True
    assert queues[topology.QUEUE_ORDERED_WRITES]["RequiresSession"] is True


def test_topic_and_subscriptions_route_on_the_priority_property(namespace: dict) -> None:
    (topic,) = [t for t in namespace["Topics"] if t["Name"] == topology.TOPIC]
    subs = {s["Name"]: s for s in topic["Subscriptions"]}
    expected = {topology.SUBSCRIPTION_HIGH, topology.SUBSCRIPTION_LOW, topology.SUBSCRIPTION_UNROUTED}
    assert set(subs) == expected
    for priority, name in topology.SUBSCRIPTION_FOR_PRIORITY.items():
        expressions = [r["Properties"]["SqlFilter"]["SqlExpression"] for r in subs[name]["Rules"]]
        assert expressions == [f"{topology.PRIORITY_PROPERTY} = '{priority}'"]
