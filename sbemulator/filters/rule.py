"""Subscription rules: a compiled filter plus an optional compiled action."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .actions import compile_statements
from .correlation import compile_correlation
from .errors import FilterError
from .evaluator import PredFn, compile_predicate
from .parser import parse_action, parse_filter

_FILTER_TYPES = {
    "sql": "Sql",
    "sqlfilter": "Sql",
    "correlation": "Correlation",
    "correlationfilter": "Correlation",
    "true": "True",
    "truefilter": "True",
    "false": "False",
    "falsefilter": "False",
}
TRUE_EXPRESSION = "1=1"
FALSE_EXPRESSION = "1=0"


def compile_sql_predicate(expression: str, parameters: Mapping[str, Any] | None = None) -> PredFn:
    """Compile a SQL filter to ``f(message) -> True | False | None`` (None: unknown)."""
    if not isinstance(expression, str):
        raise FilterError("the SQL expression must be a string", 0, "", ("a string",))
    return compile_predicate(parse_filter(expression), expression, parameters)


def compile_sql_filter(expression: str, parameters: Mapping[str, Any] | None = None) -> Callable[[Any], bool]:
    """Compile a SQL filter to ``f(message) -> bool``: True only when the predicate is true.

    Raises FilterError for a bad expression; the returned function raises FilterEvaluationError
    when a message cannot be evaluated (e.g. arithmetic on a string).
    """
    pred = compile_sql_predicate(expression, parameters)

    def matches(message: Any) -> bool:
        return pred(message) is True

    return matches


def compile_sql_action(expression: str, parameters: Mapping[str, Any] | None = None) -> Callable[[Any], None]:
    """Compile SQL rule action statements to ``f(message) -> None`` that mutates the message."""
    if not isinstance(expression, str):
        raise FilterError("the SQL action must be a string", 0, "", ("a string",), "SQL action")
    return compile_statements(parse_action(expression), expression, parameters)


def _no_action(message: Any) -> None:
    return None


def _match_all(message: Any) -> bool:
    return True


def _match_none(message: Any) -> bool:
    return False


class Rule:
    """A subscription rule compiled once; ``matches`` and ``apply_action`` run per message.

    ``matches`` and ``apply_action`` are plain closures stored on the instance (no method
    dispatch, no re-parsing). ``has_action`` tells the broker whether a match produces its own
    message copy (Service Bus: every matching rule with an action yields a copy carrying that
    rule's changes; rules without actions together yield at most one copy).
    """

    __slots__ = ("action_expression", "apply_action", "correlation", "filter_type", "has_action",
                 "matches", "name", "sql_expression")

    def __init__(self, name: str, filter_type: str, sql_expression: str | None,
                 correlation: dict[str, Any] | None, action_expression: str | None,
                 matches: Callable[[Any], bool], apply_action: Callable[[Any], None] | None) -> None:
        self.name = name
        self.filter_type = filter_type
        self.sql_expression = sql_expression
        self.correlation = correlation
        self.action_expression = action_expression
        self.matches = matches
        self.has_action = apply_action is not None
        self.apply_action = apply_action or _no_action

    def __repr__(self) -> str:
        detail = self.sql_expression if self.filter_type != "Correlation" else self.correlation
        return f"Rule({self.name!r}, {self.filter_type}, {detail!r}, action={self.action_expression!r})"


def normalize_filter_type(filter_type: str | None) -> str:
    key = (filter_type or "").strip().lower()
    if key not in _FILTER_TYPES:
        raise FilterError(f"unknown filter type '{filter_type}'", 0, str(filter_type),
                          ("Sql", "Correlation", "True", "False"), "rule")
    return _FILTER_TYPES[key]


def compile_rule(name: str, filter_type: str, sql_expression: str | None = None,
                 correlation: dict[str, Any] | None = None, action_expression: str | None = None,
                 parameters: Mapping[str, Any] | None = None,
                 action_parameters: Mapping[str, Any] | None = None) -> Rule:
    """Compile a rule as the official emulator's Config.json (or ARM) describes it.

    ``filter_type`` is Sql, Correlation, True or False (any case, optionally with a ``Filter``
    suffix). A blank ``action_expression`` means no action. ``parameters`` are the filter's
    ``@name`` values; the action has its own, ``action_parameters`` (the filter's when not given).
    """
    ftype = normalize_filter_type(filter_type)
    if ftype == "Sql":
        if sql_expression is None:
            raise FilterError("a Sql filter needs an expression", 0, "", ("SQL expression",))
        matches = compile_sql_filter(sql_expression, parameters)
    elif ftype == "Correlation":
        matches = compile_correlation(correlation)
    elif ftype == "True":
        sql_expression, matches = TRUE_EXPRESSION, _match_all
    else:
        sql_expression, matches = FALSE_EXPRESSION, _match_none
    action = None
    if action_expression is not None and action_expression.strip():
        action = compile_sql_action(action_expression,
                                    parameters if action_parameters is None else action_parameters)
    return Rule(name, ftype, sql_expression, correlation if ftype == "Correlation" else None,
                action_expression if action is not None else None, matches, action)
