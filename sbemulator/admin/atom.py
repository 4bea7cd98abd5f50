"""The Service Bus Atom/XML management format: parsing request bodies, rendering responses.

Pure functions (bytes in, bytes out), so the format is testable without sockets. The shapes follow
what Service Bus sends and what ``azure.servicebus.management`` (its generated models plus the
``_utils`` key-value workarounds) and ``@azure/service-bus``'s ATOM serializer read:

* an entity is an Atom ``<entry>`` whose ``<content type="application/xml">`` holds a
  ``QueueDescription`` / ``TopicDescription`` / ``SubscriptionDescription`` / ``RuleDescription``
  / ``NamespaceInfo`` in the ``.../2010/10/servicebus/connect`` namespace;
* a list is a ``<feed>`` of entries; a second ``<link rel="next">`` carries ``$skip``/``$top`` of the
  next page (the Python SDK takes ``link[1]`` as the next page);
* counts sit in ``CountDetails`` under the ``.../2011/06/servicebus`` namespace (prefix ``d2p1``);
* rule filters and actions are typed with ``i:type`` (XMLSchema-instance); correlation properties
  are ``KeyValueOfstringanyType`` pairs whose ``Value`` carries ``i:type="d6p1:<xsd type>"``;
* errors are ``<Error><Code>status</Code><Detail>text</Detail></Error>``.

Request bodies are read by local element names, so it does not matter whether a client puts the
description in the default namespace (the JS SDK, the Python SDK after its XML workaround policy)
or behind a prefix.

Which elements a description has, in which order, and how each value is written come from the table of
entity properties (:mod:`sbemulator.descriptions`). The request's ``api-version`` matters: under
2017-04 a description carrying a newer property (``MaxMessageSizeInKilobytes``) is refused with 400,
and responses leave newer properties out (the topic filter counts need 2024-05).
"""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from sbemulator.config import RuleConfig
from sbemulator.descriptions import (  # MAX_TIMESPAN and format_duration are also this format's API
    CORRELATION_PROPERTIES,
    MAX_TIMESPAN,  # noqa: F401
    AuthorizationRuleConfig,
    Codec,
    NonPositiveDuration,
    Property,
    by_atom,
    decode_duration,
    for_kind,
    format_duration,
    parse_duration,
    reported_max_size,
    supported_at,
)

from .backend import GIVEN_SUFFIX, EntityInfo, RuleInfo, entity_name_from_forward
from .errors import BadRequest

ATOM_NS = "http://www.w3.org/2005/Atom"
SB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
COUNT_NS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
XSD_NS = "http://www.w3.org/2001/XMLSchema"
ENTRY_CONTENT_TYPE = "application/atom+xml;type=entry;charset=utf-8"
FEED_CONTENT_TYPE = "application/atom+xml;type=feed;charset=utf-8"
ERROR_CONTENT_TYPE = "application/xml;charset=utf-8"

_DESCRIPTIONS = {"queue": "QueueDescription", "topic": "TopicDescription", "subscription": "SubscriptionDescription"}
_KINDS = {tag: kind for kind, tag in _DESCRIPTIONS.items()}
_CORRELATION_FIELDS = tuple(p.name for p in CORRELATION_PROPERTIES)


# ---------------------------------------------------------------------------------------- values
# .NET's DateTime.MinValue, what Service Bus writes for a time that never happened (AccessedAt of an
# entity never used).
ZERO_TIME = "0001-01-01T00:00:00Z"


