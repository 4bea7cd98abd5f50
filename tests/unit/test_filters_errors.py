"""Compile errors: a bad filter or action is rejected at rule creation with its position."""

from __future__ import annotations

import pytest

from sbemulator.filters import FilterError, compile_rule, compile_sql_action, compile_sql_filter

FILTER_ERRORS: list[tuple[str, int, str, str]] = [
    # expression, position, near, a piece of the message
    ("Priority = 'High' ANDD x = 1", 18, "ANDD", "expected AND, OR or end of expression"),
    ("", 0, "", "empty"),
    ("Priority = ", 11, "", "expected constant, property"),
    ("(Priority = 'High'", 18, "", "expected ')'"),
    ("Priority = 'High", 11, "'High", "unterminated string"),
    ("sys.Foo = 1", 4, "Foo", "system property 'Foo' does not exist"),
    ("foo.Bar = 1", 0, "foo", "unknown scope 'foo'"),
    ("Priority IN 'a'", 12, "'a'", "expected '('"),
    ("Priority IN ('a' 'b')", 17, "'b'", "expected ',' or ')'"),
    ("Priority IN ()", 13, ")", "expected constant"),
    ("Priority NOT = 'a'", 13, "=", "expected IN or LIKE"),
    ("Priority IS 'a'", 12, "'a'", "expected NULL"),
    ("Priority LIKE 'a' ESCAPE 'ab'", 25, "'ab'", "string of length 1"),
    ("a LIKE 'x!' ESCAPE '!'", 7, "'x!'", "ends with the escape character"),
    ("a + (b = 1) = 2", 5, "b", "predicate cannot be used as a value"),
    ("1 + 2", 0, "1", "expected a predicate"),
    ("flag", 0, "flag", "expected a predicate"),
    ("NOT flag", 4, "flag", "expected a predicate"),
    ("a = 1 b = 2", 6, "b", "expected AND, OR"),
    ("a == 1", 3, "=", "expected constant"),
    ("1 = 1 = 1", 6, "=", "expected AND, OR"),
    ("a BETWEEN 1 AND 2", 2, "BETWEEN", "expected AND, OR"),
    ("99999999999999999999 = 1", 0, "99999999999999999999", "Int64"),
    ("9223372036854775808 = 1", 0, "9223372036854775808", "Int64"),
    ("1e = 1", 0, "1e", "exponent"),
    ("a = 1 # x", 6, "#", "unexpected character"),
    ("EXISTS(1)", 7, "1", "expected property name"),
    ("AND = 1", 0, "AND", "expected constant"),
    ("unknownfn() = 1", 0, "unknownfn", "unknown function"),
    ("a = 1)", 5, ")", "expected AND, OR"),
    ("a = 'x' AND", 11, "", "expected constant"),
    ("x = 1 AND - 'a' = 1", 10, "-", "cannot be applied to a string"),
    ("quantity > @min", 11, "@min", "parameter '@min'"),
]


@pytest.mark.parametrize(("expression", "position", "near", "message"), FILTER_ERRORS,
                         ids=[c[0] or "<empty>" for c in FILTER_ERRORS])
def test_filter_compile_errors(expression: str, position: int, near: str, message: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_sql_filter(expression)
    err = info.value
    assert err.position == position
    assert err.near == near
    assert message in str(err)
    assert str(err).startswith(f"Invalid SQL filter expression at position {position} ")


def test_error_message_has_documented_shape() -> None:
    with pytest.raises(FilterError) as info:
        compile_sql_filter("Priority = 'High' ANDD x = 1")
    assert str(info.value) == (
        "Invalid SQL filter expression at position 18 near 'ANDD': expected AND, OR or end of expression"
    )
    assert info.value.expected == ("AND", "OR", "end of expression")


ACTION_ERRORS: list[tuple[str, int, str]] = [
    ("", 0, "empty"),
    (";", 1, "empty"),
    ("SET", 3, "expected property name"),
    ("SET a 1", 6, "expected '='"),
    ("REMOVE", 6, "expected property name"),
    ("UPDATE a = 1", 0, "expected SET or REMOVE"),
    ("SET sys.SequenceNumber = 1", 8, "cannot be changed"),
    ("REMOVE sys.EnqueuedTimeUtc", 11, "cannot be changed"),
    ("SET sys.Nope = 1", 8, "does not exist"),
    ("SET a = 1 b", 10, "expected operator, ';', SET, REMOVE"),
    ("SET a = b = 1", 10, "expected operator"),
    ("SET a = (b = 1)", 9, "predicate cannot be used as a value"),
]


@pytest.mark.parametrize(("expression", "position", "message"), ACTION_ERRORS,
                         ids=[c[0] or "<empty>" for c in ACTION_ERRORS])
def test_action_compile_errors(expression: str, position: int, message: str) -> None:
    with pytest.raises(FilterError) as info:
        compile_sql_action(expression)
    assert info.value.position == position
    assert message in str(info.value)
    assert str(info.value).startswith("Invalid SQL action expression")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"filter_type": "Regex"},
        {"filter_type": "Sql"},
        {"filter_type": "Sql", "sql_expression": "a ="},
        {"filter_type": "True", "action_expression": "SET"},
        {"filter_type": "Correlation", "correlation": {"Nope": "x"}},
        {"filter_type": "Correlation", "correlation": {"Properties": ["a"]}},
        {"filter_type": "Correlation", "correlation": {"CorrelationId": 5}},
    ],
)
def test_compile_rule_rejects_bad_definitions(kwargs: dict) -> None:
    with pytest.raises(FilterError):
        compile_rule("r", **kwargs)


def test_documented_length_limit() -> None:
    ok = "a = '" + "x" * 1016 + "'"
    assert len(ok) == 1022
    compile_sql_filter(ok)
    with pytest.raises(FilterError, match="limit is 1024") as info:
        compile_sql_filter("a = '" + "x" * 1020 + "'")
    assert info.value.position == 1024
    with pytest.raises(FilterError, match="limit is 1024"):
        compile_sql_action("SET a = '" + "x" * 1020 + "'")


def test_deep_nesting_is_a_filter_error_not_a_crash() -> None:
    compile_sql_filter("(" * 60 + "a = 1" + ")" * 60)
    compile_sql_filter("a = " + "+".join(["b"] * 95))
    for text in ("(" * 300 + "a = 1" + ")" * 300, "NOT " * 200 + "a = 1", "a = " + "-" * 500 + "1",
                 "a = " + "- " * 300 + "b", "a = " + "+".join(["b"] * 300), "a = " + "*".join(["2"] * 300),
                 "a IN (" + "+".join(["b"] * 300) + ")"):
        with pytest.raises(FilterError, match="nested"):
            compile_sql_filter(text)


def test_long_and_chain_compiles_and_evaluates() -> None:
    from types import SimpleNamespace

    text = " OR ".join(["a=2"] * 100) + " OR a=1"
    assert len(text) <= 1024
    assert compile_sql_filter(text)(SimpleNamespace(application_properties={"a": 1}))


def test_action_statement_limit() -> None:
    compile_sql_action("; ".join(f"SET a{i} = {i}" for i in range(32)))
    with pytest.raises(FilterError, match="at most 32 statements"):
        compile_sql_action(" ".join(f"SET a{i} = 1" for i in range(33)))
