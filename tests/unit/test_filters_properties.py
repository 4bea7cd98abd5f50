"""Property-based tests: three-valued logic laws and robustness on arbitrary text."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from sbemulator.filters import (
    FilterError,
    FilterEvaluationError,
    compile_sql_action,
    compile_sql_predicate,
)

MESSAGE = SimpleNamespace(
    message_id="m", correlation_id=None, subject="bus", to=None, reply_to=None, reply_to_session_id=None,
    session_id=None, content_type=None, partition_key=None, sequence_number=1, enqueued_time_ms=0,
    time_to_live_ms=1000, scheduled_enqueue_time_ms=None, delivery_count=0, size=1,
    application_properties={"a": 1, "s": "x", "z": 0, "n": None},
)

# Atoms with their known three-valued truth on MESSAGE.
ATOMS = {
    "a = 1": True,
    "a = 2": False,
    "missing = 1": None,
    "s LIKE 'x%'": True,
    "s IN ('y', 'z')": False,
    "n = 1": None,
    "EXISTS(a)": True,
    "sys.Label = 'nope'": False,
    "s IN ('y', NULL)": None,
    "TRUE": True,
    "FALSE": False,
}


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def _combine(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        children.map(lambda c: (f"NOT ({c[0]})", _not(c[1]))),
        st.tuples(children, children).map(lambda p: (f"({p[0][0]}) AND ({p[1][0]})", _and(p[0][1], p[1][1]))),
        st.tuples(children, children).map(lambda p: (f"({p[0][0]}) OR ({p[1][0]})", _or(p[0][1], p[1][1]))),
    )


PREDICATES = st.recursive(st.sampled_from(sorted(ATOMS.items())), _combine, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(PREDICATES)
def test_logic_follows_documented_truth_tables(case: tuple[str, bool | None]) -> None:
    expression, expected = case
    assert compile_sql_predicate(expression)(MESSAGE) is expected


@settings(max_examples=300, deadline=None)
@given(PREDICATES)
def test_not_is_three_valued_negation(case: tuple[str, bool | None]) -> None:
    expression, _ = case
    value = compile_sql_predicate(expression)(MESSAGE)
    assert compile_sql_predicate(f"NOT ({expression})")(MESSAGE) is _not(value)


WORDS = [
    "a", "s", "n", "missing", "sys.Label", "sys.Nope", "user.a", "[x y]", "'str'", "''", "1", "2.5", "1e3",
    "NULL", "TRUE", "AND", "OR", "NOT", "IN", "LIKE", "ESCAPE", "IS", "EXISTS", "(", ")", ",", "=", "<>",
    "!=", "<", ">=", "+", "-", "*", "/", "%", "newid()", "p('a')", "@x", ";", "SET", "REMOVE", "'", "[",
    '"', ".", "0",
]


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), st.text(max_size=30)))
def test_filters_fail_only_with_filter_errors(text: str) -> None:
    try:
        predicate = compile_sql_predicate(text)
    except FilterError:
        return
    try:
        assert predicate(MESSAGE) in (True, False, None)
    except FilterEvaluationError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join))
def test_actions_fail_only_with_filter_errors(text: str) -> None:
    try:
        action = compile_sql_action(text)
    except FilterError:
        return
    message = SimpleNamespace(**vars(MESSAGE))
    message.application_properties = dict(MESSAGE.application_properties)
    try:
        action(message)
    except FilterEvaluationError:
        pass