def format_time(ts: float | None) -> str:
    if ts is None:
        return ZERO_TIME
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _el(name: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        value = _bool(value)
    return f"<{name}>{escape(str(value))}</{name}>"


# ---------------------------------------------------------------------------------------- parsing
def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _parse_xml(body: bytes) -> ET.Element:
    if not body or not body.strip():
        raise BadRequest("The request body is empty; an Atom entry was expected.")
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise BadRequest("Document type declarations are not allowed in the request body.")
    try:
        return ET.fromstring(body)
    except ET.ParseError as exc:
        raise BadRequest(f"The request body is not well-formed XML: {exc}.") from None


def _find_description(body: bytes, names: Iterable[str]) -> ET.Element:
    root = _parse_xml(body)
    wanted = set(names)
    if _local(root.tag) in wanted:
        return root
    if _local(root.tag) != "entry":
        raise BadRequest(f"Expected an Atom entry, got <{_local(root.tag)}>.")
    for content in root:
        if _local(content.tag) == "content":
            for child in content:
                if _local(child.tag) in wanted:
                    return child
    raise BadRequest(f"The Atom entry has no {' or '.join(sorted(wanted))} in its content.")


def description_kind(body: bytes) -> tuple[str, ET.Element]:
    """Which description a PUT to /{name} carries ('queue' or 'topic')."""
    el = _find_description(body, ("QueueDescription", "TopicDescription"))
    return ("queue" if _local(el.tag) == "QueueDescription" else "topic"), el


def parse_description(el: ET.Element, api_version: str | None = None) -> dict[str, Any]:
    """A QueueDescription/TopicDescription/SubscriptionDescription -> spec (see backend).

    Read-only elements a client echoes back from a GET are ignored, and so are elements the table does
    not know (new service properties), as older services ignore unknown fields; a known property newer
    than ``api_version`` is refused, as Service Bus refuses it."""
    kind = _KINDS.get(_local(el.tag), "queue")
    props = by_atom(kind)
    spec: dict[str, Any] = {}
    newer: list[str] = []
    for child in el:
        name = _local(child.tag)
        prop = props.get(name)
        if prop is None:
            continue
        if not supported_at(prop, api_version):
            newer.append(name)
            continue
        text = (child.text or "").strip()
        if name == "DefaultRuleDescription":
            spec[name] = parse_rule_element(child, (_child_text(child, "Name") or "").strip() or "$Default")
        elif name == "AuthorizationRules":
            spec[name] = [_parse_authorization_rule(r) for r in child if _local(r.tag) == "AuthorizationRule"]
        elif prop.codec is Codec.RUNTIME:
            continue
        elif prop.codec is Codec.BOOL:
            if text.lower() not in ("true", "false"):
                raise BadRequest(f"The value '{text}' of {name} is not a boolean.")
            spec[name] = text.lower() == "true"
        elif prop.codec is Codec.INT:
            try:
                spec[name] = int(text)
            except ValueError:
                raise BadRequest(f"The value '{text}' of {name} is not an integer.") from None
        elif prop.codec is Codec.DURATION:
            spec[name] = _duration(name, text)
        else:
            spec[name] = child.text or ""
    if newer:
        raise BadRequest(
            f"The {_local(el.tag)} has unsupported properties for api-version '{api_version}': {', '.join(newer)}."
        )
    return spec


def _parse_authorization_rule(el: ET.Element) -> dict[str, Any]:
    rights_el = next((c for c in el if _local(c.tag) == "Rights"), None)
    rights = [(r.text or "").strip() for r in rights_el] if rights_el is not None else []
    out: dict[str, Any] = {"rights": rights}
    for key, tag in (("key_name", "KeyName"), ("primary_key", "PrimaryKey"), ("secondary_key", "SecondaryKey"),
                     ("claim_type", "ClaimType"), ("claim_value", "ClaimValue")):
        text = _child_text(el, tag)
        if text:
            out[key] = text.strip()
    return out


def _duration(name: str, text: str) -> float:
    try:
        return decode_duration(text)
    except NonPositiveDuration:
        raise BadRequest(f"The value '{text}' of {name} must be a positive duration.") from None
    except ValueError:
        raise BadRequest(
            f"The value '{text}' of {name} is not a valid duration (expected an ISO-8601 duration such as PT1M)."
        ) from None


def parse_rule(body: bytes, name: str) -> RuleConfig:
    return parse_rule_element(_find_description(body, ("RuleDescription",)), name)


def _xsi_type(el: ET.Element) -> str:
    for key, value in el.attrib.items():
        if _local(key) == "type":
            return value.rsplit(":", 1)[-1]
    return ""


def parse_rule_element(el: ET.Element, name: str) -> RuleConfig:
    """RuleDescription -> RuleConfig. TrueFilter/FalseFilter become SQL '1=1'/'1=0' as Service Bus stores them."""
    children = {_local(c.tag): c for c in el}
    filter_el = children.get("Filter")
    action_el = children.get("Action")
    action = None
    action_parameters = None
    if action_el is not None and _xsi_type(action_el) == "SqlRuleAction":
        expr = _child_text(action_el, "SqlExpression")
        action = expr or None
        action_parameters = _parameters(action_el) if action else None
    common: dict[str, Any] = {"action_expression": action, "action_parameters": action_parameters}
    if filter_el is None:
        return RuleConfig(name=name, filter_type="Sql", sql_expression="1=1", **common)
    ftype = _xsi_type(filter_el)
    if ftype == "TrueFilter":
        return RuleConfig(name=name, filter_type="Sql", sql_expression="1=1", **common)
    if ftype == "FalseFilter":
        return RuleConfig(name=name, filter_type="Sql", sql_expression="1=0", **common)
    if ftype == "SqlFilter":
        expr = _child_text(filter_el, "SqlExpression")
        if not expr or not expr.strip():
            raise BadRequest("A SqlFilter needs a SqlExpression.")
        return RuleConfig(name=name, filter_type="Sql", sql_expression=expr,
                          filter_parameters=_parameters(filter_el), **common)
    if ftype == "CorrelationFilter":
        corr: dict[str, Any] = {}
        for child in filter_el:
            local = _local(child.tag)
            if local in _CORRELATION_FIELDS and child.text is not None:
                corr[local] = child.text
            elif local == "Properties":
                corr["Properties"] = parse_key_values(child)
        if not corr:
            raise BadRequest("A CorrelationFilter needs at least one property.")
        return RuleConfig(name=name, filter_type="Correlation", correlation=corr, **common)
    raise BadRequest(f"Unknown filter type '{ftype or '(none)'}'.")


def _child_text(el: ET.Element, name: str) -> str | None:
    for child in el:
        if _local(child.tag) == name:
            return child.text or ""
    return None


def _parameters(el: ET.Element) -> dict[str, Any] | None:
    """A SqlFilter's or SqlRuleAction's ``Parameters`` (typed key-values), None when it has none."""
    for child in el:
        if _local(child.tag) == "Parameters" and len(child):
            return parse_key_values(child)
    return None


def parse_key_values(el: ET.Element) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in el:
        key = _child_text(kv, "Key")
        value_el = next((c for c in kv if _local(c.tag) == "Value"), None)
        if key is None or value_el is None:
            raise BadRequest("A correlation property needs a Key and a Value.")
        out[key] = _typed_value(value_el.text or "", _xsi_type(value_el) or "string")
    return out


def _typed_value(text: str, xsd_type: str) -> Any:
    try:
        if xsd_type in ("int", "long", "short", "byte", "unsignedInt", "unsignedLong", "unsignedShort"):
            return int(text)
        if xsd_type in ("double", "float", "decimal"):
            return float(text)
        if xsd_type == "boolean":
            return text.strip().lower() == "true"
        if xsd_type == "dateTime":
            return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if xsd_type == "duration":
            return datetime.timedelta(seconds=parse_duration(text))
    except ValueError:
        raise BadRequest(f"The value '{text}' is not a valid {xsd_type}.") from None
    return text


# ---------------------------------------------------------------------------------------- rendering
def _entry(base: str, rel_path: str, title: str, content: str, published: float, updated: float,
           author: str, api_version: str | None = None) -> str:
    href = f"{base}/{rel_path}?api-version={api_version or '2021-05'}"
    return (
        f'<entry xmlns="{ATOM_NS}"><id>{escape(href)}</id><title type="text">{escape(title)}</title>'
        f"<published>{format_time(published)}</published><updated>{format_time(updated)}</updated>"
        f"<author><name>{escape(author)}</name></author><link rel=\"self\" href={quoteattr(href)}/>"
        f'<content type="application/xml">{content}</content></entry>'
    )


def _counts(info: EntityInfo) -> str:
    c = info.counts
    return (
        f'<CountDetails xmlns:d2p1="{COUNT_NS}">'
        f"<d2p1:ActiveMessageCount>{c['active']}</d2p1:ActiveMessageCount>"
        f"<d2p1:DeadLetterMessageCount>{c['dead_letter']}</d2p1:DeadLetterMessageCount>"
        f"<d2p1:ScheduledMessageCount>{c['scheduled']}</d2p1:ScheduledMessageCount>"
        f"<d2p1:TransferMessageCount>0</d2p1:TransferMessageCount>"
        f"<d2p1:TransferDeadLetterMessageCount>{c['transfer_dead_letter']}</d2p1:TransferDeadLetterMessageCount>"
        "</CountDetails>"
    )


def _forward(host: str, target: str | None, given: str | None = None) -> str | None:
    """A forwarding target as Service Bus writes it: the URL the client gave while it still names the
    target (backend.GIVEN_SUFFIX), else sb://<host>/<target>."""
    if not target:
        return None
    if given is not None and (entity_name_from_forward(given) or "").lower() == target.lower():
        return given
    return f"sb://{host}/{target}"


def _authorization_rules(rules: tuple[AuthorizationRuleConfig, ...]) -> str:
    """An entity's rules as Service Bus writes them: without CreatedTime and ModifiedTime (an update
    response and a later GET equal the rules as sent: azservicebus admin_client_test.go,
    TestAdminClient_UpdateQueue, TestAdminClient_UpdateTopic, TestAdminClient_QueueWithMaxValues)."""
    if not rules:
        return "<AuthorizationRules/>"
    out = []
    for r in rules:
        rights = "".join(f"<AccessRights>{escape(x)}</AccessRights>" for x in r.rights)
        out.append(
            f'<AuthorizationRule i:type="SharedAccessAuthorizationRule"><ClaimType>{escape(r.claim_type)}</ClaimType>'
            f"<ClaimValue>{escape(r.claim_value)}</ClaimValue><Rights>{rights}</Rights>"
            f"<KeyName>{escape(r.key_name)}</KeyName><PrimaryKey>{escape(r.primary_key)}</PrimaryKey>"
            f"<SecondaryKey>{escape(r.secondary_key)}</SecondaryKey></AuthorizationRule>"
        )
    return f"<AuthorizationRules>{''.join(out)}</AuthorizationRules>"


def _runtime_element(prop: Property, info: EntityInfo) -> str:
    name = prop.atom
    if name == "SizeInBytes":
        return _el(name, info.size_in_bytes)
    if name == "MessageCount":
        return _el(name, sum(info.counts[k] for k in
                             ("active", "deferred", "scheduled", "dead_letter", "transfer_dead_letter")))
    if name == "AuthorizationRules":
        return _authorization_rules(info.config.authorization_rules)
    if name in ("CreatedAt", "UpdatedAt", "AccessedAt"):
        return _el(name, format_time({"CreatedAt": info.created_at, "UpdatedAt": info.updated_at,
                                      "AccessedAt": info.accessed_at}[name]))
    if name == "CountDetails":
        return _counts(info)
    if name == "SubscriptionCount":
        return _el(name, info.subscription_count)
    if name == "EntityAvailabilityStatus":
        return _el(name, "Available")
    if name in ("SqlFilterCount", "CorrelationFilterCount"):
        return _el(name, info.extras.get(name, 0))
    return ""


def render_description(info: EntityInfo, host: str, api_version: str | None = None) -> str:
    """The description's elements in Service Bus's order, those of ``api_version`` only."""
    cfg, x = info.config, info.extras
    parts = []
    for prop in for_kind(info.kind):
        if not prop.rendered or not supported_at(prop, api_version):
            continue
        if prop.codec is Codec.RUNTIME:
            parts.append(_runtime_element(prop, info))
            continue
        value = getattr(cfg, prop.field) if prop.field else x[prop.atom]
        if prop.atom == "MaxSizeInMegabytes":
            value = reported_max_size(value, bool(x.get("EnablePartitioning")))
        if prop.codec is Codec.DURATION:
            value = format_duration(value)
        elif prop.codec is Codec.ENTITY:
            value = _forward(host, value, x.get(prop.atom + GIVEN_SUFFIX))
        parts.append(_el(prop.atom, value))
    tag = _DESCRIPTIONS[info.kind]
    return f'<{tag} xmlns="{SB_NS}" xmlns:i="{XSI_NS}">{"".join(parts)}</{tag}>'


def _entity_rel(info: EntityInfo) -> str:
    return info.name if info.kind != "subscription" else f"{info.topic}/Subscriptions/{info.name}"


def render_entity(info: EntityInfo, base: str, host: str, namespace: str, api_version: str | None = None) -> bytes:
    return _doc(entity_entry(info, base, host, namespace, api_version))


def _doc(text: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8"?>' + text).encode("utf-8")


def render_feed(title: str, self_path: str, entries: list[str], base: str, now: float,
                next_path: str | None = None) -> bytes:
    links = f'<link rel="self" href={quoteattr(base + self_path)}/>'
    if next_path is not None:
        links += f'<link rel="next" href={quoteattr(base + next_path)}/>'
    return _doc(
        f'<feed xmlns="{ATOM_NS}"><title type="text">{escape(title)}</title>'
        f"<id>{escape(base + self_path)}</id><updated>{format_time(now)}</updated>{links}"
        + "".join(entries) + "</feed>"
    )


def entity_entry(info: EntityInfo, base: str, host: str, namespace: str, api_version: str | None = None) -> str:
    return _entry(base, _entity_rel(info), info.name, render_description(info, host, api_version), info.created_at,
                  info.updated_at, namespace, api_version)


# --- rules
def _key_values(values: dict[str, Any]) -> str:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            xsd, text = "boolean", _bool(value)
        elif isinstance(value, int):
            xsd, text = ("int" if -(2**31) <= value < 2**31 else "long"), str(value)
        elif isinstance(value, float):
            xsd, text = "double", repr(value)
        elif isinstance(value, datetime.datetime):
            xsd, text = "dateTime", value.isoformat()
        elif isinstance(value, datetime.timedelta):
            xsd, text = "duration", format_duration(value.total_seconds())
        else:
            xsd, text = "string", str(value)
        out.append(
            f"<KeyValueOfstringanyType><Key>{escape(str(key))}</Key>"
            f'<Value xmlns:d6p1="{XSD_NS}" i:type="d6p1:{xsd}">{escape(text)}</Value></KeyValueOfstringanyType>'
        )
    return "".join(out)


def _parameters_xml(parameters: dict[str, Any] | None) -> str:
    return f"<Parameters>{_key_values(parameters)}</Parameters>" if parameters else ""


def render_rule_description(rule: RuleConfig, created_at: float, tag: str = "RuleDescription",
                            declare: bool = True) -> str:
    if rule.filter_type == "Correlation":
        corr = dict(rule.correlation or {})
        props = corr.pop("Properties", None) or {}
        fields = "".join(_el(k, corr[k]) for k in _CORRELATION_FIELDS if corr.get(k) is not None)
        filter_xml = (f'<Filter i:type="CorrelationFilter">{fields}<Properties>{_key_values(props)}</Properties>'
                      "</Filter>")
    else:
        expr = rule.sql_expression or "1=1"
        norm = " ".join(expr.upper().split()).replace(" ", "")
        ftype = "TrueFilter" if norm == "1=1" else "FalseFilter" if norm == "1=0" else "SqlFilter"
        filter_xml = (f'<Filter i:type="{ftype}"><SqlExpression>{escape(expr)}</SqlExpression>'
                      f"{_parameters_xml(rule.filter_parameters)}"
                      "<CompatibilityLevel>20</CompatibilityLevel></Filter>")
    if rule.action_expression:
        action_xml = (f'<Action i:type="SqlRuleAction"><SqlExpression>{escape(rule.action_expression)}'
                      f"</SqlExpression>{_parameters_xml(rule.action_parameters)}"
                      "<CompatibilityLevel>20</CompatibilityLevel></Action>")
    else:
        action_xml = '<Action i:type="EmptyRuleAction"/>'
    ns = f' xmlns="{SB_NS}" xmlns:i="{XSI_NS}"' if declare else ""
    return (f"<{tag}{ns}>{filter_xml}{action_xml}<CreatedAt>{format_time(created_at)}</CreatedAt>"
            f"<Name>{escape(rule.name)}</Name></{tag}>")


def rule_entry(info: RuleInfo, base: str, namespace: str) -> str:
    rel = f"{info.topic}/Subscriptions/{info.subscription}/Rules/{info.rule.name}"
    return _entry(base, rel, info.rule.name, render_rule_description(info.rule, info.created_at),
                  info.created_at, info.created_at, namespace)


def render_rule(info: RuleInfo, base: str, namespace: str) -> bytes:
    return _doc(rule_entry(info, base, namespace))


# --- namespace and errors
def render_namespace(name: str, base: str, created: float, modified: float) -> bytes:
    content = (
        f'<NamespaceInfo xmlns="{SB_NS}" xmlns:i="{XSI_NS}"><CreatedTime>{format_time(created)}</CreatedTime>'
        f"<MessagingSKU>Standard</MessagingSKU><ModifiedTime>{format_time(modified)}</ModifiedTime>"
        f"<Name>{escape(name)}</Name><NamespaceType>Messaging</NamespaceType></NamespaceInfo>"
    )
    return _doc(_entry(base, "$namespaceinfo", name, content, created, modified, name))


def render_error(status: int, detail: str) -> bytes:
    return _doc(f"<Error><Code>{status}</Code><Detail>{escape(detail)}</Detail></Error>")
