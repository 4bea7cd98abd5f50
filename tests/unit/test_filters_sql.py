"""SQL filter language: a table of expressions with their three-valued result over sample messages.

Expected values: True (matches), False (evaluates to false) and None (unknown: the message does not
match, and neither does the NOT of it). Expectations follow the Service Bus "Subscription Rule SQL
Filter Syntax" page; the engine's docstrings say which choices the page leaves open.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from sbemulator.amqp.types import Int, Long, Symbol
from sbemulator.filters import (
    FilterError,
    FilterEvaluationError,
    compile_sql_filter,
    compile_sql_predicate,
)

ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


@dataclass
class Msg:
    message_id: str | None = None
    correlation_id: str | None = None
    subject: str | None = None
    to: str | None = None
    reply_to: str | None = None
    reply_to_session_id: str | None = None
    session_id: str | None = None
    content_type: str | None = None
    partition_key: str | None = None
    sequence_number: int | None = None
    enqueued_time_ms: int | None = None
    time_to_live_ms: int | None = None
    scheduled_enqueue_time_ms: int | None = None
    delivery_count: int | None = None
    size: int | None = None
    application_properties: dict[str, Any] = field(default_factory=dict)


def full_message() -> Msg:
    return Msg(
        message_id="msg-1", correlation_id="corr-1", subject="bus stop", to="Store5", reply_to="replies",
        reply_to_session_id="rs-1", session_id="sess-1", content_type="application/json", partition_key="pk",
        sequence_number=42, enqueued_time_ms=1_700_000_000_000, time_to_live_ms=60_000, delivery_count=1,
        size=256,
        application_properties={
            "Priority": "High", "quantity": Int(10), "price": 2.5, "color": "red", "flag": True,
            "name": "O'Brien", "pct": "50%", "path": "a.b*c", "brackets": "[ab]", "multiline": "a\nb",
            "nullprop": None, "Mixed Case Key": "x", "HR-EmployeeID": 42, "weird]name": 1, "Like": "keyword",
            "big": Long(9223372036854775807), "sym": Symbol("sym-val"), "id": ID, "bin": b"\x01",
            "zero": 0, "neg": -7, "numstr": "10", "größe": "XL", "lst": [1, 2],
        },
    )


MESSAGES = {"full": full_message, "bare": lambda: Msg(message_id="m2")}

T, F, U = True, False, None

CASES: list[tuple[str, bool | None]] = [
    # equality, names are case-insensitive, values are not
    ("Priority = 'High'", T),
    ("Priority = 'Low'", F),
    ("Priority <> 'Low'", T),
    ("Priority != 'High'", F),
    ("priority = 'High'", T),
    ("PRIORITY = 'High'", T),
    ("user.Priority = 'High'", T),
    ("USER.priority = 'High'", T),
    ("Priority = 'high'", F),
    ("'High' = Priority", T),
    ("priority in ('high')", F),
    # numbers and coercions
    ("quantity = 10", T),
    ("quantity = 10.0", T),
    ("quantity > 9.5", T),
    ("quantity >= 10", T),
    ("quantity < 10", F),
    ("quantity <= 10", T),
    ("10 > quantity", F),
    ("9.99 < quantity", T),
    ("price = 2.5", T),
    ("price > 2", T),
    ("numstr = 10", F),
    ("numstr <> 10", T),
    ("numstr > 5", U),
    ("NOT (numstr > 5)", U),
    ("numstr = '10'", T),
    ("flag = TRUE", T),
    ("flag = true", T),
    ("flag <> FALSE", T),
    ("flag = 1", F),
    ("flag > FALSE", U),
    ("quantity = 0010", T),
    ("zero = -0", T),
    ("big = 9223372036854775807", T),
    ("-9223372036854775808 < 0", T),
    # arithmetic
    ("price * 2 = 5", T),
    ("quantity + price = 12.5", T),
    ("quantity - 3 = 7", T),
    ("quantity * 3 = 30", T),
    ("quantity / 4 = 2", T),
    ("quantity / 4.0 = 2.5", T),
    ("quantity % 3 = 1", T),
    ("neg % 3 = -1", T),
    ("neg / 2 = -3", T),
    ("-quantity = -10", T),
    ("- -quantity = 10", T),
    ("+quantity = 10", T),
    ("1 + 2 * 3 = 7", T),
    ("(1 + 2) * 3 = 9", T),
    ("10 - 2 - 3 = 5", T),
    ("2 * 3 % 4 = 2", T),
    ("big + 1 = -9223372036854775808", T),
    ("1.0 / 0 > 1e308", T),
    ("Priority + '!' = 'High!'", T),
    ("'n=' + quantity = 'n=10'", T),
    ("'It''s' = 'It' + '''s'", T),
    ("missing + 1 = 2", U),
    ("-missing = 1", U),
    ("missing * 'x' = 1", U),
    # literals
    ("1e3 = 1000", T),
    ("1.5E1 = 15", T),
    ("0.5E-2 = 0.005", T),
    ("101.5E5 = 10150000", T),
    (".5 = 0.5", T),
    ("'' = ''", T),
    ("'abc' < 'abd'", T),
    ("color > 'blue'", T),
    ("name = 'O''Brien'", T),
    ("TRUE", T),
    ("FALSE", F),
    ("1 = 1", T),
    ("1 = 0", F),
    # NULL / unknown
    ("missing = 1", U),
    ("missing <> 1", U),
    ("NOT (missing = 1)", U),
    ("missing IS NULL", T),
    ("missing IS NOT NULL", F),
    ("nullprop IS NULL", T),
    ("nullprop = NULL", U),
    ("NULL = NULL", U),
    ("Priority = NULL", U),
    ("Priority IS NOT NULL", T),
    ("EXISTS(nullprop)", T),
    ("EXISTS(missing)", F),
    ("NOT EXISTS(missing)", T),
    ("EXISTS(PRIORITY)", T),
    ("EXISTS(user.Priority)", T),
    ("EXISTS(sys.CorrelationId)", T),
    ("missing IS NULL AND NOT EXISTS(missing)", T),
    # three-valued AND / OR / NOT
    ("missing = 1 OR Priority = 'High'", T),
    ("missing = 1 OR Priority = 'Low'", U),
    ("missing = 1 AND Priority = 'Low'", F),
    ("missing = 1 AND Priority = 'High'", U),
    ("Priority = 'High' AND missing = 1", U),
    ("Priority = 'Low' AND missing = 1", F),
    ("Priority = 'High' OR missing = 1", T),
    ("missing = 1 OR missing = 2", U),
    ("missing = 1 OR Priority = 'Low' OR quantity = 10", T),
    ("missing = 1 OR Priority = 'Low' OR quantity = 11", U),
    ("Priority = 'Low' OR color = 'blue' OR quantity = 11", F),
    ("Priority = 'High' AND quantity = 10 AND missing = 1", U),
    ("Priority = 'High' AND missing = 1 AND quantity = 11", F),
    ("Priority = 'High' AND quantity = 10 AND color = 'red'", T),
    ("NOT (missing = 1 AND Priority = 'Low')", T),
    ("NOT (missing = 1 OR Priority = 'Low')", U),
    ("NOT (missing = 1 OR Priority = 'High')", F),
    # precedence
    ("Priority = 'Low' OR Priority = 'High' AND quantity = 10", T),
    ("(Priority = 'Low' OR Priority = 'High') AND quantity = 11", F),
    ("Priority = 'Low' OR Priority = 'High' AND quantity = 11", F),
    ("Priority = 'High' OR Priority = 'Low' AND quantity = 11", T),
    ("NOT Priority = 'Low'", T),
    ("NOT NOT Priority = 'High'", T),
    ("((Priority = 'High'))", T),
    # IN / NOT IN
    ("Priority IN ('High', 'Medium')", T),
    ("Priority IN ('Low', 'Medium')", F),
    ("Priority NOT IN ('Low', 'Medium')", T),
    ("Priority NOT IN ('High')", F),
    ("missing IN ('a', 'b')", U),
    ("missing NOT IN ('a', 'b')", U),
    ("Priority IN ('Low', NULL)", U),
    ("Priority IN ('High', NULL)", T),
    ("Priority NOT IN ('Low', NULL)", U),
    ("quantity IN (1, 10.0, 100)", T),
    ("quantity IN ('10')", F),
    ("flag IN (1)", F),
    ("quantity IN (5 + 5)", T),
    ("quantity IN (price * 4)", T),
    ("Priority IN (color, 'High')", T),
    ("Priority IN (color, missing)", U),
    ("sys.To IN ('Store5','Store6','Store7') OR StoreId = 'Store8'", T),
    # LIKE
    ("sys.Label LIKE '%bus%'", T),
    ("sys.Label LIKE 'bus%'", T),
    ("sys.Label LIKE '%stop'", T),
    ("sys.Label LIKE 'bus_stop'", T),
    ("sys.Label LIKE 'bus_'", F),
    ("sys.Label LIKE 'b%s%p'", T),
    ("sys.Label LIKE 'bus%%stop'", T),
    ("sys.Label LIKE '%'", T),
    ("sys.Label LIKE ''", F),
    ("sys.Label NOT LIKE '%bus%'", F),
    ("sys.Label LIKE 'BUS%'", F),
    ("pct LIKE '50!%' ESCAPE '!'", T),
    ("pct LIKE '5!%' ESCAPE '!'", F),
    ("pct LIKE '%!%' ESCAPE '!'", T),
    ("pct LIKE '50\\%' ESCAPE '\\'", T),
    ("pct LIKE '5__'", T),
    ("pct LIKE '5_'", F),
    ("pct LIKE '5!_' ESCAPE '!'", F),
    ("path LIKE 'a.b*c'", T),
    ("path LIKE 'a_b*c'", T),
    ("path LIKE 'aXb*c'", F),
    ("path LIKE 'a.b%'", T),
    ("brackets LIKE '[ab]'", T),
    ("brackets LIKE '[ab]%' AND 'a' NOT LIKE '[ab]'", T),
    ("multiline LIKE 'a%b'", T),
    ("multiline LIKE 'a_b'", T),
    ("name LIKE 'O''B%'", T),
    ("missing LIKE 'a%'", U),
    ("missing NOT LIKE 'a%'", U),
    ("Priority LIKE missing", U),
    ("quantity LIKE '1%'", F),
    ("Priority LIKE 'H' + '%'", T),
    ("sym LIKE 'sym%'", T),
    # system properties
    ("sys.MessageId = 'msg-1'", T),
    ("sys.messageid = 'msg-1'", T),
    ("SYS.MESSAGEID = 'msg-1'", T),
    ("sys.CorrelationId = 'corr-1'", T),
    ("sys.correlationid LIKE 'corr-%'", T),
    ("sys.Label = 'bus stop'", T),
    ("sys.Subject = 'bus stop'", T),
    ("sys.Label = sys.Subject", T),
    ("sys.To = 'Store5'", T),
    ("sys.ReplyTo = 'replies'", T),
    ("sys.ReplyToSessionId = 'rs-1'", T),
    ("sys.SessionId = 'sess-1'", T),
    ("sys.ContentType = 'application/json'", T),
    ("sys.PartitionKey = 'pk'", T),
    ("sys.SequenceNumber = 42", T),
    ("sys.SequenceNumber > 41 AND sys.SequenceNumber < 43", T),
    ("sys.DeliveryCount = 1", T),
    ("sys.Size >= 256", T),
    ("sys.ExpiresAtUtc > sys.EnqueuedTimeUtc", T),
    ("sys.ExpiresAtUtc - sys.EnqueuedTimeUtc = sys.TimeToLive", T),
    ("sys.EnqueuedTimeUtc + sys.TimeToLive = sys.ExpiresAtUtc", T),
    ("sys.ScheduledEnqueueTimeUtc IS NULL", T),
    ("sys.MessageId = MessageId", U),
    # identifiers
    ("[Mixed Case Key] = 'x'", T),
    ("[mixed case key] = 'x'", T),
    ("[HR-EmployeeID] = 42", T),
    ('"HR-EmployeeID" = 42', T),
    ("user.[HR-EmployeeID] = 42", T),
    ("[sys].[Label] = 'bus stop'", T),
    ("[weird]]name] = 1", T),
    ("[Like] = 'keyword'", T),
    ("größe = 'XL'", T),
    ("sym = 'sym-val'", T),
    # functions and other value types
    ("id = property('id')", T),
    ("property('Priority') = 'High'", T),
    ("p('sys.Label') = 'bus stop'", T),
    ("property('pri' + 'ority') = 'High'", T),
    ("property('user.quantity') = 10", T),
    ("id = '12345678-1234-5678-1234-567812345678'", F),
    ("bin = bin", T),
    ("bin = 'x'", F),
    ("newid() = newid()", F),
    ("newid() IS NOT NULL", T),
    ("lst IN (1, 2)", F),
    ("lst = 1", F),
    ("lst LIKE '%'", F),
    ("lst IS NOT NULL", T),
    # keywords in any case
    ("priority = 'High' and quantity = 10", T),
    ("Priority = 'Low' Or quantity = 10", T),
    ("not priority = 'Low'", T),
    ("missing is null", T),
    ("Priority not in ('Low')", T),
    ("sys.Label not like '%x%'", T),
    ("exists(priority)", T),
    ("flag = True", T),
    ("nullprop is Null", T),
]

BARE_CASES: list[tuple[str, bool | None]] = [
    ("sys.CorrelationId IS NULL", T),
    ("sys.CorrelationId = 'corr-1'", U),
    ("EXISTS(sys.CorrelationId)", F),
    ("sys.MessageId = 'm2'", T),
    ("Priority = 'High'", U),
    ("NOT EXISTS(Priority)", T),
    ("sys.ExpiresAtUtc IS NULL", T),
    ("sys.SequenceNumber > 0", U),
    ("property('x') IS NULL", T),
]


def _ids(cases: list[tuple[str, bool | None]]) -> list[str]:
    return [c[0] for c in cases]


def test_the_table_is_big_enough() -> None:
    assert len(CASES) + len(BARE_CASES) >= 120
    assert len(set(_ids(CASES))) == len(CASES), "duplicate expressions in the table"


@pytest.mark.parametrize(("expression", "expected"), CASES, ids=_ids(CASES))
def test_expression_on_full_message(expression: str, expected: bool | None) -> None:
    message = full_message()
    assert compile_sql_predicate(expression)(message) is expected
    assert compile_sql_filter(expression)(message) is (expected is True)


@pytest.mark.parametrize(("expression", "expected"), BARE_CASES, ids=_ids(BARE_CASES))
def test_expression_on_message_without_properties(expression: str, expected: bool | None) -> None:
    assert compile_sql_predicate(expression)(Msg(message_id="m2")) is expected
    no_dict = Msg(message_id="m2")
    no_dict.application_properties = None  # type: ignore[assignment]
    assert compile_sql_predicate(expression)(no_dict) is expected


def test_exact_case_property_wins_over_other_spellings() -> None:
    message = Msg(application_properties={"priority": "low", "Priority": "High"})
    assert compile_sql_filter("Priority = 'High'")(message)
    assert compile_sql_filter("priority = 'low'")(message)


def test_compiled_filter_is_reusable_across_messages() -> None:
    match = compile_sql_filter("quantity > 5")
    assert [match(Msg(application_properties={"quantity": q})) for q in (1, 6, None, "7", 5.5)] == [
        False, True, False, False, True,
    ]


def test_broker_message_fields_take_precedence() -> None:
    """The broker's message carries expires_at_ms / enqueue_sequence_number; use them when present."""
    m = full_message()
    m.expires_at_ms = 1_700_000_000_000 + 5_000  # type: ignore[attr-defined]
    m.enqueue_sequence_number = 7  # type: ignore[attr-defined]
    assert compile_sql_filter("sys.ExpiresAtUtc - sys.EnqueuedTimeUtc < sys.TimeToLive")(m)
    assert compile_sql_filter("sys.EnqueuedSequenceNumber = 7")(m)
    assert compile_sql_filter("sys.EnqueuedSequenceNumber = 42")(full_message())


