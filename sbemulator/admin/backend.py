"""The namespace as the management APIs see it: entities with descriptions, counts and times.

Both wire formats (Atom XML for the Service Bus SDKs, JSON for Azure Resource Manager) parse into the
same *spec*: a dict keyed by the Service Bus property names of the Atom schema (``LockDuration``,
``MaxDeliveryCount``...), durations in seconds. This module turns specs into the broker's config
dataclasses, calls the broker, and answers with :class:`EntityInfo` / :class:`RuleInfo` for the
renderers. It runs on the emulator's event loop (the broker is single-threaded).

Properties the broker has no behaviour for (``AutoDeleteOnIdle``, ``Status``, ``UserMetadata``,
``EnableBatchedOperations``, ``MaxSizeInMegabytes``, partitioning...) are validated, kept in memory
and echoed, so that round trips (get, change, update) behave; they are not enforced and, unlike the
entities themselves, not kept across restarts.

Updates of an existing entity change the broker's entity in place (messages, locks and receivers stay).
The broker has no update operation of its own, so :func:`_apply_update` sets the same fields the
broker's builders set; the broker persists runtime-created entities, and config-file entities always
come back from the config file on restart.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sbemulator.broker.entity import QUEUE, SUBSCRIPTION, TOPIC, Entity
from sbemulator.broker.errors import BrokerError, EntityAlreadyExistsError, EntityNotFoundError, RuleError
from sbemulator.config import (
    DEFAULT_DUPLICATE_DETECTION_WINDOW,
    DEFAULT_LOCK_DURATION,
    DEFAULT_MAX_DELIVERY_COUNT,
    DEFAULT_MAX_MESSAGE_SIZE_KB,
    DEFAULT_MESSAGE_TTL,
    MAX_LOCK_DURATION,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)

from .errors import AdminError, BadRequest, Conflict, NotFound

DEFAULT_RULE = "$Default"
# Service Bus naming rules: queues and topics up to 260 characters and may contain '/', subscriptions
# and rules up to 50 and may not; letters, digits, '.', '-', '_', starting and ending with a letter
# or digit. Rule names may also be '$Default'.
_ENTITY_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[\w\-./]*[A-Za-z0-9])?$", re.ASCII)
_CHILD_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[\w\-.]*[A-Za-z0-9])?$", re.ASCII)
_RESERVED_SEGMENTS = {"$resources", "$namespaceinfo", "$admin", "subscriptions", "rules"}

# Echoed-only properties and their defaults (what Service Bus reports for a Standard namespace).
EXTRA_DEFAULTS: dict[str, Any] = {
    "AutoDeleteOnIdle": None,  # None: never (TimeSpan.MaxValue)
    "EnableBatchedOperations": True,
    "MaxSizeInMegabytes": 1024,
    "Status": "Active",
    "UserMetadata": None,
    "EnablePartitioning": False,
    "EnableExpress": False,
    "SupportOrdering": True,
    "FilteringMessagesBeforePublishing": False,
    "EnableSubscriptionPartitioning": False,
    "IsAnonymousAccessible": False,
}
_EXTRAS_BY_KIND = {
    QUEUE: ("AutoDeleteOnIdle", "EnableBatchedOperations", "MaxSizeInMegabytes", "Status", "UserMetadata",
            "EnablePartitioning", "EnableExpress", "IsAnonymousAccessible", "SupportOrdering"),
    TOPIC: ("AutoDeleteOnIdle", "EnableBatchedOperations", "MaxSizeInMegabytes", "Status", "UserMetadata",
            "EnablePartitioning", "EnableExpress", "SupportOrdering", "FilteringMessagesBeforePublishing",
            "EnableSubscriptionPartitioning", "IsAnonymousAccessible"),
    SUBSCRIPTION: ("AutoDeleteOnIdle", "EnableBatchedOperations", "Status", "UserMetadata"),
}
_STATUSES = {"active": "Active", "disabled": "Disabled", "senddisabled": "SendDisabled",
             "receivedisabled": "ReceiveDisabled"}


@dataclass
class EntityInfo:
    """What the renderers need to describe a queue, topic or subscription."""

    kind: str
    name: str  # queue/topic path, or the subscription's own name
    topic: str | None
    config: Any  # QueueConfig | TopicConfig | SubscriptionConfig
    extras: dict[str, Any]
    counts: dict[str, int]
    size_in_bytes: int
    created_at: float
    updated_at: float
    accessed_at: float
    subscription_count: int = 0
    default_rule: RuleConfig | None = None


@dataclass
class RuleInfo:
    topic: str
    subscription: str
    rule: RuleConfig
    created_at: float


@dataclass
class _Meta:
    created_at: float
    updated_at: float
    extras: dict[str, Any] = field(default_factory=dict)


def validate_name(name: str, *, child: bool, what: str) -> str:
    pattern, limit = (_CHILD_NAME_RE, 50) if child else (_ENTITY_NAME_RE, 260)
    if not isinstance(name, str) or not name or len(name) > limit or not pattern.match(name):
        allowed = "letters, digits, periods, hyphens and underscores" + ("" if child else " and slashes")
        raise BadRequest(
            f"The {what} name '{name}' is invalid. It can contain only {allowed}, must start and end with "
            f"a letter or digit and be at most {limit} characters long."
        )
    if not child and any(seg.lower() in _RESERVED_SEGMENTS or not seg for seg in name.split("/")):
        raise BadRequest(f"The {what} name '{name}' contains a reserved or empty path segment.")
    return name


def validate_rule_name(name: str) -> str:
    if name == DEFAULT_RULE:
        return name
    return validate_name(name, child=True, what="rule")


def entity_name_from_forward(value: str | None) -> str | None:
    """ForwardTo as the SDKs send it ('sb://host:port/q' or 'q') -> 'q'; '' -> None."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if "://" in text:
        text = urllib.parse.urlsplit(text).path
    return urllib.parse.unquote(text).strip("/") or None


