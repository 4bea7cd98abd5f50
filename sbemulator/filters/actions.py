"""Compiles SQL rule actions (``SET prop = expr``, ``REMOVE prop``, several statements) to a closure.

Statements run in order against the message copy the broker hands in, so a later statement sees
what an earlier one set. Per the action docs: SET creates or updates a property, REMOVE deletes
one, a missing user property reads as unknown (NULL) and SET "performs implicit conversion if
possible" when the existing property has another type: an integer assigned over a floating-point
property stays floating-point (C#'s implicit long -> double); other types are stored as computed.
Values written are plain Python int/float/str/bool (a ``newid()`` GUID is stored as its string).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from . import nodes as ast
from . import sysprops, values
from .errors import FilterEvaluationError
from .evaluator import MISSING, Compiler, find_user_key

ActionFn = Callable[[Any], None]


def _plain(value: Any) -> Any:
    """Strip AMQP subclasses and turn GUIDs into strings, so the broker re-encodes values by default."""
    if value is None:
        return None
    k = values.kind(value)
    if k == values.BOOL:
        return bool(value)
    if k == values.NUM:
        return float(value) if isinstance(value, float) else int(value)
    if k == values.STR:
        return str(value)
    if k == values.UUID:
        return str(value)
    if k == values.DATETIME:
        return values.to_amqp_timestamp(value)
    if k == values.TIMESPAN:
        return values.to_amqp_timespan(value)
    return value


def _set_user(name: str, expr: Callable[[Any], Any]) -> ActionFn:
    def set_user(message: Any) -> None:
        new = _plain(expr(message))
        props = message.application_properties
        if props is None:
            props = message.application_properties = {}
        key = find_user_key(props, name)
        if key is MISSING:
            props[name] = new
            return
        old = props[key]
        if isinstance(old, float) and values.kind(new) == values.NUM and not isinstance(new, bool):
            new = float(new)
        props[key] = new

    return set_user


def _remove_user(name: str) -> ActionFn:
    def remove_user(message: Any) -> None:
        props = message.application_properties
        key = find_user_key(props, name)
        if key is not MISSING:
            del props[key]

    return remove_user


def _set_sys(name: str, expr: Callable[[Any], Any] | None) -> ActionFn:
    sp = sysprops.lookup(name)
    assert sp is not None and sp.attribute is not None
    attribute = sp.attribute

    def set_sys(message: Any) -> None:
        new = expr(message) if expr is not None else None
        if new is not None:
            k = values.kind(new)
            if sp.kind == "str":
                if k not in (values.STR, values.UUID):
                    raise FilterEvaluationError(f"cannot assign a {k} to sys.{sp.name}, which is a string")
                new = str(new)
            elif sp.kind == "datetime":
                if not isinstance(new, datetime):
                    raise FilterEvaluationError(f"cannot assign a {k} to sys.{sp.name}, which is a time")
                new = sysprops.to_ms_datetime(new)
            elif sp.kind == "timedelta":
                if not isinstance(new, timedelta):
                    raise FilterEvaluationError(f"cannot assign a {k} to sys.{sp.name}, which is a duration")
                new = sysprops.to_ms_timedelta(new)
        setattr(message, attribute, new)
        message.system_properties_changed = True

    return set_sys


def compile_statements(statements: list[ast.Node], text: str,
                       parameters: Mapping[str, Any] | None = None) -> ActionFn:
    compiler = Compiler(text, "SQL action", parameters)
    steps: list[ActionFn] = []
    for st in statements:
        if isinstance(st, ast.SetAction):
            expr = compiler.value(st.value)
            target = st.target
            if target.scope == "user":
                steps.append(_set_user(target.name, expr))
            else:
                steps.append(_set_sys(target.name, expr))
        elif isinstance(st, ast.RemoveAction):
            target = st.target
            steps.append(_remove_user(target.name) if target.scope == "user" else _set_sys(target.name, None))
    if len(steps) == 1:
        return steps[0]
    steps_t = tuple(steps)

    def run_all(message: Any) -> None:
        for step in steps_t:
            step(message)

    return run_all
