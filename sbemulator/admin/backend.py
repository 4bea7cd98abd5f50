"""The namespace as the management APIs see it: entities with descriptions, counts and times.

Both wire formats (Atom XML for the Service Bus SDKs, JSON for Azure Resource Manager) parse into the
same *spec*: a dict keyed by the Service Bus property names of the Atom schema (``LockDuration``,
``MaxDeliveryCount``...), durations in seconds. This module turns specs into the broker's config
dataclasses, calls the broker, and answers with :class:`EntityInfo` / :class:`RuleInfo` for the
renderers. It runs on the emulator's event loop (the broker is single-threaded).

Properties the broker has no behaviour for (``AutoDeleteOnIdle``, ``UserMetadata``,
``EnableBatchedOperations``, ``MaxSizeInMegabytes``, partitioning...) are validated, kept in memory
and echoed, so that round trips (get, change, update) behave; they are not enforced and, unlike the
entities themselves, not kept across restarts.

Updates of an existing entity change the broker's entity in place (messages, locks and receivers stay).
Everything here goes through the broker's public management API (``entity_views``, ``update_entity``,
``set_rule``, ``purge``, ``reset``: see :mod:`sbemulator.broker.inspection`); the broker persists every
change, and decides what survives a restart (:mod:`sbemulator.broker.topology`).
"""

from __future__ import annotations