class Namespace:
    """Management operations over one broker (one namespace)."""

    def __init__(self, broker: Any, name: str = "sbemulatorns", clock: Callable[[], float] = time.time,
                 commit: Callable[[], None] | None = None) -> None:
        self.broker = broker
        self.name = name
        self.clock = clock
        self.started_at = clock()
        self._commit = commit or broker.commit
        self._meta: dict[str, _Meta] = {}
        self._rule_times: dict[tuple[str, str], float] = {}

    # ------------------------------------------------------------------ plumbing
    def _entities(self) -> dict[str, Entity]:
        return self.broker._entities

    def _find(self, path: str, kind: str) -> Entity:
        ent = self._entities().get(path.strip("/").lower())
        if ent is None or ent.kind != kind:
            label = {QUEUE: "queue", TOPIC: "topic", SUBSCRIPTION: "subscription"}[kind]
            raise NotFound(f"The messaging entity '{self.name}:{label}:{path}' could not be found.")
        return ent

    def _meta_for(self, ent: Entity) -> _Meta:
        meta = self._meta.get(ent.key)
        if meta is None:
            meta = self._meta[ent.key] = _Meta(self.started_at, self.started_at)
        return meta

    def _info(self, ent: Entity) -> EntityInfo:
        meta = self._meta_for(ent)
        counts = self.broker.counts(ent.path)
        containers = [ent, *(c for c in (ent.dlq, ent.transfer_dlq) if c is not None)]
        size = sum(m.size for c in containers for m in c.messages.values())
        last = max((m.enqueued_time_ms for c in containers for m in c.messages.values()), default=0) / 1000
        extras = {k: meta.extras.get(k, EXTRA_DEFAULTS[k]) for k in _EXTRAS_BY_KIND[ent.kind]}
        topic = ent.parent.path if ent.kind == SUBSCRIPTION and ent.parent is not None else None
        name = ent.path.rsplit("/", 1)[1] if ent.kind == SUBSCRIPTION else ent.path
        default_rule = None
        if ent.kind == SUBSCRIPTION:
            default_rule = next((rc for rc, _ in ent.rules if rc.name == DEFAULT_RULE), None)
        return EntityInfo(
            kind=ent.kind, name=name, topic=topic, config=ent.config, extras=extras, counts=counts,
            size_in_bytes=size, created_at=meta.created_at, updated_at=meta.updated_at,
            accessed_at=max(meta.updated_at, min(last, self.clock())),
            subscription_count=len(ent.subscriptions), default_rule=default_rule,
        )

    def _done(self) -> None:
        self._commit()

    # ------------------------------------------------------------------ listing and reading
    def list_entities(self, kind: str, topic: str | None = None) -> list[EntityInfo]:
        if kind == SUBSCRIPTION:
            assert topic is not None
            parent = self._find(topic, TOPIC)
            return [self._info(e) for e in parent.subscriptions.values()]
        return [self._info(e) for e in self._entities().values() if e.kind == kind]

    def get(self, kind: str, path: str) -> EntityInfo:
        return self._info(self._find(path, kind))

    def kind_of(self, path: str) -> str | None:
        ent = self._entities().get(path.strip("/").lower())
        return ent.kind if ent is not None and ent.kind in (QUEUE, TOPIC) else None

    # ------------------------------------------------------------------ create / update / delete
    def put(self, kind: str, name: str, spec: Mapping[str, Any], *, mode: str,
            topic: str | None = None) -> tuple[EntityInfo, bool]:
        """Create (mode 'create': 409 if it exists), update ('update': 404 if missing) or either
        ('upsert', ARM's create-or-update). Returns the entity and whether it was created."""
        if kind == SUBSCRIPTION:
            assert topic is not None
            validate_name(name, child=True, what="subscription")
            topic_name = self._find(topic, TOPIC).path
            path = f"{topic_name}/Subscriptions/{name}"
        else:
            topic_name = ""
            path = validate_name(name, child=False, what="queue" if kind == QUEUE else "topic")
        existing = self._entities().get(path.lower())
        if existing is not None and existing.kind != kind:
            raise Conflict(f"The messaging entity '{path}' already exists as a {existing.kind}.")
        if existing is not None and mode == "create":
            raise Conflict(f"The messaging entity '{self.name}:{kind}:{path}' already exists.")
        if existing is None and mode == "update":
            raise NotFound(f"The messaging entity '{self.name}:{kind}:{path}' could not be found.")
        config, extras = self._config_from_spec(kind, name, spec)
        now = self.clock()
        try:
            if existing is None:
                if kind == QUEUE:
                    self.broker.create_queue(config)
                elif kind == TOPIC:
                    self.broker.create_topic(config)
                else:
                    self.broker.create_subscription(topic_name, config)
                ent = self._find(path, kind)
                self._meta[ent.key] = _Meta(now, now, extras)
                created = True
            else:
                meta = self._meta_for(existing)
                if not _same_config(existing.config, config) or meta.extras != extras:
                    _apply_update(self.broker, existing, config)
                    meta.updated_at, meta.extras = now, extras
                ent, created = existing, False
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        except EntityNotFoundError as exc:
            raise NotFound(exc.description) from None
        except BrokerError as exc:
            raise BadRequest(exc.description) from None
        finally:
            self._done()
        return self._info(ent), created

    def delete(self, kind: str, path: str) -> None:
        ent = self._find(path, kind)
        try:
            self.broker.delete_entity(ent.path)
        finally:
            self._done()
        for key in [k for k in self._meta if k == ent.key or k.startswith(ent.key + "/")]:
            del self._meta[key]

    def _config_from_spec(self, kind: str, name: str, spec: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        s = _Spec(spec)
        extras = {}
        for key in _EXTRAS_BY_KIND[kind]:
            if key in spec and spec[key] is not None:
                extras[key] = s.extra(key)
        if kind == TOPIC:
            config: Any = TopicConfig(
                name=name,
                default_message_ttl=s.duration("DefaultMessageTimeToLive", DEFAULT_MESSAGE_TTL),
                duplicate_detection_window=s.duration(
                    "DuplicateDetectionHistoryTimeWindow", DEFAULT_DUPLICATE_DETECTION_WINDOW),
                requires_duplicate_detection=s.boolean("RequiresDuplicateDetection", False),
                max_message_size_kb=s.integer("MaxMessageSizeInKilobytes", DEFAULT_MAX_MESSAGE_SIZE_KB, 1),
            )
            return config, extras
        common = dict(
            name=name,
            lock_duration=s.lock_duration(),
            max_delivery_count=s.integer("MaxDeliveryCount", DEFAULT_MAX_DELIVERY_COUNT, 1),
            default_message_ttl=s.duration("DefaultMessageTimeToLive", DEFAULT_MESSAGE_TTL),
            dead_lettering_on_message_expiration=s.boolean("DeadLetteringOnMessageExpiration", False),
            forward_to=self._forward_target(s.string("ForwardTo"), name),
            forward_dead_lettered_messages_to=self._forward_target(
                s.string("ForwardDeadLetteredMessagesTo"), name),
            requires_session=s.boolean("RequiresSession", False),
        )
        if kind == QUEUE:
            config = QueueConfig(
                **common,
                duplicate_detection_window=s.duration(
                    "DuplicateDetectionHistoryTimeWindow", DEFAULT_DUPLICATE_DETECTION_WINDOW),
                requires_duplicate_detection=s.boolean("RequiresDuplicateDetection", False),
                max_message_size_kb=s.integer("MaxMessageSizeInKilobytes", DEFAULT_MAX_MESSAGE_SIZE_KB, 1),
            )
        else:
            config = SubscriptionConfig(
                **common,
                dead_lettering_on_filter_evaluation_exceptions=s.boolean(
                    "DeadLetteringOnFilterEvaluationExceptions", True),
            )
            default_rule = spec.get("DefaultRuleDescription")
            if isinstance(default_rule, RuleConfig):
                validate_rule_name(default_rule.name)
                config = dataclasses.replace(config, rules=(default_rule,))
        return config, extras

    def _forward_target(self, value: str | None, own_name: str) -> str | None:
        target = entity_name_from_forward(value)
        if target is None:
            return None
        if target.lower() == own_name.lower():
            raise BadRequest(f"The entity '{own_name}' cannot forward to itself.")
        ent = self._entities().get(target.lower())
        if ent is None or ent.kind not in (QUEUE, TOPIC):
            raise BadRequest(f"The auto-forwarding destination entity '{target}' could not be found.")
        return ent.path

    # ------------------------------------------------------------------ rules
    def _subscription(self, topic: str, sub: str) -> Entity:
        return self._find(f"{topic}/Subscriptions/{sub}", SUBSCRIPTION)

    def list_rules(self, topic: str, sub: str) -> list[RuleInfo]:
        ent = self._subscription(topic, sub)
        return [self._rule_info(ent, rc) for rc, _ in ent.rules]

    def get_rule(self, topic: str, sub: str, name: str) -> RuleInfo:
        ent = self._subscription(topic, sub)
        for rc, _ in ent.rules:
            if rc.name.lower() == name.lower():
                return self._rule_info(ent, rc)
        raise NotFound(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{name}' could not be found.")

    def _rule_info(self, ent: Entity, rc: RuleConfig) -> RuleInfo:
        topic = ent.parent.path if ent.parent is not None else ""
        created = self._rule_times.get((ent.key, rc.name.lower()), self.started_at)
        return RuleInfo(topic, ent.path.rsplit("/", 1)[1], rc, created)

    def put_rule(self, topic: str, sub: str, rule: RuleConfig, *, mode: str,
                 replace_implicit_default: bool = False) -> tuple[RuleInfo, bool]:
        """Add or replace a rule. ``replace_implicit_default``: ARM's behaviour, where the first rule
        created on a subscription that still has only the automatic ``$Default`` (1=1) replaces it."""
        validate_rule_name(rule.name)
        ent = self._subscription(topic, sub)
        index = next((i for i, (rc, _) in enumerate(ent.rules) if rc.name.lower() == rule.name.lower()), None)
        if index is not None and mode == "create":
            raise Conflict(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{rule.name}' already exists.")
        if index is None and mode == "update":
            raise NotFound(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{rule.name}' could not be found.")
        try:
            if index is None:
                implicit = [rc for rc, _ in ent.rules] == [RuleConfig(DEFAULT_RULE, "Sql", "1=1")]
                self.broker.add_rule(ent.path, rule)
                self._rule_times[(ent.key, rule.name.lower())] = self.clock()
                if replace_implicit_default and implicit and rule.name != DEFAULT_RULE:
                    self.broker.remove_rule(ent.path, DEFAULT_RULE)
                created = True
            elif ent.rules[index][0] == rule:
                created = False  # unchanged: nothing to do (keeps ARM re-runs idempotent)
            else:
                compiled = self.broker._compile(ent, rule)
                ent.rules[index] = (rule, compiled)
                self.broker._save_rules(ent)
                created = False
        except RuleError as exc:
            raise BadRequest(exc.description) from None
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        finally:
            self._done()
        return self._rule_info(ent, rule), created

    def delete_rule(self, topic: str, sub: str, name: str) -> None:
        ent = self._subscription(topic, sub)
        self.get_rule(topic, sub, name)
        try:
            self.broker.remove_rule(ent.path, name)
        finally:
            self._done()
        self._rule_times.pop((ent.key, name.lower()), None)

    # ------------------------------------------------------------------ test support
    def purge(self, path: str) -> int:
        """Remove every message of an entity (and of its dead-letter queues); returns how many."""
        ent = self._entities().get(path.strip("/").lower())
        if ent is None:
            raise NotFound(f"The messaging entity '{path}' could not be found.")
        containers = [x for c in (ent, *ent.subscriptions.values()) for x in (c, c.dlq, c.transfer_dlq)
                      if x is not None]
        removed = 0
        try:
            for c in containers:
                for msg in list(c.messages.values()):
                    self.broker._remove(c, msg)
                    removed += 1
                c.available.clear()
                for s in c.sessions.values():
                    s.heap.clear()
        finally:
            self._done()
        return removed

    def reset(self) -> dict[str, int]:
        """Back to the configured topology: runtime-created entities deleted, config entities recreated
        as configured (if deleted or changed), every message gone."""
        broker = self.broker
        deleted = 0
        runtime = set(broker._runtime_keys)
        for key in sorted(runtime, key=lambda k: -k.count("/")):
            ent = self._entities().get(key)
            if ent is not None:
                broker.delete_entity(ent.path)
                deleted += 1
        purged = 0
        config = broker.config
        for q in config.queues:
            ent = self._entities().get(q.name.lower())
            if ent is not None:
                _apply_update(broker, ent, q)
            else:
                broker._add_queue(q)
        for t in config.topics:
            ent = self._entities().get(t.name.lower())
            if ent is None:
                broker._add_topic(t)
                continue
            _apply_update(broker, ent, dataclasses.replace(t, subscriptions=()))
            for s in t.subscriptions:
                sub = ent.subscriptions.get(s.name.lower())
                if sub is None:
                    broker._add_subscription(ent, s)
                else:
                    _apply_update(broker, sub, s)
                    sub.rules = []
                    rules = s.rules or (RuleConfig(DEFAULT_RULE, "Sql", "1=1"),)
                    sub.rules = [(rc, broker._compile(sub, rc)) for rc in rules]
                    sub.config = dataclasses.replace(sub.config, rules=tuple(rc for rc, _ in sub.rules))
        for ent in list(self._entities().values()):
            if ent.kind in (QUEUE, TOPIC):
                purged += self.purge(ent.path)
        self._meta.clear()
        self._rule_times.clear()
        self._done()
        return {"deleted": deleted, "purged": purged}


def _apply_update(broker: Any, ent: Entity, config: Any) -> None:
    """Change an entity's settings in place (the broker's builders set the same fields)."""
    old = ent.config
    if getattr(old, "requires_session", False) != getattr(config, "requires_session", False):
        raise BadRequest("The value of RequiresSession cannot be changed on an existing entity.")
    if ent.kind in (QUEUE, SUBSCRIPTION):
        ent.lock_duration_ms = _ms(config.lock_duration)
        ent.max_delivery_count = config.max_delivery_count
        ent.dead_lettering_on_expiration = config.dead_lettering_on_message_expiration
        ent.forward_to = config.forward_to
        ent.forward_dead_lettered_to = config.forward_dead_lettered_messages_to
        for sub in (ent.dlq, ent.transfer_dlq):
            if sub is not None:
                sub.lock_duration_ms = ent.lock_duration_ms
    ttl = _ms(config.default_message_ttl)
    if ent.kind == SUBSCRIPTION:
        ent.dead_lettering_on_filter_exceptions = config.dead_lettering_on_filter_evaluation_exceptions
        if ent.parent is not None and ent.parent.ttl_ms is not None:
            ttl = min(ttl, ent.parent.ttl_ms)
        config = dataclasses.replace(config, rules=tuple(rc for rc, _ in ent.rules))
    ent.ttl_ms = ttl
    if ent.kind in (QUEUE, TOPIC):
        ent.requires_duplicate_detection = config.requires_duplicate_detection
        ent.duplicate_window_ms = _ms(config.duplicate_detection_window)
        ent.max_message_size = config.max_message_size_kb * 1024
        for sub in (ent.dlq, ent.transfer_dlq, *ent.subscriptions.values()):
            if sub is not None:
                sub.max_message_size = ent.max_message_size
    if ent.kind == TOPIC:
        config = dataclasses.replace(config, subscriptions=())
    ent.config = config
    runtime = broker._runtime_keys
    if ent.key in runtime:
        if ent.kind == SUBSCRIPTION:
            broker._persist_subscription(ent)
        else:
            broker.store.save_entity(ent.key, ent.kind, json.dumps(dataclasses.asdict(config), default=str))


def _same_config(old: Any, new: Any) -> bool:
    """Equal apart from what an update does not carry (a topic's subscriptions, a subscription's rules)."""
    if type(old) is not type(new):
        return False
    if isinstance(old, TopicConfig):
        return dataclasses.replace(old, subscriptions=()) == dataclasses.replace(new, subscriptions=())
    if isinstance(old, SubscriptionConfig):
        return dataclasses.replace(old, rules=()) == dataclasses.replace(new, rules=())
    return old == new


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class _Spec:
    """Typed access to a parsed description; every problem is a 400 naming the property."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    def _get(self, key: str) -> Any:
        return self.data.get(key)

    def duration(self, key: str, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise BadRequest(f"The value supplied for {key} is invalid: it must be a positive duration.")
        return float(value)

    def lock_duration(self) -> float:
        value = self.duration("LockDuration", DEFAULT_LOCK_DURATION)
        if value > MAX_LOCK_DURATION:
            raise BadRequest("The value supplied for LockDuration is invalid: the maximum is 5 minutes (PT5M).")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise BadRequest(f"The value supplied for {key} is invalid: expected true or false.")
        return value

    def integer(self, key: str, default: int, minimum: int) -> int:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise BadRequest(f"The value supplied for {key} is invalid: expected an integer >= {minimum}.")
        return value

    def string(self, key: str) -> str | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise BadRequest(f"The value supplied for {key} is invalid: expected a string.")
        return value

    def extra(self, key: str) -> Any:
        default = EXTRA_DEFAULTS[key]
        if key == "AutoDeleteOnIdle":
            value = self._get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 300:
                raise BadRequest("The value supplied for AutoDeleteOnIdle is invalid: the minimum is 5 minutes.")
            return None if value >= MAX_TIMESPAN_SECONDS else float(value)
        if key == "Status":
            value = self.string(key) or "Active"
            status = _STATUSES.get(value.lower())
            if status is None:
                raise BadRequest(f"The value supplied for Status is invalid: {value!r}.")
            return status
        if key == "UserMetadata":
            value = self.string(key)
            if value is not None and len(value) > 1024:
                raise BadRequest("UserMetadata may be at most 1024 characters long.")
            return value
        if isinstance(default, bool):
            return self.boolean(key, default)
        if isinstance(default, int):
            return self.integer(key, default, 1)
        return self._get(key)


MAX_TIMESPAN_SECONDS = 922337203685.4775807  # .NET TimeSpan.MaxValue


def admin_error_from(exc: BrokerError) -> AdminError:
    if isinstance(exc, EntityNotFoundError):
        return NotFound(exc.description)
    if isinstance(exc, EntityAlreadyExistsError):
        return Conflict(exc.description)
    return BadRequest(exc.description)
