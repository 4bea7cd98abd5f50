"""The Azure Resource Manager subset ``azure-mgmt-servicebus`` uses: JSON in and out, pure functions.

Resources are ``{"id", "name", "type", "properties": {...}}``; ARM property names are the Atom names in
camelCase, durations ISO-8601 strings; lists are ``{"value": [...]}`` and errors
``{"error": {"code", "message"}}``. The emulator has one namespace: any namespace name in the path
addresses it, so ``provision.py`` can keep using the Azure namespace name it is configured with.
Property names, codecs and which kinds carry them come from the table of entity properties
(:mod:`sbemulator.descriptions`).
"""

from __future__ import annotations

import json
from typing import Any

from sbemulator.config import RuleConfig
from sbemulator.descriptions import (
    CORRELATION_PROPERTIES,
    KINDS,
    Codec,
    NonPositiveDuration,
    by_arm,
    decode_duration,
    for_kind,
    format_duration,
)

from .atom import format_time
from .backend import EntityInfo, RuleInfo
from .errors import BadRequest

# ARM-only read-only properties a client may send back from a GET: ignored (the table's runtime ones too).
_ARM_READ_ONLY = {"isClientAffine", "clientAffineProperties"}
_ANY_KIND = {name: p for k in KINDS for name, p in by_arm(k).items()}
_CORRELATION = {p.arm: p.name for p in CORRELATION_PROPERTIES}
TYPES = {
    "queue": "Microsoft.ServiceBus/namespaces/queues",
    "topic": "Microsoft.ServiceBus/namespaces/topics",
    "subscription": "Microsoft.ServiceBus/namespaces/topics/subscriptions",
    "rule": "Microsoft.ServiceBus/namespaces/topics/subscriptions/rules",
}


def parse_body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The request body is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    props = data.get("properties", {})
    if props is None:
        props = {}
    if not isinstance(props, dict):
        raise BadRequest("'properties' must be a JSON object.")
    return data


def entity_spec(body: bytes, kind: str | None = None) -> dict[str, Any]:
    """An SBQueue/SBTopic/SBSubscription body -> spec (see backend). A property of another kind of
    entity is accepted and left out, as before; one no kind has is refused."""
    props = parse_body(body).get("properties") or {}
    own = by_arm(kind) if kind is not None else _ANY_KIND
    spec: dict[str, Any] = {}
    for key, value in props.items():
        if key in _ARM_READ_ONLY:
            continue
        prop = own.get(key) or _ANY_KIND.get(key)
        if prop is None:
            raise BadRequest(f"The property '{key}' is not supported.")
        if value is None or prop.codec is Codec.RUNTIME or key not in own:
            continue
        spec[prop.atom] = _duration(key, value) if prop.codec is Codec.DURATION else value
    return spec


def _duration(key: str, value: Any) -> float:
    if not isinstance(value, str):
        raise BadRequest(f"The value of '{key}' must be an ISO-8601 duration string.")
    try:
        return decode_duration(value)
    except NonPositiveDuration:
        raise BadRequest(f"The value '{value}' of '{key}' must be a positive duration.") from None
    except ValueError:
        raise BadRequest(f"The value '{value}' of '{key}' is not a valid ISO-8601 duration.") from None


def rule_config(body: bytes, name: str) -> RuleConfig:
    props = parse_body(body).get("properties") or {}
    ftype = props.get("filterType", "SqlFilter")
    action = props.get("action") or {}
    if not isinstance(action, dict):
        raise BadRequest("'action' must be a JSON object.")
    action_expr = action.get("sqlExpression") or None
    if ftype == "SqlFilter":
        sql = props.get("sqlFilter") or {}
        expr = sql.get("sqlExpression") if isinstance(sql, dict) else None
        if not isinstance(expr, str) or not expr.strip():
            expr = "1=1" if not sql else None
        if expr is None:
            raise BadRequest("A SqlFilter needs sqlFilter.sqlExpression.")
        return RuleConfig(name=name, filter_type="Sql", sql_expression=expr, action_expression=action_expr)
    if ftype == "CorrelationFilter":
        raw = props.get("correlationFilter") or {}
        if not isinstance(raw, dict):
            raise BadRequest("'correlationFilter' must be a JSON object.")
        corr: dict[str, Any] = {}
        for key, value in raw.items():
            if key == "properties":
                if value:
                    if not isinstance(value, dict):
                        raise BadRequest("'correlationFilter.properties' must be a JSON object.")
                    corr["Properties"] = dict(value)
            elif key in _CORRELATION:
                if value is not None:
                    corr[_CORRELATION[key]] = value
            elif key != "requiresPreprocessing":
                raise BadRequest(f"The correlation filter property '{key}' is not supported.")
        if not corr:
            raise BadRequest("A CorrelationFilter needs at least one property.")
        return RuleConfig(name=name, filter_type="Correlation", correlation=corr, action_expression=action_expr)
    raise BadRequest(f"Unknown filterType '{ftype}' (expected SqlFilter or CorrelationFilter).")


