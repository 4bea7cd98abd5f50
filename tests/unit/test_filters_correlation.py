"""Correlation filters, boolean filters and the compile_rule entry point."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sbemulator.amqp.types import Int, Long, Symbol
from sbemulator.filters import FilterEvaluationError, Rule, compile_rule


@dataclass
class Msg:
    message_id: str | None = "msg-1"
    correlation_id: str | None = "corr-1"
    subject: str | None = "red"
    to: str | None = "Store5"
    reply_to: str | None = "replies"
    reply_to_session_id: str | None = "rs-1"
    session_id: str | None = "sess-1"
    content_type: str | None = "application/json"
    partition_key: str | None = None
    sequence_number: int | None = 1
    enqueued_time_ms: int | None = None
    time_to_live_ms: int | None = None
    scheduled_enqueue_time_ms: int | None = None
    delivery_count: int | None = 0
    size: int | None = 10
    application_properties: dict[str, Any] = field(default_factory=lambda: {
        "Priority": "High", "version": Int(2), "big": Long(5), "flag": True, "sym": Symbol("abc"),
    })


FIELDS = [
    ("CorrelationId", "correlation_id", "corr-1"),
    ("MessageId", "message_id", "msg-1"),
    ("To", "to", "Store5"),
    ("ReplyTo", "reply_to", "replies"),
    ("Label", "subject", "red"),
    ("Subject", "subject", "red"),
    ("SessionId", "session_id", "sess-1"),
    ("ReplyToSessionId", "reply_to_session_id", "rs-1"),
    ("ContentType", "content_type", "application/json"),
]


def correlation(**fields: Any) -> Rule:
    return compile_rule("c", "Correlation", correlation=fields)


@pytest.mark.parametrize(("key", "attribute", "value"), FIELDS, ids=[f[0] for f in FIELDS])
def test_each_system_field(key: str, attribute: str, value: str) -> None:
    rule = correlation(**{key: value})
    assert rule.matches(Msg())
    assert not correlation(**{key: value + "x"}).matches(Msg())
    assert not correlation(**{key: value.upper()}).matches(Msg()), "string comparison is case-sensitive"
    unset = Msg()
    setattr(unset, attribute, None)
    assert not rule.matches(unset)


def test_all_fields_must_match() -> None:
    assert correlation(CorrelationId="corr-1", Label="red", To="Store5").matches(Msg())
    assert not correlation(CorrelationId="corr-1", Label="blue").matches(Msg())


def test_none_fields_are_ignored_and_empty_filter_matches_all() -> None:
    assert correlation(CorrelationId=None, Label="red").matches(Msg())
    assert correlation().matches(Msg())


def test_properties_equality() -> None:
    assert correlation(Properties={"Priority": "High"}).matches(Msg())
    assert not correlation(Properties={"Priority": "high"}).matches(Msg())
    assert correlation(Properties={"version": 2}).matches(Msg()), "widths do not matter"
    assert correlation(Properties={"big": 5.0}).matches(Msg())
    assert not correlation(Properties={"version": "2"}).matches(Msg()), "a string never equals a number"
    assert correlation(Properties={"flag": True}).matches(Msg())
    assert not correlation(Properties={"flag": 1}).matches(Msg())
    assert correlation(Properties={"sym": "abc"}).matches(Msg())


def test_properties_all_must_match_and_missing_fails() -> None:
    assert correlation(Properties={"Priority": "High", "version": 2}).matches(Msg())
    assert not correlation(Properties={"Priority": "High", "version": 3}).matches(Msg())
    assert not correlation(Properties={"absent": "x"}).matches(Msg())
    m = Msg()
    m.application_properties = None  # type: ignore[assignment]
    assert not correlation(Properties={"Priority": "High"}).matches(m)


def test_property_names_are_case_insensitive() -> None:
    assert correlation(Properties={"priority": "High"}).matches(Msg())


def test_system_fields_and_properties_combined() -> None:
    definition = {"Label": "red", "ReplyTo": "replies", "Properties": {"Priority": "High"}}
    rule = compile_rule("c", "CorrelationFilter", correlation=definition)
    assert rule.matches(Msg())
    assert rule.filter_type == "Correlation"
    assert rule.correlation == {"Label": "red", "ReplyTo": "replies", "Properties": {"Priority": "High"}}
    assert rule.sql_expression is None


@pytest.mark.parametrize(
    ("filter_type", "normalized", "matches", "expression"),
    [
        ("True", "True", True, "1=1"),
        ("TrueFilter", "True", True, "1=1"),
        ("true", "True", True, "1=1"),
        ("False", "False", False, "1=0"),
        ("FALSEFILTER", "False", False, "1=0"),
    ],
)
def test_boolean_filters(filter_type: str, normalized: str, matches: bool, expression: str) -> None:
    rule = compile_rule("b", filter_type)
    assert rule.filter_type == normalized
    assert rule.matches(Msg()) is matches
    assert rule.sql_expression == expression


@pytest.mark.parametrize("filter_type", ["Sql", "SqlFilter", "sql", "SQLFILTER"])
def test_sql_rule(filter_type: str) -> None:
    rule = compile_rule("high", filter_type, "Priority = 'High'")
    assert (rule.name, rule.filter_type, rule.sql_expression) == ("high", "Sql", "Priority = 'High'")
    assert rule.matches(Msg()) is True
    low = Msg(application_properties={"Priority": "Low"})
    assert rule.matches(low) is False
    assert rule.matches(Msg(application_properties={})) is False


def test_sql_rule_evaluation_error_propagates() -> None:
    rule = compile_rule("bad", "Sql", "Priority * 2 > 1")
    with pytest.raises(FilterEvaluationError):
        rule.matches(Msg())


def test_sql_expressions_equivalent_to_true_false_filters() -> None:
    assert compile_rule("t", "Sql", "1=1").matches(Msg())
    assert not compile_rule("f", "Sql", "1=0").matches(Msg())
