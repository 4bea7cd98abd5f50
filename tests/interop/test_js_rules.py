"""JS SDK rule manager on subscription events/all: $management add-rule, enumerate-rules and
remove-rule, and the effect of the resulting rule set on what the subscription receives."""

from __future__ import annotations

import pytest

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


@pytest.fixture
def rules_run(sb_connection_string: str) -> dict:
    return run_js("rules.mjs", sb_connection_string, "events", "all", timeout=60)


def test_js_rule_manager_create_list_delete_and_filtering(rules_run: dict) -> None:
    out = rules_run

    # A subscription created without rules has the catch-all $Default (a TrueFilter, read as 1=1).
    assert [(r["name"], r["filter"]) for r in out["initial"]] == [("$Default", {"sqlExpression": "1=1"})]

    rules = {r["name"]: r for r in out["afterCreate"]}
    assert sorted(rules) == ["$Default", "by-correlation", "only-red", "tagged"]
    assert rules["only-red"]["filter"] == {"sqlExpression": "color = 'red'"}
    assert rules["only-red"]["action"] == {}
    assert rules["tagged"]["filter"] == {"sqlExpression": "1=1"}
    assert rules["tagged"]["action"] == {"sqlExpression": "SET tagged = 'yes'"}
    correlation = rules["by-correlation"]["filter"]
    assert correlation["correlationId"] == "corr-1"
    assert correlation["applicationProperties"] == {"kind": "x"}

    assert out["afterDelete"] == ["by-correlation", "only-red"]
    # Only the SQL rule (red) and the correlation rule (corr) match; blue matches nothing.
    assert sorted(m["messageId"] for m in out["delivered"]) == ["corr", "red"]
    # Each message is delivered once even if several rules match; the deleted action left no trace.
    assert all("tagged" not in m["applicationProperties"] for m in out["delivered"])
    assert out["extra"] == []


def test_js_delete_missing_rule_is_entity_not_found(rules_run: dict) -> None:
    assert rules_run["deleteMissing"] == {"name": "ServiceBusError", "code": "MessagingEntityNotFound"}


def test_js_rule_with_invalid_sql_is_refused_with_the_position(rules_run: dict) -> None:
    bad = rules_run["badSql"]
    assert bad is not None, "a rule with invalid SQL must be refused"
    assert "position 8" in bad["message"] and "expected" in bad["message"]
    assert "broken" not in rules_run["afterBadSql"]


def test_js_correlation_rule_on_a_date_property_matches_that_date(sb_connection_string: str) -> None:
    """"Topic filters and actions", correlation filters: a JS Date (an AMQP timestamp) in the rule's
    application properties matches the same date on a message, and reads back as a Date."""
    out = run_js("rules_dates.mjs", sb_connection_string, "events", "all", timeout=60)
    assert out["rules"] == [{"name": "by-date", "due": "2030-05-17T08:30:00.000Z"}]
    assert out["delivered"] == ["same"]
    assert out["extra"] == []
