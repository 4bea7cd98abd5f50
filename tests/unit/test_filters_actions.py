"""SQL rule actions: SET / REMOVE on user and system properties, several statements in order."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from sbemulator.amqp.types import Int, Symbol
from sbemulator.filters import FilterEvaluationError, compile_rule, compile_sql_action


@dataclass
class Msg:
    message_id: str | None = "msg-1"
    correlation_id: str | None = "corr-1"
    subject: str | None = "bus"
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    session_id: str | None = "sess-1"
    content_type: str | None = None
    partition_key: str | None = None
    sequence_number: int | None = 7
    enqueued_time_ms: int | None = 1_700_000_000_000
    time_to_live_ms: int | None = 60_000
    scheduled_enqueue_time_ms: int | None = None
    delivery_count: int | None = 0
    size: int | None = 100
    application_properties: dict[str, Any] = field(default_factory=lambda: {
        "quantity": Int(10), "Priority": "High", "price": 2.0, "color": "red", "sym": Symbol("s"),
    })
    system_properties_changed: bool = False


def run(action: str, message: Msg | None = None) -> Msg:
    message = message or Msg()
    compile_sql_action(action)(message)
    return message


def test_set_existing_user_property_from_expression() -> None:
    m = run("SET quantity = quantity / 2")
    assert m.application_properties["quantity"] == 5
    assert type(m.application_properties["quantity"]) is int
    assert m.system_properties_changed is False


def test_set_adds_new_property_with_written_name() -> None:
    m = run("SET NewProp = 'v'")
    assert m.application_properties["NewProp"] == "v"


def test_set_updates_existing_key_case_insensitively() -> None:
    m = run("SET priority = 'Low'")
    assert m.application_properties["Priority"] == "Low"
    assert "priority" not in m.application_properties


def test_set_keeps_floating_point_type_of_existing_property() -> None:
    m = run("SET price = 3")
    assert m.application_properties["price"] == 3.0
    assert type(m.application_properties["price"]) is float


def test_set_writes_plain_python_values() -> None:
    m = run("SET a = sym; SET b = quantity; SET c = TRUE; SET d = 1.5; SET e = 'x'")
    props = m.application_properties
    assert [type(props[k]) for k in "abcde"] == [str, int, bool, float, str]


def test_set_newid_stores_a_guid_string() -> None:
    m = run("SET trace = newid()")
    assert str(uuid.UUID(m.application_properties["trace"])) == m.application_properties["trace"]


def test_set_from_missing_property_stores_null() -> None:
    m = run("SET copy = missing")
    assert "copy" in m.application_properties
    assert m.application_properties["copy"] is None


def test_remove_user_property_any_case_and_missing_is_no_error() -> None:
    m = run("REMOVE PRIORITY; REMOVE missing")
    assert "Priority" not in m.application_properties
    assert set(m.application_properties) == {"quantity", "price", "color", "sym"}


def test_statements_run_in_order_and_see_earlier_changes() -> None:
    m = run("SET a = 1; SET b = a + 1; SET a = b * 10; REMOVE color")
    assert m.application_properties["a"] == 20
    assert m.application_properties["b"] == 2
    assert "color" not in m.application_properties


@pytest.mark.parametrize(
    "action",
    ["SET a = 1 SET b = 2", "SET a = 1; SET b = 2;", ";SET a = 1;; SET b = 2", "set a = 1 Set b = 2"],
)
def test_semicolons_are_optional(action: str) -> None:
    m = run(action)
    assert (m.application_properties["a"], m.application_properties["b"]) == (1, 2)


def test_keywords_can_be_property_names_when_bracketed() -> None:
    m = run("SET [set] = 1; SET [remove] = [set] + 1")
    assert m.application_properties["set"] == 1
    assert m.application_properties["remove"] == 2


def test_set_system_properties() -> None:
    m = run("SET sys.Label = 'routed'; SET sys.CorrelationId = sys.MessageId; SET sys.To = 'q2'")
    assert m.subject == "routed"
    assert m.correlation_id == "msg-1"
    assert m.to == "q2"
    assert m.system_properties_changed is True


@pytest.mark.parametrize(
    ("name", "attribute"),
    [
        ("MessageId", "message_id"), ("CorrelationId", "correlation_id"), ("Label", "subject"),
        ("Subject", "subject"), ("To", "to"), ("ReplyTo", "reply_to"),
        ("ReplyToSessionId", "reply_to_session_id"), ("SessionId", "session_id"),
        ("ContentType", "content_type"), ("PartitionKey", "partition_key"),
    ],
)
def test_every_string_system_property_can_be_set(name: str, attribute: str) -> None:
    m = run(f"SET sys.{name.lower()} = 'new-' + 'value'")
    assert getattr(m, attribute) == "new-value"
    assert m.system_properties_changed


def test_remove_system_property_clears_it() -> None:
    m = run("REMOVE sys.SessionId")
    assert m.session_id is None
    assert m.system_properties_changed


def test_set_time_to_live_from_durations() -> None:
    m = run("SET sys.TimeToLive = sys.TimeToLive + sys.TimeToLive")
    assert m.time_to_live_ms == 120_000


def test_set_scheduled_enqueue_time_from_times() -> None:
    m = run("SET sys.ScheduledEnqueueTimeUtc = sys.EnqueuedTimeUtc + sys.TimeToLive")
    assert m.scheduled_enqueue_time_ms == 1_700_000_060_000


@pytest.mark.parametrize(
    "action",
    ["SET sys.Label = 5", "SET sys.TimeToLive = 5", "SET x = color * 2", "SET x = quantity / 0"],
)
def test_bad_values_raise_evaluation_error(action: str) -> None:
    with pytest.raises(FilterEvaluationError):
        run(action)


def test_action_creates_properties_dict_when_missing() -> None:
    m = Msg()
    m.application_properties = None  # type: ignore[assignment]
    run("SET a = 1", m)
    assert m.application_properties == {"a": 1}


def test_rule_with_action() -> None:
    action = "SET quantity = quantity / 2; REMOVE priority; SET sys.CorrelationId = 'low';"
    rule = compile_rule("RedOrders", "Sql", "user.color = 'red'", action_expression=action)
    m = Msg()
    assert rule.has_action and rule.matches(m)
    rule.apply_action(m)
    assert m.application_properties["quantity"] == 5
    assert "Priority" not in m.application_properties
    assert m.correlation_id == "low"


def test_rule_without_action_leaves_message_alone() -> None:
    for action in (None, "", "   "):
        rule = compile_rule("r", "TrueFilter", action_expression=action)
        m = Msg()
        before = dict(m.application_properties)
        rule.apply_action(m)
        assert not rule.has_action
        assert rule.action_expression is None
        assert m.application_properties == before