import dataclasses
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sbemulator.broker.entity import QUEUE, SUBSCRIPTION, TOPIC
from sbemulator.broker.errors import (
    BrokerError,
    EntityAlreadyExistsError,
    EntityNotFoundError,
    RuleError,
)
from sbemulator.broker.views import EntityView
from sbemulator.config import (
    DEFAULT_DUPLICATE_DETECTION_WINDOW,
    DEFAULT_LOCK_DURATION,
    DEFAULT_MAX_DELIVERY_COUNT,
    DEFAULT_MAX_MESSAGE_SIZE_KB,
    DEFAULT_MESSAGE_TTL,
    MAX_LOCK_DURATION,
    STATUS_ACTIVE,
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
    def _find(self, path: str, kind: str) -> EntityView:
        view = self.broker.find_entity(path.strip("/"))
        if view is None or view.kind != kind:
            label = {QUEUE: "queue", TOPIC: "topic", SUBSCRIPTION: "subscription"}[kind]
            raise NotFound(f"The messaging entity '{self.name}:{label}:{path}' could not be found.")
        return view

    def _meta_for(self, view: EntityView) -> _Meta:
        key = view.path.lower()
        meta = self._meta.get(key)
        if meta is None:
            meta = self._meta[key] = _Meta(self.started_at, self.started_at)
        return meta

    def _info(self, view: EntityView) -> EntityInfo:
        meta = self._meta_for(view)
        extras = {k: meta.extras.get(k, EXTRA_DEFAULTS[k]) for k in _EXTRAS_BY_KIND[view.kind]}
        extras["Status"] = view.config.status  # enforced by the broker, so kept in its config
        default_rule = next((rc for rc in view.rules if rc.name == DEFAULT_RULE), None)
        accessed = max(meta.updated_at, min(view.last_enqueued_ms / 1000, self.clock()))
        return EntityInfo(
            kind=view.kind, name=view.name, topic=view.topic, config=view.config, extras=extras,
            counts=view.counts.as_dict(), size_in_bytes=view.size_in_bytes, created_at=meta.created_at,
            updated_at=meta.updated_at, accessed_at=accessed,
            subscription_count=view.subscription_count, default_rule=default_rule,
        )

    def commit(self) -> None:
        """Make the broker changes so far durable: after every management request that changed state."""
        self._commit()

    # ------------------------------------------------------------------ listing and reading
    def list_entities(self, kind: str, topic: str | None = None) -> list[EntityInfo]:
        if kind == SUBSCRIPTION:
            assert topic is not None
            parent = self._find(topic, TOPIC)
            return [self._info(v) for v in self.broker.entity_views(topic=parent.path)]
        return [self._info(v) for v in self.broker.entity_views(kind)]

    def get(self, kind: str, path: str) -> EntityInfo:
        return self._info(self._find(path, kind))

    def kind_of(self, path: str) -> str | None:
        view = self.broker.find_entity(path.strip("/"))
        return view.kind if view is not None and view.kind in (QUEUE, TOPIC) else None

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
        existing = self.broker.find_entity(path)
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
                self._meta[path.lower()] = _Meta(now, now, extras)
                created = True
            else:
                meta = self._meta_for(existing)
                if meta.extras.get("EnablePartitioning", False) != extras.get("EnablePartitioning", False):
                    # partitioning is chosen when an entity is created, never changed
                    raise BadRequest("The value of EnablePartitioning cannot be changed on an existing entity.")
                if not _same_config(existing.config, config) or meta.extras != extras:
                    self.broker.update_entity(existing.path, config)
                    meta.updated_at, meta.extras = now, extras
                created = False
            view = self._find(path, kind)
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        except EntityNotFoundError as exc:
            raise NotFound(exc.description) from None
        except BrokerError as exc:
            raise BadRequest(exc.description) from None
        finally:
            self.commit()
        return self._info(view), created

    def delete(self, kind: str, path: str) -> None:
        view = self._find(path, kind)
        try:
            self.broker.delete_entity(view.path)
        finally:
            self.commit()
        key = view.path.lower()
        for k in [k for k in self._meta if k == key or k.startswith(key + "/")]:
            del self._meta[k]

    def _config_from_spec(self, kind: str, name: str, spec: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        s = _Spec(spec)
        extras = {}
        for key in _EXTRAS_BY_KIND[kind]:
            if key in spec and spec[key] is not None:
                extras[key] = s.extra(key)
        status = extras.pop("Status", STATUS_ACTIVE)
        if kind == TOPIC:
            config: Any = TopicConfig(
                name=name,
                status=status,
                default_message_ttl=s.duration("DefaultMessageTimeToLive", DEFAULT_MESSAGE_TTL),
                duplicate_detection_window=s.duplicate_window(),
                requires_duplicate_detection=s.boolean("RequiresDuplicateDetection", False),
                max_message_size_kb=s.integer("MaxMessageSizeInKilobytes", DEFAULT_MAX_MESSAGE_SIZE_KB, 1),
            )
            return config, extras
        common = dict(
            name=name,
            status=status,
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
                duplicate_detection_window=s.duplicate_window(),
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
        if config.forward_to:
            # "Chaining Service Bus entities with autoforwarding": with autoforwarding set up, the source's
            # AutoDeleteOnIdle is set to the maximum value (forwarding counts as receiving; never idle)
            extras.pop("AutoDeleteOnIdle", None)
        return config, extras

    def _forward_target(self, value: str | None, own_name: str) -> str | None:
        target = entity_name_from_forward(value)
        if target is None:
            return None
        if target.lower() == own_name.lower():
            raise BadRequest(f"The entity '{own_name}' cannot forward to itself.")
        view = self.broker.find_entity(target)
        if view is None or view.kind not in (QUEUE, TOPIC):
            raise BadRequest(f"The auto-forwarding destination entity '{target}' could not be found.")
        return view.path

    # ------------------------------------------------------------------ rules
    def _subscription(self, topic: str, sub: str) -> EntityView:
        return self._find(f"{topic}/Subscriptions/{sub}", SUBSCRIPTION)

    def list_rules(self, topic: str, sub: str) -> list[RuleInfo]:
        view = self._subscription(topic, sub)
        return [self._rule_info(view, rc) for rc in view.rules]

    def get_rule(self, topic: str, sub: str, name: str) -> RuleInfo:
        view = self._subscription(topic, sub)
        for rc in view.rules:
            if rc.name.lower() == name.lower():
                return self._rule_info(view, rc)
        raise NotFound(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{name}' could not be found.")

    def _rule_info(self, view: EntityView, rc: RuleConfig) -> RuleInfo:
        created = self._rule_times.get((view.path.lower(), rc.name.lower()), self.started_at)
        return RuleInfo(view.topic or "", view.name, rc, created)

    def put_rule(self, topic: str, sub: str, rule: RuleConfig, *, mode: str,
                 replace_implicit_default: bool = False) -> tuple[RuleInfo, bool]:
        """Add or replace a rule. ``replace_implicit_default``: ARM's behaviour, where the first rule
        created on a subscription that still has only the automatic ``$Default`` (1=1) replaces it."""
        validate_rule_name(rule.name)
        view = self._subscription(topic, sub)
        current = next((rc for rc in view.rules if rc.name.lower() == rule.name.lower()), None)
        if current is not None and mode == "create":
            raise Conflict(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{rule.name}' already exists.")
        if current is None and mode == "update":
            raise NotFound(f"The messaging entity '{self.name}:rule:{topic}/{sub}/{rule.name}' could not be found.")
        try:
            if current is None:
                implicit = list(view.rules) == [RuleConfig(DEFAULT_RULE, "Sql", "1=1")]
                self.broker.add_rule(view.path, rule)
                self._rule_times[(view.path.lower(), rule.name.lower())] = self.clock()
                if replace_implicit_default and implicit and rule.name != DEFAULT_RULE:
                    self.broker.remove_rule(view.path, DEFAULT_RULE)
                created = True
            elif current == rule:
                created = False  # unchanged: nothing to do (keeps ARM re-runs idempotent)
            else:
                self.broker.set_rule(view.path, rule)
                created = False
        except RuleError as exc:
            raise BadRequest(exc.description) from None
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        finally:
            self.commit()
        return self._rule_info(view, rule), created

    def delete_rule(self, topic: str, sub: str, name: str) -> None:
        view = self._subscription(topic, sub)
        self.get_rule(topic, sub, name)
        try:
            self.broker.remove_rule(view.path, name)
        finally:
            self.commit()
        self._rule_times.pop((view.path.lower(), name.lower()), None)

    # ------------------------------------------------------------------ test support
    def purge(self, path: str) -> int:
        """Remove every message of an entity (and of its dead-letter queues); returns how many."""
        try:
            return self.broker.purge(path.strip("/"))
        except EntityNotFoundError:
            raise NotFound(f"The messaging entity '{path}' could not be found.") from None
        finally:
            self.commit()

    def reset(self) -> dict[str, int]:
        """Back to the configured topology: runtime-created entities deleted, config entities recreated
        as configured (if deleted or changed), every message gone."""
        try:
            result = self.broker.reset()
        finally:
            self.commit()
        self._meta.clear()
        self._rule_times.clear()
        return result


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

    def duplicate_window(self) -> float:
        """DuplicateDetectionHistoryTimeWindow: "minimum is 20 seconds", "max value is 7 days"
        (QueueProperties.DuplicateDetectionHistoryTimeWindow)."""
        key = "DuplicateDetectionHistoryTimeWindow"
        value = self.duration(key, DEFAULT_DUPLICATE_DETECTION_WINDOW)
        if not MIN_DUPLICATE_WINDOW <= value <= MAX_DUPLICATE_WINDOW:
            raise BadRequest(
                f"The value supplied for {key} is invalid: it must be between 20 seconds (PT20S) and 7 days (P7D)."
            )
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
MIN_DUPLICATE_WINDOW = 20.0
MAX_DUPLICATE_WINDOW = 7 * 86400.0


def admin_error_from(exc: BrokerError) -> AdminError:
    if isinstance(exc, EntityNotFoundError):
        return NotFound(exc.description)
    if isinstance(exc, EntityAlreadyExistsError):
        return Conflict(exc.description)
    return BadRequest(exc.description)
