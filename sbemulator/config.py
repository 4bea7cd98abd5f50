"""Topology configuration in the official Service Bus emulator's ``Config.json`` schema.

The same JSON file feeds Bicep, the provisioning script, the official emulator and ``sbemulator``,
so this loader accepts that schema exactly (``UserConfig.Namespaces``, each with ``Queues`` and
``Topics``; several namespaces run side by side, docs/emulator.md "Several namespaces") plus two
extensions: ``MaxMessageSizeInKilobytes`` on queues/topics and namespace-level ``SasKeys``.
Anything it does not understand is an error rather than silently ignored: a typo in a property name
would otherwise only show up as "wrong behaviour" at run time. Every error names the
file, the JSON path and the problem.

Which properties each entity takes, their types, defaults and bounds come from the one table of
entity properties (:mod:`sbemulator.descriptions`), as do the entity-name rules. Defaults follow the
official emulator's ``Config-schema.json`` (TTL 1 hour, lock 1 minute, max delivery count 3,
duplicate-detection window 20 seconds), not Service Bus's management-API defaults; its upper limits on
TTL and MaxDeliveryCount are not enforced because the same file also provisions real namespaces.

Durations are seconds (``float``) in the dataclasses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sbemulator.auth import parse_rights
from sbemulator.descriptions import (
    CORRELATION_PROPERTIES,
    QUEUE,
    STATUS_ACTIVE,
    SUBSCRIPTION,
    TOPIC,
    AuthorizationRuleConfig,
    Codec,
    Property,
    by_atom,
    entity_name_problem,
    for_kind,
    parse_duration,
)
from sbemulator.filters import FilterError, compile_rule

__all__ = [
    "DEFAULT_DUPLICATE_DETECTION_WINDOW",
    "DEFAULT_LOCK_DURATION",
    "DEFAULT_MAX_DELIVERY_COUNT",
    "DEFAULT_MAX_MESSAGE_SIZE_KB",
    "DEFAULT_MAX_SIZE_MB",
    "DEFAULT_MESSAGE_TTL",
    "MAX_LOCK_DURATION",
    "AuthorizationRuleConfig",
    "ConfigError",
    "NamespaceConfig",
    "QueueConfig",
    "RuleConfig",
    "SasKeyConfig",
    "SubscriptionConfig",
    "TopicConfig",
    "load_config",
    "load_namespaces",
    "parse_config",
    "parse_duration",
    "parse_namespaces",
]

# Config.json defaults (the official emulator's), from the table.
DEFAULT_MESSAGE_TTL: float = by_atom(QUEUE)["DefaultMessageTimeToLive"].config_default
DEFAULT_LOCK_DURATION: float = by_atom(QUEUE)["LockDuration"].config_default
DEFAULT_MAX_DELIVERY_COUNT: int = by_atom(QUEUE)["MaxDeliveryCount"].config_default
DEFAULT_DUPLICATE_DETECTION_WINDOW: float = by_atom(QUEUE)["DuplicateDetectionHistoryTimeWindow"].config_default
DEFAULT_MAX_MESSAGE_SIZE_KB: int = by_atom(QUEUE)["MaxMessageSizeInKilobytes"].config_default
DEFAULT_MAX_SIZE_MB: int = by_atom(QUEUE)["MaxSizeInMegabytes"].config_default
MAX_LOCK_DURATION: float = by_atom(QUEUE)["LockDuration"].maximum or 300.0  # the table gives PT5M


_T = TypeVar("_T")


class ConfigError(ValueError):
    """The configuration file is invalid; the message says where and why (every problem found, one a
    line, in ``problems``)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


