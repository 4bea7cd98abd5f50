"""infra/servicebus.json, azure.yaml and the official-emulator compose file.

servicebus.json must stay loadable by the official Service Bus emulator, whose Config.json schema allows
only certain properties and ranges (a property it does not know, or a lock duration out of range, makes
the emulator refuse to start). The schema facts below come from the emulator installer's
Config-schema.json. The emulator itself cannot run here (no Docker engine), so these are static checks.
"""

from __future__ import annotations

import json
import re
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
ROLES = ["sender", "consumer-high", "consumer-low", "leveler", "ordered"]

QUEUE_KEYS = {
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "LockDuration",
    "MaxDeliveryCount",
    "RequiresDuplicateDetection",
    "RequiresSession",
}
TOPIC_KEYS = {"DefaultMessageTimeToLive", "DuplicateDetectionHistoryTimeWindow", "RequiresDuplicateDetection"}
SUBSCRIPTION_KEYS = {
    "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive",
    "LockDuration",
    "MaxDeliveryCount",
    "ForwardDeadLetteredMessagesTo",
    "ForwardTo",
    "RequiresSession",
}
ISO_DURATION = re.compile(r"^P(?!$)(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")


def seconds(duration: str) -> int:
    match = ISO_DURATION.match(duration)
    assert match, f"not an ISO 8601 duration the emulator accepts: {duration!r}"
    days, hours, minutes, secs = (int(g or 0) for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return json.loads((INFRA / "servicebus.json").read_text())


@pytest.fixture(scope="module")
def namespace(config: dict[str, Any]) -> dict[str, Any]:
    return config["UserConfig"]["Namespaces"][0]


def entity(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(item for item in items if item["Name"] == name)


# --- the emulator's schema ----------------------------------------------------------------------


def test_emulator_shape(config: dict[str, Any]) -> None:
    assert set(config) == {"UserConfig"}
    user = config["UserConfig"]
    assert set(user) == {"Namespaces", "Logging"}
    assert user["Logging"]["Type"] in {"File", "Console", "File,Console", "Console,File"}
    assert len(user["Namespaces"]) == 1
    namespace = user["Namespaces"][0]
    assert namespace["Name"] == "sbemulatorns"  # the only name the emulator accepts
    assert set(namespace) == {"Name", "Queues", "Topics"}
    assert len(namespace["Queues"]) + len(namespace["Topics"]) <= 50


def test_only_known_properties(namespace: dict[str, Any]) -> None:
    for queue in namespace["Queues"]:
        assert set(queue) == {"Name", "Properties"}
        assert set(queue["Properties"]) <= QUEUE_KEYS, queue["Name"]
    for topic in namespace["Topics"]:
        assert set(topic) == {"Name", "Properties", "Subscriptions"}
        assert set(topic["Properties"]) <= TOPIC_KEYS
        assert 1 <= len(topic["Subscriptions"]) <= 50
        for sub in topic["Subscriptions"]:
            assert set(sub) <= {"Name", "Properties", "Rules"}
            assert set(sub["Properties"]) <= SUBSCRIPTION_KEYS, sub["Name"]
            for rule in sub.get("Rules", []):
                assert set(rule) == {"Name", "Properties"}
                assert set(rule["Properties"]) <= {"FilterType", "SqlFilter", "CorrelationFilter", "Action"}
                assert rule["Properties"]["FilterType"] == "Sql"
                assert set(rule["Properties"]["SqlFilter"]) == {"SqlExpression"}


def test_names_follow_the_emulator_pattern(namespace: dict[str, Any]) -> None:
    pattern = re.compile(r"^[A-Za-z0-9]$|^[A-Za-z0-9][\w\-./]*[A-Za-z0-9]$")
    names = [q["Name"] for q in namespace["Queues"]]
    for topic in namespace["Topics"]:
        names.append(topic["Name"])
        for sub in topic["Subscriptions"]:
            names += [sub["Name"]] + [rule["Name"] for rule in sub.get("Rules", [])]
    assert all(pattern.match(name) for name in names), names


def _ranges(props: dict[str, Any], lock_min: int) -> None:
    # Emulator limits: TTL 5 min..1 h, duplicate window 5 s..5 min, lock lock_min..5 min, deliveries 1..10.
    if "DefaultMessageTimeToLive" in props:
        assert 300 <= seconds(props["DefaultMessageTimeToLive"]) <= 3600
    if "DuplicateDetectionHistoryTimeWindow" in props:
        assert 5 <= seconds(props["DuplicateDetectionHistoryTimeWindow"]) <= 300
    if "LockDuration" in props:
        assert lock_min <= seconds(props["LockDuration"]) <= 300
    if "MaxDeliveryCount" in props:
        assert 1 <= props["MaxDeliveryCount"] <= 10


def test_values_are_within_emulator_limits(namespace: dict[str, Any]) -> None:
    for queue in namespace["Queues"]:
        _ranges(queue["Properties"], lock_min=5)
    for topic in namespace["Topics"]:
        _ranges(topic["Properties"], lock_min=5)
        for sub in topic["Subscriptions"]:
            _ranges(sub["Properties"], lock_min=60)  # subscriptions: at least PT1M in the emulator


def test_duration_helper() -> None:
    assert seconds("PT30S") == 30 and seconds("PT1H") == 3600 and seconds("PT1M30S") == 90
    for bad in ("PT", "P", "30S", "PT1.5S"):
        with pytest.raises(AssertionError):
            seconds(bad)


# --- what the patterns need ---------------------------------------------------------------------


def test_entities(namespace: dict[str, Any]) -> None:
    queues = {q["Name"]: q["Properties"] for q in namespace["Queues"]}
    assert set(queues) == {"leveling", "leader-election", "ordered-writes", "priority-fifo"}
    assert queues["leveling"]["RequiresSession"] is False
    assert queues["leveling"]["DeadLetteringOnMessageExpiration"] is True
    assert queues["leveling"]["MaxDeliveryCount"] == 5
    assert queues["leader-election"]["RequiresSession"] is True
    assert queues["leader-election"]["LockDuration"] == "PT30S"  # bounds failover time
    assert queues["ordered-writes"]["RequiresSession"] is True
    topic = entity(namespace["Topics"], "messages")
    subs = {s["Name"]: s for s in topic["Subscriptions"]}
    assert set(subs) == {"highPriority", "lowPriority", "unroutedPriority"}
    for sub in subs.values():
        assert sub["Properties"]["DeadLetteringOnMessageExpiration"] is True  # nothing expires unseen
        assert sub["Properties"]["RequiresSession"] is False
        assert len(sub["Rules"]) == 1


def test_filter_expressions(namespace: dict[str, Any]) -> None:
    topic = entity(namespace["Topics"], "messages")
    expressions = {
        s["Name"]: s["Rules"][0]["Properties"]["SqlFilter"]["SqlExpression"] for s in topic["Subscriptions"]
    }
    assert expressions == {
        "highPriority": "Priority = 'High'",
        "lowPriority": "Priority = 'Low'",
        "unroutedPriority": "Priority IS NULL OR Priority NOT IN ('High', 'Low')",
    }


class _Missing:
    """A property absent from the message: SQL NULL."""


MISSING = _Missing()


def evaluate(expression: str, properties: dict[str, Any], *, case_sensitive: bool) -> bool | None:
    """A tiny three-valued evaluator for the subset of Service Bus SQL these filters use:
    ``x = 'lit'``, ``x IS [NOT] NULL``, ``x [NOT] IN (...)``, AND, OR, NOT and parentheses.
    Returns True, False or None (SQL UNKNOWN); a message is delivered only on True."""
    tokens = re.findall(r"'(?:[^']|'')*'|\(|\)|,|=|<>|[A-Za-z_][A-Za-z0-9_]*", expression)
    assert "".join(tokens).replace(" ", "") == re.sub(r"\s+", "", expression), "unsupported syntax"
    pos = 0

    def peek(word: str) -> bool:
        return pos < len(tokens) and tokens[pos].upper() == word

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def norm(value: Any) -> Any:
        return value if case_sensitive or not isinstance(value, str) else value.lower()

    def literal() -> str:
        token = take()
        assert token.startswith("'"), token
        return token[1:-1].replace("''", "'")

    def compare(name: str) -> bool | None:
        value = properties.get(name, MISSING)
        if peek("IS"):
            take()
            negate = peek("NOT") and bool(take())
            assert take().upper() == "NULL"
            return (value is not MISSING) if negate else (value is MISSING)
        negate = peek("NOT") and bool(take())
        if peek("IN"):
            take()
            assert take() == "("
            items = [literal()]
            while peek(","):
                take()
                items.append(literal())
            assert take() == ")"
            if value is MISSING:
                return None
            found = norm(value) in {norm(item) for item in items}
            return not found if negate else found
        operator = take()
        assert operator in ("=", "<>"), f"unsupported operator {operator}"
        right = literal()
        if value is MISSING:
            return None
        if not isinstance(value, str):
            return operator == "<>"
        equal = norm(value) == norm(right)
        return equal if operator == "=" else not equal

    def factor() -> bool | None:
        if peek("NOT"):
            take()
            inner = factor()
            return None if inner is None else not inner
        if peek("("):
            take()
            inner = disjunction()
            assert take() == ")"
            return inner
        return compare(take())

    def conjunction() -> bool | None:
        result = factor()
        while peek("AND"):
            take()
            right = factor()
            result = (
                False if result is False or right is False else (None if None in (result, right) else True)
            )
        return result

    def disjunction() -> bool | None:
        result = conjunction()
        while peek("OR"):
            take()
            right = conjunction()
            result = True if result is True or right is True else (None if None in (result, right) else False)
        return result

    value = disjunction()
    assert pos == len(tokens), f"trailing tokens {tokens[pos:]}"
    return value


def test_evaluator_follows_sql_null_logic() -> None:
    assert evaluate("Priority = 'High'", {}, case_sensitive=True) is None
    assert evaluate("Priority IS NULL", {}, case_sensitive=True) is True
    assert evaluate("Priority NOT IN ('a')", {}, case_sensitive=True) is None
    assert evaluate("NOT (Priority = 'a') AND Priority IS NOT NULL", {"Priority": "b"}, case_sensitive=True)
    with pytest.raises(AssertionError):
        evaluate("Priority LIKE 'H%'", {"Priority": "High"}, case_sensitive=True)


@pytest.mark.parametrize("case_sensitive", [True, False])
def test_filters_partition_every_message(namespace: dict[str, Any], case_sensitive: bool) -> None:
    """Each message matches exactly one subscription: High and Low go to their pools and everything
    else (no Priority, another value, another type) to unroutedPriority, so nothing is dropped and
    nothing is processed twice. Checked for case-sensitive and case-insensitive string comparison."""
    topic = entity(namespace["Topics"], "messages")
    filters = {
        s["Name"]: s["Rules"][0]["Properties"]["SqlFilter"]["SqlExpression"] for s in topic["Subscriptions"]
    }
    values: list[Any] = [
        MISSING,
        "High",
        "Low",
        "Medium",
        "",
        "high",
        "LOW",
        " High",
        "High'",
        1,
        0,
        True,
        2.5,
    ]
    for value, other in product(values, [MISSING, "x"]):
        properties = {} if value is MISSING else {"Priority": value}
        if other is not MISSING:
            properties["Tenant"] = other
        matched = [
            name
            for name, expr in filters.items()
            if evaluate(expr, properties, case_sensitive=case_sensitive)
        ]
        assert len(matched) == 1, (value, matched)
        if value == "High" or (not case_sensitive and isinstance(value, str) and value.lower() == "high"):
            assert matched == ["highPriority"]
        elif value == "Low" or (not case_sensitive and isinstance(value, str) and value.lower() == "low"):
            assert matched == ["lowPriority"]
        else:
            assert matched == ["unroutedPriority"], value


def test_topology_agrees_with_shared_topology(namespace: dict[str, Any]) -> None:
    """The code's entity-name constants (needed at import time by Functions decorators) exist here."""
    topology_py = ROOT / "shared" / "topology.py"
    if not topology_py.exists():
        pytest.skip("shared/topology.py not written yet")
    from shared import topology

    topic = entity(namespace["Topics"], topology.TOPIC)
    subs = {s["Name"] for s in topic["Subscriptions"]}
    assert {topology.SUBSCRIPTION_HIGH, topology.SUBSCRIPTION_LOW, topology.SUBSCRIPTION_UNROUTED} == subs
    queues = {q["Name"] for q in namespace["Queues"]}
    assert {topology.QUEUE_LEVELING, topology.QUEUE_LEADER_ELECTION, topology.QUEUE_ORDERED_WRITES,
            topology.QUEUE_PRIORITY_FIFO} == queues


# --- azd and the compose file -------------------------------------------------------------------


def test_azure_yaml_deploys_one_service_per_role() -> None:
    project = yaml.safe_load((ROOT / "azure.yaml").read_text())
    assert project["infra"] == {"provider": "bicep", "path": "infra", "module": "main"}
    assert list(project["services"]) == ROLES
    for name, service in project["services"].items():
        assert service == {"project": ".", "language": "python", "host": "function"}, name


def test_compose_mounts_servicebus_json_as_config() -> None:
    compose = yaml.safe_load((INFRA / "docker-compose.emulator.yml").read_text())
    emulator = compose["services"]["emulator"]
    assert emulator["image"].startswith("mcr.microsoft.com/azure-messaging/servicebus-emulator")
    assert "./servicebus.json:/ServiceBus_Emulator/ConfigFiles/Config.json:ro" in emulator["volumes"]
    assert (INFRA / "servicebus.json").is_file()
    assert emulator["environment"]["SQL_SERVER"] == "sqlserver"
    assert "sqlserver" in compose["services"]
    assert all(port.startswith("127.0.0.1:") for port in emulator["ports"])
    env_example = (INFRA / ".env.example").read_text()
    for name in ("ACCEPT_EULA", "SQL_PASSWORD"):
        assert re.search(rf"^{name}=", env_example, re.M), name
        assert f"${{{name}" in (INFRA / "docker-compose.emulator.yml").read_text()
