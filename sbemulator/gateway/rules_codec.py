"""Rule descriptions as the ``$management`` add-rule / enumerate-rules operations encode them.

add-rule carries a map (``sql-filter`` / ``correlation-filter`` / ``sql-rule-action``);
enumerate-rules answers with described lists (``com.microsoft:rule-description:list`` and friends,
descriptor codes 0x0000013700000004..9), which is what the JavaScript SDK's rule manager decodes.
"""

from __future__ import annotations

from typing import Any

from ..amqp.types import Described, Int, ULong
from ..config import RuleConfig
from ..descriptions import CORRELATION_PROPERTIES
from ..filters.values import from_amqp, to_amqp

RULE_DESCRIPTION = ULong(0x0000013700000004)
EMPTY_RULE_ACTION = ULong(0x0000013700000005)
SQL_RULE_ACTION = ULong(0x0000013700000006)
SQL_FILTER = ULong(0x0000001370000006)
TRUE_FILTER = ULong(0x0000001370000007)
FALSE_FILTER = ULong(0x0000001370000008)
CORRELATION_FILTER = ULong(0x0000001370000009)
COMPATIBILITY_LEVEL = Int(20)

# AMQP correlation-filter map keys -> the Config.json names the broker uses
_CORRELATION_KEYS = {p.amqp: p.name for p in CORRELATION_PROPERTIES}
_CORRELATION_ORDER = list(_CORRELATION_KEYS.values())


class RuleDescriptionError(ValueError):
    """The add-rule request does not describe a filter."""


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def rule_from_description(description: Any) -> dict[str, Any]:
    """Keyword arguments for ``Broker.add_rule`` from an add-rule ``rule-description`` map."""
    if isinstance(description, Described):
        description = description.value
    if not isinstance(description, dict):
        raise RuleDescriptionError("rule-description must be a map")
    entries = {str(_text(k)): v for k, v in description.items()}
    action = entries.get("sql-rule-action")
    action_expression = None
    if isinstance(action, dict):
        action_expression = _text({str(_text(k)): v for k, v in action.items()}.get("expression"))
    if isinstance(entries.get("sql-filter"), dict):
        sql = {str(_text(k)): v for k, v in entries["sql-filter"].items()}
        expression = _text(sql.get("expression"))
        if not isinstance(expression, str):
            raise RuleDescriptionError("sql-filter needs an expression")
        return {"filter_type": "Sql", "sql_expression": expression, "action_expression": action_expression}
    if isinstance(entries.get("correlation-filter"), dict):
        raw = {str(_text(k)): v for k, v in entries["correlation-filter"].items()}
        correlation: dict[str, Any] = {}
        for key, name in _CORRELATION_KEYS.items():
            if raw.get(key) is not None:
                correlation[name] = _text(raw[key])
        properties = raw.get("properties")
        if isinstance(properties, dict) and properties:
            # a JS Date arrives as an AMQP timestamp; kept as a date/time so that it survives a restart typed
            correlation["Properties"] = {str(_text(k)): from_amqp(_text(v)) if v is not None else None
                                         for k, v in properties.items()}
        return {"filter_type": "Correlation", "correlation": correlation, "action_expression": action_expression}
    raise RuleDescriptionError("rule-description has neither a sql-filter nor a correlation-filter")


def rule_to_description(rule: RuleConfig) -> Described:
    """The described list enumerate-rules returns for one rule."""
    kind = (rule.filter_type or "").lower()
    expression = (rule.sql_expression or "").strip()
    if kind in ("true", "truefilter") or (kind == "sql" and expression.replace(" ", "") == "1=1"):
        filter_value = Described(TRUE_FILTER, [])
    elif kind in ("false", "falsefilter") or (kind == "sql" and expression.replace(" ", "") == "1=0"):
        filter_value = Described(FALSE_FILTER, [])
    elif kind.startswith("correlation"):
        corr = rule.correlation or {}
        values: list[Any] = [corr.get(name) for name in _CORRELATION_ORDER]
        values.append({k: to_amqp(v) for k, v in (corr.get("Properties") or {}).items()})
        filter_value = Described(CORRELATION_FILTER, values)
    else:
        filter_value = Described(SQL_FILTER, [rule.sql_expression, COMPATIBILITY_LEVEL])
    if rule.action_expression:
        action = Described(SQL_RULE_ACTION, [rule.action_expression, COMPATIBILITY_LEVEL])
    else:
        action = Described(EMPTY_RULE_ACTION, [])
    return Described(RULE_DESCRIPTION, [filter_value, action, rule.name])