@dataclass(frozen=True)
class RuleConfig:
    name: str
    filter_type: str  # "Sql" or "Correlation"
    sql_expression: str | None = None
    # Correlation filter as written in the file: keys ContentType, CorrelationId, Label, MessageId,
    # ReplyTo, ReplyToSessionId, SessionId, To and Properties (a dict of application properties).
    correlation: dict[str, Any] | None = None
    action_expression: str | None = None
    # Values for the ``@name`` parameters of the SQL filter and of the SQL action (SqlRuleFilter /
    # SqlRuleAction ``parameters``), keyed by name with its ``@``.
    filter_parameters: dict[str, Any] | None = None
    action_parameters: dict[str, Any] | None = None


@dataclass(frozen=True)
class SubscriptionConfig:
    name: str
    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    default_message_ttl: float = DEFAULT_MESSAGE_TTL
    dead_lettering_on_message_expiration: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    requires_session: bool = False
    rules: tuple[RuleConfig, ...] = ()
    # "Suspend and reactivate messaging entities": Active, Disabled, SendDisabled or ReceiveDisabled
    # (set through the management APIs; the config file has no such property).
    status: str = STATUS_ACTIVE
    # AutoDeleteOnIdle in seconds; None (TimeSpan.MaxValue, the default): never (management APIs only).
    auto_delete_on_idle: float | None = None


@dataclass(frozen=True)
class QueueConfig:
    name: str
    lock_duration: float = DEFAULT_LOCK_DURATION
    max_delivery_count: int = DEFAULT_MAX_DELIVERY_COUNT
    default_message_ttl: float = DEFAULT_MESSAGE_TTL
    dead_lettering_on_message_expiration: bool = False
    duplicate_detection_window: float = DEFAULT_DUPLICATE_DETECTION_WINDOW
    requires_duplicate_detection: bool = False
    forward_to: str | None = None
    forward_dead_lettered_messages_to: str | None = None
    requires_session: bool = False
    max_message_size_kb: int = DEFAULT_MAX_MESSAGE_SIZE_KB
    max_size_in_megabytes: int = DEFAULT_MAX_SIZE_MB  # "Service Bus quotas", queue or topic size
    # "Suspend and reactivate messaging entities": Active, Disabled, SendDisabled or ReceiveDisabled
    # (set through the management APIs; the config file has no such property).
    status: str = STATUS_ACTIVE
    # Entity-level shared access rules (management APIs only, like status).
    authorization_rules: tuple[AuthorizationRuleConfig, ...] = ()
    # AutoDeleteOnIdle in seconds; None (TimeSpan.MaxValue, the default): never (management APIs only).
    auto_delete_on_idle: float | None = None


@dataclass(frozen=True)
class TopicConfig:
    name: str
    default_message_ttl: float = DEFAULT_MESSAGE_TTL
    duplicate_detection_window: float = DEFAULT_DUPLICATE_DETECTION_WINDOW
    requires_duplicate_detection: bool = False
    max_message_size_kb: int = DEFAULT_MAX_MESSAGE_SIZE_KB
    max_size_in_megabytes: int = DEFAULT_MAX_SIZE_MB  # "Service Bus quotas", queue or topic size
    subscriptions: tuple[SubscriptionConfig, ...] = ()
    # "Suspend and reactivate messaging entities": Active, Disabled, SendDisabled or ReceiveDisabled
    # (set through the management APIs; the config file has no such property).
    status: str = STATUS_ACTIVE
    # Entity-level shared access rules (management APIs only, like status).
    authorization_rules: tuple[AuthorizationRuleConfig, ...] = ()
    # AutoDeleteOnIdle in seconds; None (TimeSpan.MaxValue, the default): never (management APIs only).
    auto_delete_on_idle: float | None = None


@dataclass(frozen=True)
class SasKeyConfig:
    """A namespace-level shared access rule. ``Rights`` (Listen, Send, Manage) is our extension of
    ``SasKeys``, itself an extension: the official emulator knows only RootManageSharedAccessKey,
    which has every right, so a key without ``Rights`` has every right too (Manage implies Listen
    and Send)."""

    key_name: str
    key: str
    rights: tuple[str, ...] = ("Listen", "Manage", "Send")