def test_parameters_are_substituted_at_compile_time() -> None:
    match = compile_sql_filter("quantity > @min AND color = @color", {"@min": 5, "color": "red"})
    assert match(full_message())
    assert not compile_sql_filter("quantity > @min", {"min": 50})(full_message())
    with pytest.raises(FilterError, match="parameter '@other'"):
        compile_sql_filter("quantity > @other", {"min": 1})


# ---- evaluation errors --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expression",
    [
        "Priority * 2 = 1",
        "quantity / zero = 1",
        "quantity % zero = 1",
        "-Priority = 1",
        "flag + 1 = 2",
        "Priority - 'x' = 'y'",
        "Priority LIKE quantity",
        "Priority LIKE 'a' ESCAPE color",
        "property(quantity) = 1",
        "p('sys.Nope') = 1",
        "bin + 1 = 1",
    ],
)
def test_runtime_errors_raise_filter_evaluation_error(expression: str) -> None:
    match = compile_sql_filter(expression)
    with pytest.raises(FilterEvaluationError):
        match(full_message())


def test_and_or_short_circuit_skips_failing_operand() -> None:
    message = full_message()
    assert compile_sql_filter("Priority = 'Low' AND Priority * 2 = 1")(message) is False
    assert compile_sql_filter("Priority = 'High' OR Priority * 2 = 1")(message) is True


def test_sql_filter_on_benchmark_shape_is_fast() -> None:
    """A loose guard (the report has the real number): one evaluation stays far below 20 us."""
    from sbemulator.filters.bench import measure_us_per_eval

    us = measure_us_per_eval("Priority = 'High'", full_message(), repeat=20_000)
    assert us < 20.0