def _resource(rid: str, name: str, rtype: str, properties: dict[str, Any], location: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": rid, "name": name, "type": rtype, "properties": properties}
    if location:
        out["location"] = location
    return out


def _count_details(info: EntityInfo) -> dict[str, int]:
    c = info.counts
    return {
        "activeMessageCount": c["active"], "deadLetterMessageCount": c["dead_letter"],
        "scheduledMessageCount": c["scheduled"], "transferMessageCount": 0,
        "transferDeadLetterMessageCount": c["transfer_dead_letter"],
    }


def _runtime_value(name: str, info: EntityInfo) -> Any:
    if name in ("createdAt", "updatedAt", "accessedAt"):
        return format_time({"createdAt": info.created_at, "updatedAt": info.updated_at,
                            "accessedAt": info.accessed_at}[name])
    if name == "countDetails":
        return _count_details(info)
    if name == "messageCount":
        return sum(info.counts[k] for k in ("active", "deferred", "scheduled", "dead_letter", "transfer_dead_letter"))
    if name == "sizeInBytes":
        return info.size_in_bytes
    if name == "subscriptionCount":
        return info.subscription_count
    return None


# ARM's SBQueue has no supportOrdering (SBTopic has): accepted for a queue, not written back.
_NOT_RENDERED = {("queue", "supportOrdering")}


def entity_resource(info: EntityInfo, rid: str, location: str | None) -> dict[str, Any]:
    cfg, x = info.config, info.extras
    props: dict[str, Any] = {}
    for prop in for_kind(info.kind):
        if prop.arm is None or (info.kind, prop.arm) in _NOT_RENDERED:
            continue
        if prop.codec is Codec.RUNTIME:
            props[prop.arm] = _runtime_value(prop.arm, info)
            continue
        value = getattr(cfg, prop.field) if prop.field else x[prop.atom]
        if prop.codec is Codec.DURATION:
            value = format_duration(value)
        elif prop.codec is Codec.ENTITY and not value:
            continue  # forwardTo / forwardDeadLetteredMessagesTo only when set
        props[prop.arm] = value
    return _resource(rid, info.name, TYPES[info.kind], props, location)


def rule_resource(info: RuleInfo, rid: str, location: str | None) -> dict[str, Any]:
    rule = info.rule
    props: dict[str, Any] = {}
    if rule.filter_type == "Correlation":
        corr = dict(rule.correlation or {})
        user = corr.pop("Properties", None) or {}
        reverse = {v: k for k, v in _CORRELATION.items()}
        cf: dict[str, Any] = {reverse[k]: v for k, v in corr.items() if k in reverse}
        cf["properties"] = {k: v if isinstance(v, (str, int, float, bool)) else str(v) for k, v in user.items()}
        props.update(filterType="CorrelationFilter", correlationFilter=cf)
    else:
        props.update(filterType="SqlFilter",
                     sqlFilter={"sqlExpression": rule.sql_expression or "1=1", "compatibilityLevel": 20})
    props["action"] = {"sqlExpression": rule.action_expression, "compatibilityLevel": 20} if rule.action_expression \
        else {}
    return _resource(rid, rule.name, TYPES["rule"], props, location)


def namespace_resource(rid: str, name: str, location: str, sku: dict[str, Any], endpoint: str,
                       created: float, updated: float, extra: dict[str, Any] | None = None,
                       tags: dict[str, str] | None = None) -> dict[str, Any]:
    props = {
        "provisioningState": "Succeeded", "status": "Active", "serviceBusEndpoint": endpoint,
        "metricId": name, "createdAt": format_time(created), "updatedAt": format_time(updated),
        "disableLocalAuth": False, "minimumTlsVersion": "1.2", "zoneRedundant": False,
        "publicNetworkAccess": "Enabled",
    }
    props.update(extra or {})
    props["provisioningState"] = "Succeeded"
    out = _resource(rid, name, "Microsoft.ServiceBus/Namespaces", props, location)
    out["sku"] = sku
    out["tags"] = tags or {}
    return out


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def dumps(data: Any) -> bytes:
    return json.dumps(data).encode()