@dataclass(frozen=True)
class NamespaceConfig:
    name: str = "sbemulatorns"
    queues: tuple[QueueConfig, ...] = ()
    topics: tuple[TopicConfig, ...] = ()
    sas_keys: tuple[SasKeyConfig, ...] = ()
    logging: dict[str, Any] = field(default_factory=dict)


class _Parser:
    """Validates a whole file: a problem in one property, rule, subscription or entity is recorded and the
    parser goes on with the next, so a file with several mistakes reports all of them at once."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[ConfigError] = []

    def collect(self, parse: Callable[[], _T]) -> _T | None:
        """``parse()``, or None after recording its problem."""
        try:
            return parse()
        except ConfigError as exc:
            self.problems.append(exc)
            return None

    def raise_problems(self) -> None:
        if len(self.problems) == 1:
            raise self.problems[0]
        if self.problems:
            lines = [str(p) for p in self.problems]
            raise ConfigError(f"{len(lines)} problems:\n" + "\n".join(f"  {line}" for line in lines), lines)

    def fail(self, path: str, what: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path}: {what}")

    # typed getters --------------------------------------------------------------------------
    def obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {_json_type(value)}")
        return value

    def arr(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"expected an array, got {_json_type(value)}")
        return value

    def string(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_json_type(value)}")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {_json_type(value)}")
        return value

    def integer(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_json_type(value)}")
        return value

    def duration(self, value: Any, path: str) -> float:
        text = self.string(value, path)
        try:
            seconds = parse_duration(text)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None
        if seconds <= 0:
            raise self.fail(path, f"duration {text!r} must be positive")
        return seconds

    def optional_name(self, value: Any, path: str) -> str | None:
        text = self.string(value, path).strip()
        if not text:
            return None
        if entity_name_problem(text, child=False) is not None:
            raise self.fail(path, f"invalid entity name {text!r}")
        return text

    def check_keys(self, data: Mapping[str, Any], allowed: set[str], path: str) -> None:
        """Record every unknown key and go on with the known ones (the file is refused in the end)."""
        for key in data:
            if key not in allowed:
                self.problems.append(self.fail(
                    f"{path}.{key}", f"unknown property {key!r} (allowed: {', '.join(sorted(allowed))})"
                ))

    def entity_name(self, data: Mapping[str, Any], path: str, *, child: bool) -> str:
        """An entity's or rule's name. A name that breaks the naming rules is recorded and parsing goes
        on with it, so that the entity's other mistakes are reported in the same run; only a missing
        name, or one that is not a string, stops the entity here."""
        name = data.get("Name")
        if not isinstance(name, str):
            return self.name(data, path, child=child)  # raises: nothing to go on with
        self.collect(partial(self.name, data, path, child=child))
        return name

    def name(self, data: Mapping[str, Any], path: str, *, child: bool) -> str:
        if "Name" not in data:
            raise self.fail(path, "missing required property 'Name'")
        name = self.string(data["Name"], f"{path}.Name")
        problem = entity_name_problem(name, child=child)
        if problem is not None:
            raise self.fail(f"{path}.Name", f"invalid name {name!r}: {problem}")
        return name

    # entity properties, as the table describes them ----------------------------------------
    def value(self, prop: Property, value: Any, path: str) -> Any:
        """One property's value from the file: its codec, then the bounds the file is held to (all of
        them for ``file_bounds`` properties, otherwise only the minimum of integers)."""
        if prop.codec is Codec.DURATION:
            out: Any = self.duration(value, path)
        elif prop.codec is Codec.BOOL:
            out = self.boolean(value, path)
        elif prop.codec is Codec.INT:
            out = self.integer(value, path)
        elif prop.codec is Codec.ENTITY:
            return self.optional_name(value, path)
        else:  # pragma: no cover - the table marks only the kinds above as in_config_file
            raise self.fail(path, f"{prop.atom} cannot be set in the config file")
        if prop.minimum is not None and (prop.file_bounds or prop.codec is Codec.INT) and out < prop.minimum:
            raise self.fail(path, f"{prop.atom} must be at least {prop.minimum:g}, got {value!r}")
        if prop.maximum is not None and prop.file_bounds and out > prop.maximum:
            raise self.fail(path, f"{prop.atom} {value!r} exceeds the maximum: {prop.bound_doc}")
        if prop.file_maximum is not None and out > prop.file_maximum:
            raise self.fail(path, f"{prop.atom} {value!r} exceeds the maximum: {prop.file_bound_doc}")
        return out

    def handlers(self, kind: str) -> dict[str, tuple[str, Any]]:
        return {
            p.atom: (p.field, lambda v, path, p=p: self.value(p, v, path))
            for p in for_kind(kind)
            if p.in_config_file and p.field
        }

    # entities -------------------------------------------------------------------------------
    def queue(self, data: Any, path: str) -> QueueConfig:
        data = self.obj(data, path)
        self.check_keys(data, {"Name", "Properties"}, path)
        name = self.entity_name(data, path, child=False)
        props = self.obj(data.get("Properties", {}), f"{path}.Properties")
        pp = f"{path}.Properties"
        handlers = self.handlers(QUEUE)
        return QueueConfig(name=name, **self.props(props, handlers, pp))

    def topic(self, data: Any, path: str) -> TopicConfig:
        data = self.obj(data, path)
        self.check_keys(data, {"Name", "Properties", "Subscriptions"}, path)
        name = self.entity_name(data, path, child=False)
        pp = f"{path}.Properties"
        props = self.obj(data.get("Properties", {}), pp)
        handlers = self.handlers(TOPIC)
        kwargs = self.props(props, handlers, pp)
        subs_raw = self.arr(data.get("Subscriptions", []), f"{path}.Subscriptions")
        subs: list[SubscriptionConfig] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(subs_raw):
            sp = f"{path}.Subscriptions[{i}]"
            sub = self.collect(partial(self.subscription, raw, sp))
            if sub is None:
                continue
            key = sub.name.lower()
            if key in seen:
                raise self.fail(
                    f"{sp}.Name",
                    f"duplicate subscription name {sub.name!r} "
                    f"(also at Subscriptions[{seen[key]}]; names are case-insensitive)",
                )
            seen[key] = i
            subs.append(sub)
        return TopicConfig(name=name, subscriptions=tuple(subs), **kwargs)

    def subscription(self, data: Any, path: str) -> SubscriptionConfig:
        data = self.obj(data, path)
        self.check_keys(data, {"Name", "Properties", "Rules"}, path)
        name = self.entity_name(data, path, child=True)
        pp = f"{path}.Properties"
        props = self.obj(data.get("Properties", {}), pp)
        handlers = self.handlers(SUBSCRIPTION)
        kwargs = self.props(props, handlers, pp)
        rules_raw = self.arr(data.get("Rules", []), f"{path}.Rules")
        rules: list[RuleConfig] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(rules_raw):
            rp = f"{path}.Rules[{i}]"
            rule = self.collect(partial(self.rule, raw, rp))
            if rule is None:
                continue
            key = rule.name.lower()
            if key in seen:
                raise self.fail(
                    f"{rp}.Name", f"duplicate rule name {rule.name!r} (also at Rules[{seen[key]}])"
                )
            seen[key] = i
            rules.append(rule)
        return SubscriptionConfig(name=name, rules=tuple(rules), **kwargs)

    def rule(self, data: Any, path: str) -> RuleConfig:
        data = self.obj(data, path)
        self.check_keys(data, {"Name", "Properties"}, path)
        name = "$Default" if data.get("Name") == "$Default" else self.entity_name(data, path, child=True)
        pp = f"{path}.Properties"
        if "Properties" not in data:
            raise self.fail(path, "missing required property 'Properties' (the rule's filter)")
        props = self.obj(data["Properties"], pp)
        self.check_keys(props, {"FilterType", "SqlFilter", "CorrelationFilter", "Action"}, pp)
        if "FilterType" not in props:
            raise self.fail(pp, "missing required property 'FilterType' ('Sql' or 'Correlation')")
        ftype = self.string(props["FilterType"], f"{pp}.FilterType")
        sql: str | None = None
        corr: dict[str, Any] | None = None
        action: str | None = None
        if ftype == "Sql":
            if "SqlFilter" not in props:
                raise self.fail(pp, "FilterType 'Sql' needs a 'SqlFilter' with a 'SqlExpression'")
            sf = self.obj(props["SqlFilter"], f"{pp}.SqlFilter")
            self.check_keys(sf, {"SqlExpression"}, f"{pp}.SqlFilter")
            if "SqlExpression" not in sf:
                raise self.fail(f"{pp}.SqlFilter", "missing required property 'SqlExpression'")
            sql = self.string(sf["SqlExpression"], f"{pp}.SqlFilter.SqlExpression")
            if not sql.strip():
                raise self.fail(f"{pp}.SqlFilter.SqlExpression", "the SQL filter expression is empty")
            if "CorrelationFilter" in props:
                raise self.fail(f"{pp}.CorrelationFilter", "not allowed with FilterType 'Sql'")
        elif ftype == "Correlation":
            if "CorrelationFilter" not in props:
                raise self.fail(pp, "FilterType 'Correlation' needs a 'CorrelationFilter'")
            cp = f"{pp}.CorrelationFilter"
            cf = self.obj(props["CorrelationFilter"], cp)
            system = {p.name for p in CORRELATION_PROPERTIES}
            self.check_keys(cf, system | {"Properties"}, cp)
            if not cf:
                raise self.fail(cp, "a correlation filter needs at least one property")
            corr = {}
            for key, value in cf.items():
                if key == "Properties":
                    user = self.obj(value, f"{cp}.Properties")
                    for uk, uv in user.items():
                        if not isinstance(uv, str | int | float | bool) or uv is None:
                            raise self.fail(
                                f"{cp}.Properties.{uk}",
                                f"expected a string, number or boolean, got {_json_type(uv)}",
                            )
                    corr["Properties"] = dict(user)
                elif key in system:  # an unknown one is recorded by check_keys above
                    corr[key] = self.string(value, f"{cp}.{key}")
            if "SqlFilter" in props:
                raise self.fail(f"{pp}.SqlFilter", "not allowed with FilterType 'Correlation'")
        else:
            raise self.fail(f"{pp}.FilterType", f"expected 'Sql' or 'Correlation', got {ftype!r}")
        if "Action" in props:
            ap = f"{pp}.Action"
            act = self.obj(props["Action"], ap)
            self.check_keys(act, {"SqlExpression"}, ap)
            if "SqlExpression" in act:
                action = self.string(act["SqlExpression"], f"{ap}.SqlExpression").strip() or None
        rule = RuleConfig(
            name=name, filter_type=ftype, sql_expression=sql, correlation=corr, action_expression=action
        )
        self.check_rule_compiles(rule, pp)
        return rule

    def check_rule_compiles(self, rule: RuleConfig, path: str) -> None:
        """Report SQL syntax errors here, with the JSON path, rather than when the broker starts."""
        try:
            compile_rule(
                rule.name, rule.filter_type, rule.sql_expression, rule.correlation, rule.action_expression
            )
        except FilterError as exc:
            where = (
                "Action.SqlExpression"
                if rule.action_expression and "action" in str(exc).lower()
                else ("SqlFilter.SqlExpression" if rule.filter_type == "Sql" else "CorrelationFilter")
            )
            raise self.fail(f"{path}.{where}", f"invalid rule: {exc}") from None

    def props(
        self, props: Mapping[str, Any], handlers: dict[str, tuple[str, Any]], path: str
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in props.items():
            if key not in handlers:
                self.problems.append(self.fail(
                    f"{path}.{key}", f"unknown property {key!r} (allowed: {', '.join(sorted(handlers))})"
                ))
                continue
            attr, conv = handlers[key]
            converted = self.collect(partial(conv, value, f"{path}.{key}"))
            if converted is not None:
                out[attr] = converted
        return out

    # namespace -----------------------------------------------------------------------------
    def namespaces(self, data: Any) -> tuple[NamespaceConfig, ...]:
        root = self.obj(data, "$")
        self.check_keys(root, {"UserConfig"}, "$")
        if "UserConfig" not in root:
            raise self.fail("$", "missing required property 'UserConfig'")
        uc = self.obj(root["UserConfig"], "UserConfig")
        self.check_keys(uc, {"Namespaces", "Logging"}, "UserConfig")
        logging = dict(self.obj(uc.get("Logging", {}), "UserConfig.Logging"))
        if "Namespaces" not in uc:
            raise self.fail("UserConfig", "missing required property 'Namespaces'")
        nss = self.arr(uc["Namespaces"], "UserConfig.Namespaces")
        if not nss:
            raise self.fail("UserConfig.Namespaces", "expected at least one namespace, got none")
        out: list[NamespaceConfig] = []
        seen: dict[str, int] = {}
        for i, raw in enumerate(nss):
            np_ = f"UserConfig.Namespaces[{i}]"
            before = len(self.problems)
            ns = self.collect(partial(self.one_namespace, raw, np_, logging))
            if ns is None or len(self.problems) > before:
                continue
            key = ns.name.lower()
            if key in seen:
                self.problems.append(self.fail(
                    f"{np_}.Name", f"duplicate namespace name {ns.name!r} (also at Namespaces[{seen[key]}]; "
                    "names are case-insensitive)"))
                continue
            seen[key] = i
            out.append(ns)
        self.raise_problems()
        return tuple(out)

    def one_namespace(self, raw: Any, np_: str, logging: dict[str, Any]) -> NamespaceConfig:
        """One entry of ``Namespaces``: its entities are checked against each other only (forwarding
        stays inside a namespace, as on Service Bus), and its problems are reported with the others."""
        ns = self.obj(raw, np_)
        self.check_keys(ns, {"Name", "Queues", "Topics", "SasKeys"}, np_)
        name = self.name(ns, np_, child=False)
        names: dict[str, str] = {}

        def claim(entity_name: str, where: str) -> bool:
            key = entity_name.lower()
            if key in names:
                raise self.fail(
                    f"{where}.Name",
                    f"duplicate entity name {entity_name!r} (also at {names[key]}; "
                    "queue and topic names share one case-insensitive namespace)",
                )
            names[key] = where
            return True

        queues = []
        for i, raw in enumerate(self.collect(lambda: self.arr(ns.get("Queues", []), f"{np_}.Queues")) or []):
            qp = f"{np_}.Queues[{i}]"
            q = self.collect(partial(self.queue, raw, qp))
            if q is not None and self.collect(partial(claim, q.name, qp)):
                queues.append(q)
        topics = []
        for i, raw in enumerate(self.collect(lambda: self.arr(ns.get("Topics", []), f"{np_}.Topics")) or []):
            tp = f"{np_}.Topics[{i}]"
            t = self.collect(partial(self.topic, raw, tp))
            if t is not None and self.collect(partial(claim, t.name, tp)):
                topics.append(t)
        keys = []
        for i, raw in enumerate(self.collect(lambda: self.arr(ns.get("SasKeys", []), f"{np_}.SasKeys")) or []):
            key_config = self.collect(partial(self.sas_key, raw, f"{np_}.SasKeys[{i}]"))
            if key_config is not None:
                keys.append(key_config)
        # Forwarding targets must exist and must not point at the entity itself.
        for i, q in enumerate(queues):
            qp = f"{np_}.Queues[{i}].Properties"
            self.collect(partial(self._check_forward, q.forward_to, q.name, names, f"{qp}.ForwardTo"))
            self.collect(partial(self._check_forward_source, q, f"{qp}.ForwardTo"))
            self.collect(partial(self._check_forward, q.forward_dead_lettered_messages_to, None, names,
                                 f"{qp}.ForwardDeadLetteredMessagesTo"))
        for i, t in enumerate(topics):
            for j, s in enumerate(t.subscriptions):
                sp = f"{np_}.Topics[{i}].Subscriptions[{j}].Properties"
                self.collect(partial(self._check_forward, s.forward_to, None, names, f"{sp}.ForwardTo"))
                self.collect(partial(self._check_forward_source, s, f"{sp}.ForwardTo"))
                self.collect(partial(self._check_forward, s.forward_dead_lettered_messages_to, None, names,
                                     f"{sp}.ForwardDeadLetteredMessagesTo"))
        return NamespaceConfig(
            name=name, queues=tuple(queues), topics=tuple(topics), sas_keys=tuple(keys), logging=logging
        )

    def sas_key(self, raw: Any, kp: str) -> SasKeyConfig:
        k = self.obj(raw, kp)
        self.check_keys(k, {"KeyName", "Key", "Rights"}, kp)
        for req in ("KeyName", "Key"):
            if req not in k:
                raise self.fail(kp, f"missing required property {req!r}")
        key_name = self.string(k["KeyName"], f"{kp}.KeyName")
        key = self.string(k["Key"], f"{kp}.Key")
        if not key_name or not key:
            raise self.fail(kp, "KeyName and Key must not be empty")
        rights: tuple[str, ...] = SasKeyConfig.rights
        if "Rights" in k:
            names = self.arr(k["Rights"], f"{kp}.Rights")
            try:
                rights = tuple(sorted(parse_rights(self.string(r, f"{kp}.Rights") for r in names)))
            except ValueError as exc:
                raise self.fail(f"{kp}.Rights", str(exc)) from None
            if not rights:
                raise self.fail(f"{kp}.Rights", "a key needs at least one right (Listen, Send or Manage)")
        return SasKeyConfig(key_name=key_name, key=key, rights=rights)

    def _check_forward_source(self, entity: QueueConfig | SubscriptionConfig, path: str) -> None:
        problem = forward_source_problem(entity)
        if problem is not None:
            raise self.fail(path, problem)

    def _check_forward(self, target: str | None, own: str | None, names: dict[str, str], path: str) -> None:
        if target is None:
            return
        if target.lower() not in names:
            raise self.fail(path, f"forwarding target {target!r} is not a queue or topic of this namespace")
        if own is not None and target.lower() == own.lower():
            raise self.fail(path, "an entity cannot forward to itself")


def forward_source_problem(entity: QueueConfig | SubscriptionConfig) -> str | None:
    """Why ``entity`` cannot auto-forward, or None. "Chaining Service Bus entities with autoforwarding":
    autoforwarding isn't supported for session-enabled queues or subscriptions (Service Bus answers 400)."""
    if entity.forward_to and entity.requires_session:
        return "auto-forwarding (ForwardTo) is not supported on a session-enabled queue or subscription"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def parse_namespaces(data: Any, source: str = "<config>") -> tuple[NamespaceConfig, ...]:
    """Validate already-decoded JSON: every namespace of ``UserConfig.Namespaces``, in file order (names
    distinct, case-insensitively); ``source`` names the origin in error messages."""
    return _Parser(source).namespaces(data)


def parse_config(data: Any, source: str = "<config>") -> NamespaceConfig:
    """The first namespace of already-decoded JSON (the whole file is validated); what a
    one-namespace tool needs. :func:`parse_namespaces` gives them all."""
    return parse_namespaces(data, source)[0]


def load_namespaces(path: str | Path) -> tuple[NamespaceConfig, ...]:
    """Read and validate a Config.json file: every namespace it describes, in file order."""
    return parse_namespaces(_read_json(path), str(path))


def load_config(path: str | Path) -> NamespaceConfig:
    """Read and validate a Config.json file; its first namespace (:func:`load_namespaces` for all)."""
    return load_namespaces(path)[0]


def _read_json(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return data
