"""The namespace as the management APIs see it: entities with descriptions, counts and times.

Both wire formats (Atom XML for the Service Bus SDKs, JSON for Azure Resource Manager) parse into the
same *spec*: a dict keyed by the Service Bus property names of the Atom schema (``LockDuration``,
``MaxDeliveryCount``...), durations in seconds. This module turns specs into the broker's config
dataclasses, calls the broker, and answers with :class:`EntityInfo` / :class:`RuleInfo` for the
renderers. It runs on the emulator's event loop (the broker is single-threaded).

Which properties each kind has, their types, Service Bus's defaults (an entity created through the
management API gets these, not the config file's) and bounds come from the one table of entity
properties (:mod:`sbemulator.descriptions`). Properties the broker has no behaviour for
(``UserMetadata``, ``EnableBatchedOperations``, ``MaxSizeInMegabytes``,
partitioning...) are validated, kept in memory and echoed, so that round trips (get, change, update)
behave; they are not enforced and, unlike the entities themselves, not kept across restarts.

Updates of an existing entity change the broker's entity in place (messages, locks and receivers stay).
Everything here goes through the broker's public management API (``entity_views``, ``update_entity``,
``set_rule``, ``purge``, ``reset``: see :mod:`sbemulator.broker.inspection`); the broker persists every
change, and decides what survives a restart (:mod:`sbemulator.broker.topology`).
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sbemulator.broker.api import AdminBroker, PurgeJob
from sbemulator.broker.entity import QUEUE, SUBSCRIPTION, TOPIC
from sbemulator.broker.errors import (
    BrokerError,
    EntityAlreadyExistsError,
    EntityNotFoundError,
    QuotaExceededError,
    RuleError,
)
from sbemulator.broker.unit_of_work import apply_stored
from sbemulator.broker.views import EntityView
from sbemulator.config import (
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from sbemulator.descriptions import (
    DEFAULT_RULE,
    MAX_TIMESPAN_SECONDS,
    RIGHTS,
    STATUSES,
    AuthorizationRuleConfig,
    Codec,
    Property,
    entity_name_problem,
    for_kind,
    given_max_size,
)
from sbemulator.scheduling import JobRunner

from .errors import AdminError, BadRequest, Conflict, NotFound

T = TypeVar("T")

_CONFIG_TYPES = {QUEUE: QueueConfig, TOPIC: TopicConfig, SUBSCRIPTION: SubscriptionConfig}


def _echoed(prop: Property) -> bool:
    """Kept by this module (not the broker) and echoed: no config field, not a runtime value."""
    return prop.field is None and prop.codec is not Codec.RUNTIME


# Echoed-only properties and their defaults (what Service Bus reports for a Standard namespace), and
# which kinds have which.
EXTRA_DEFAULTS: dict[str, Any] = {p.atom: p.api_default for k in _CONFIG_TYPES for p in for_kind(k) if _echoed(p)}
_EXTRAS_BY_KIND = {k: tuple(p.atom for p in for_kind(k) if _echoed(p)) for k in _CONFIG_TYPES}
_STATUSES = {s.lower(): s for s in STATUSES}
_RIGHTS = {r.lower(): r for r in RIGHTS}
MAX_KEY_NAME = 256  # SAS key names ("Service Bus access control with Shared Access Signatures")


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
    accessed_at: float | None  # None: never used (the zero time, 0001-01-01T00:00:00Z)
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
    problem = entity_name_problem(name, child=child, rule=what == "rule", http=True)
    if problem is not None:
        raise BadRequest(f"The {what} name '{name}' is invalid. {problem}")
    return name


def validate_rule_name(name: str) -> str:
    return validate_name(name, child=True, what="rule")


# The key under which an entity's echoed extras keep a forwarding target as the client wrote it (a URL):
# Service Bus answers ForwardTo and ForwardDeadLetteredMessagesTo in the form they were given
# (azservicebus admin_client_test.go TestAdminClient_Queue_Forwarding sets https://<host>/<queue> and
# reads back the same; TestAdminClient_Forwarding does so with sb://). Kept with the other echoed
# extras, so in memory: after a restart the target reads back as sb://<host>/<name>.
GIVEN_SUFFIX = "@given"
FORWARD_PROPERTIES = ("ForwardTo", "ForwardDeadLetteredMessagesTo")


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

    def __init__(self, broker: AdminBroker, name: str = "sbemulatorns", clock: Callable[[], float] = time.time,
                 commit: Callable[[], BrokerError | None] | None = None, jobs: JobRunner | None = None) -> None:
        self.broker = broker
        # Runs a purge's slices with the event loop served between them (the runtime's scheduler); without
        # one (a namespace used outside a server), the purge runs in one go.
        self.jobs = jobs
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
        for atom_name in FORWARD_PROPERTIES:
            given = meta.extras.get(atom_name + GIVEN_SUFFIX)
            if given is not None:
                extras[atom_name + GIVEN_SUFFIX] = given
        if view.kind == TOPIC:
            # SqlFilterCount (SQL, true and false filters, $Default included) and CorrelationFilterCount,
            # summed over the topic's subscriptions (api-version 2024-05)
            rules = [rc for sub in self.broker.entity_views(topic=view.path) for rc in sub.rules]
            extras["CorrelationFilterCount"] = sum(rc.filter_type == "Correlation" for rc in rules)
            extras["SqlFilterCount"] = len(rules) - extras["CorrelationFilterCount"]
        default_rule = next((rc for rc in view.rules if rc.name == DEFAULT_RULE), None)
        accessed: float | None = max(meta.updated_at, min(view.last_enqueued_ms / 1000, self.clock()))
        if view.kind != SUBSCRIPTION and not view.last_enqueued_ms:
            # A queue or topic nothing was sent to reports the zero time (azservicebus admin_client_test.go,
            # TestAdminClient_QueueWithMaxValues: AccessedAt.IsZero()); a subscription its last update
            # (TestAdminClient_ListSubscriptionRuntimeProperties: not zero).
            accessed = None
        return EntityInfo(
            kind=view.kind, name=view.name, topic=view.topic, config=view.config, extras=extras,
            counts=view.counts.as_dict(), size_in_bytes=view.size_in_bytes, created_at=meta.created_at,
            updated_at=meta.updated_at, accessed_at=accessed,
            subscription_count=view.subscription_count, default_rule=default_rule,
        )

    def commit(self) -> BrokerError | None:
        """Make the broker changes so far durable: after every management request that changed state.
        Returns the error a store that cannot write refuses them with (QuotaExceeded, ServerBusy), or None."""
        result = self._commit()
        return result if isinstance(result, BrokerError) else None

    def stored(self, apply: Callable[[], T]) -> T:
        """Run ``apply`` (a change of entities, rules or messages through the broker) and answer only
        once the store has written it. What is pending is written first, so a store that cannot write
        refuses the request before anything of it applies; a change whose own write fails is taken back
        (the broker's ``end_change``: entities, rules, receivers and the store's pending writes as
        before). Refused with what Service Bus's management API answers for a failure it cannot take:
        403 ``QuotaExceeded`` for a full disk (the SDKs: ``HttpResponseError`` with status 403 in Python,
        ``QuotaExceededError`` in JavaScript, ``ServiceBusFailureReason.QuotaExceeded`` in .NET), 503
        ``ServerBusy`` for another write error (``ServerBusyError``, ``ServiceBusy``; retried by the
        SDKs' HTTP pipelines). An error ``apply`` raises takes back what it did too."""
        result = apply_stored(self.broker, self.commit, lambda _work: apply(), store_refusal)
        self.commit()  # the locks of the receivers it ended (written with a later commit if this one fails)
        return result

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
        now = self.clock()
        config, extras = self._config_from_spec(kind, name, spec, existing, now)
        if existing is not None:
            meta = self._meta_for(existing)
            if meta.extras.get("EnablePartitioning", False) != extras.get("EnablePartitioning", False):
                # partitioning is chosen when an entity is created, never changed
                # Service Bus's text (azservicebus admin_client_test.go, TestAdminClient_UpdateTopic)
                raise BadRequest(f"Partitioning cannot be changed for {kind.capitalize()}. ")
            changed = not _same_config(existing.config, config) or meta.extras != extras

        def apply() -> None:
            if existing is None:
                if kind == QUEUE:
                    self.broker.create_queue(config)
                elif kind == TOPIC:
                    self.broker.create_topic(config)
                else:
                    self.broker.create_subscription(topic_name, config)
            elif changed:
                self.broker.update_entity(existing.path, config)

        try:
            if existing is None or changed:  # an update that changes nothing writes nothing
                self.stored(apply)
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        except EntityNotFoundError as exc:
            raise NotFound(exc.description) from None
        except BrokerError as exc:
            raise admin_error_from(exc) from None
        if existing is None:
            self._meta[path.lower()] = _Meta(now, now, extras)
        elif changed:
            meta.updated_at, meta.extras = now, extras
        return self._info(self._find(path, kind)), existing is None

    def delete(self, kind: str, path: str) -> None:
        view = self._find(path, kind)
        try:
            self.stored(lambda: self.broker.delete_entity(view.path))
        except BrokerError as exc:
            raise admin_error_from(exc) from None
        key = view.path.lower()
        for k in [k for k in self._meta if k == key or k.startswith(key + "/")]:
            del self._meta[k]

    def _config_from_spec(self, kind: str, name: str, spec: Mapping[str, Any], existing: EntityView | None,
                          now: float) -> tuple[Any, dict[str, Any]]:
        """A description (spec) -> the broker's config and the echoed extras, property by property as the
        table describes them; what the description leaves out gets Service Bus's default."""
        values: dict[str, Any] = {"name": name}
        extras: dict[str, Any] = {}
        partitioned = spec.get("EnablePartitioning") is True
        for prop in for_kind(kind):
            raw = spec.get(prop.atom)
            if prop.atom == "MaxSizeInMegabytes":
                raw = given_max_size(raw, partitioned, prop.choices or ())
            if prop.atom == "AuthorizationRules":
                assert prop.field is not None  # the table gives every configured property its field
                previous = existing.config.authorization_rules if existing is not None else ()
                values[prop.field] = previous if raw is None else _authorization_rules(raw, previous, now)
                continue
            if prop.codec is Codec.RUNTIME:
                continue
            if prop.codec is Codec.ENTITY:
                assert prop.field is not None
                if raw is not None and not isinstance(raw, str):
                    raise BadRequest(f"The value supplied for {prop.atom} is invalid: expected a string.")
                values[prop.field] = self._forward_target(raw, name if kind == QUEUE else None)
                if raw is not None and "://" in raw and values[prop.field] is not None:
                    extras[prop.atom + GIVEN_SUFFIX] = raw.strip()
            elif prop.field is not None:
                if raw is not None and existing is not None and raw == getattr(existing.config, prop.field):
                    values[prop.field] = raw  # unchanged: a config file's value outside the API's choices stays
                else:
                    values[prop.field] = prop.api_default if raw is None else _checked(prop, raw)
            elif raw is not None:
                extras[prop.atom] = _checked(prop, raw)
        config = _CONFIG_TYPES[kind](**values)
        if kind == SUBSCRIPTION:
            default_rule = spec.get("DefaultRuleDescription")
            if isinstance(default_rule, RuleConfig):
                validate_rule_name(default_rule.name)
                config = dataclasses.replace(config, rules=(default_rule,))
        if kind != TOPIC and config.forward_to and not config.requires_session \
                and config.forward_to.lower() != name.lower():
            # "Chaining Service Bus entities with autoforwarding": with autoforwarding set up, the source's
            # AutoDeleteOnIdle is set to the maximum value (forwarding counts as receiving; never idle). The
            # live service does so only for a non-session entity forwarding to another entity.
            config = dataclasses.replace(config, auto_delete_on_idle=None)
        return config, extras

    def _forward_target(self, value: str | None, own_queue: str | None) -> str | None:
        """ForwardTo / ForwardDeadLetteredMessagesTo -> the target's path. A queue may name itself (the
        live service accepts and echoes it; the broker keeps such messages where they are)."""
        target = entity_name_from_forward(value)
        if target is None:
            return None
        if own_queue is not None and target.lower() == own_queue.lower():
            return own_queue
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
        if current == rule:
            return self._rule_info(view, rule), False  # unchanged: nothing to do (keeps ARM re-runs idempotent)

        def apply() -> None:
            if current is None:
                implicit = list(view.rules) == [RuleConfig(DEFAULT_RULE, "Sql", "1=1")]
                self.broker.add_rule(view.path, rule)
                if replace_implicit_default and implicit and rule.name != DEFAULT_RULE:
                    self.broker.remove_rule(view.path, DEFAULT_RULE)
            else:
                self.broker.set_rule(view.path, rule)

        try:
            self.stored(apply)
        except RuleError as exc:
            raise BadRequest(exc.description) from None
        except EntityAlreadyExistsError as exc:
            raise Conflict(exc.description) from None
        except BrokerError as exc:
            raise admin_error_from(exc) from None
        if current is None:
            self._rule_times[(view.path.lower(), rule.name.lower())] = self.clock()
        return self._rule_info(view, rule), current is None

    def delete_rule(self, topic: str, sub: str, name: str) -> None:
        view = self._subscription(topic, sub)
        self.get_rule(topic, sub, name)
        try:
            self.stored(lambda: self.broker.remove_rule(view.path, name))
        except BrokerError as exc:
            raise admin_error_from(exc) from None
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

    def begin_purge(self, path: str) -> PurgeJob:
        """:meth:`purge` in slices (broker/purge.py): the messages are out of the entity when this returns
        (later sends are kept); :meth:`run` drops them, committing after each slice."""
        try:
            return self.broker.begin_purge(path.strip("/"))
        except EntityNotFoundError:
            raise NotFound(f"The messaging entity '{path}' could not be found.") from None

    async def purge_async(self, path: str) -> int:
        """:meth:`purge` with the event loop served between slices; the count once all are committed."""
        return await self.run(self.begin_purge(path))

    async def run(self, job: PurgeJob) -> int:
        """Drop a purge's messages as a job of the scheduler (each slice committed, the event loop served
        between them); the count once the last slice is committed."""
        if self.jobs is not None:
            await self.jobs.run(job)
        else:
            job.run()
            self.commit()
        return job.removed

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

    async def reset_async(self) -> dict[str, int]:
        """:meth:`reset` with the event loop served between its purges' slices; answered once the last
        slice is committed."""
        try:
            deleted, jobs = self.broker.begin_reset()
        finally:
            self.commit()
        self._meta.clear()
        self._rule_times.clear()
        purged = 0
        for job in jobs:
            purged += await self.run(job)
        return {"deleted": deleted, "purged": purged}


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


def _checked(prop: Property, value: Any) -> Any:
    """A parsed value, checked against its property's codec and bounds; every problem is a 400 naming
    the property. Durations arrive in seconds (TimeSpan.MaxValue as MAX_TIMESPAN_SECONDS)."""
    key = prop.atom
    if prop.codec is Codec.DURATION:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise BadRequest(f"The value supplied for {key} is invalid: it must be a positive duration.")
        if (prop.minimum is not None and value < prop.minimum) or (prop.maximum is not None and value > prop.maximum):
            raise BadRequest(f"The value supplied for {key} is invalid: {prop.bound_doc}.")
        if prop.api_default is None:  # NEVER is the default: TimeSpan.MaxValue reads back as "never"
            return None if value >= MAX_TIMESPAN_SECONDS else float(value)
        return float(value)
    if prop.codec is Codec.BOOL:
        if not isinstance(value, bool):
            raise BadRequest(f"The value supplied for {key} is invalid: expected true or false.")
        return value
    if prop.codec is Codec.INT:
        minimum = int(prop.minimum or 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise BadRequest(f"The value supplied for {key} is invalid: expected an integer >= {minimum}.")
        if (prop.maximum is not None and value > prop.maximum) or (prop.choices and value not in prop.choices):
            raise BadRequest(f"The value supplied for {key} is invalid: {prop.bound_doc}.")
        return value
    if prop.codec is Codec.STATUS:
        status = _STATUSES.get(value.lower() or "active") if isinstance(value, str) else None
        if status is None:
            raise BadRequest(f"The value supplied for Status is invalid: {value!r}.")
        return status
    if not isinstance(value, str):
        raise BadRequest(f"The value supplied for {key} is invalid: expected a string.")
    if prop.maximum is not None and len(value) > prop.maximum:
        raise BadRequest(f"{key} may be at most {prop.maximum:g} characters long.")
    return value


def _authorization_rules(raw: Any, previous: tuple[AuthorizationRuleConfig, ...],
                         now: float) -> tuple[AuthorizationRuleConfig, ...]:
    """``AuthorizationRules`` as parsed (dicts) -> the entity's rules, replacing the previous ones. A rule
    without keys gets generated ones (as Service Bus does); an unchanged rule keeps its times."""
    if not isinstance(raw, list):
        raise BadRequest("The value supplied for AuthorizationRules is invalid: expected a list of rules.")
    before = {r.key_name.lower(): r for r in previous}
    out: list[AuthorizationRuleConfig] = []
    for item in raw:
        key_name = item.get("key_name") or ""
        if not key_name or len(key_name) > MAX_KEY_NAME or any(c.isspace() for c in key_name):
            raise BadRequest(f"The authorization rule key name '{key_name}' is invalid.")
        if key_name.lower() in (r.key_name.lower() for r in out):
            raise BadRequest(f"The authorization rule '{key_name}' is given twice.")
        rights: list[str] = []
        for text in item.get("rights") or ():
            right = _RIGHTS.get(str(text).strip().lower())
            if right is None:
                raise BadRequest(f"The access right '{text}' is invalid: use Manage, Send or Listen.")
            if right not in rights:
                rights.append(right)
        if not rights:
            raise BadRequest(f"The authorization rule '{key_name}' needs at least one access right.")
        old = before.get(key_name.lower())
        rule = AuthorizationRuleConfig(
            key_name=key_name,
            primary_key=item.get("primary_key") or (old.primary_key if old else _new_key()),
            secondary_key=item.get("secondary_key") or (old.secondary_key if old else _new_key()),
            rights=tuple(r for r in RIGHTS if r in rights),
            created_at=old.created_at if old else now,
            modified_at=now,
            claim_type=item.get("claim_type") or "SharedAccessKey",
            claim_value=item.get("claim_value") or "None",
        )
        if old is not None and dataclasses.replace(old, modified_at=now) == rule:
            rule = old
        out.append(rule)
    return tuple(out)


def _new_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def store_refusal(failure: BrokerError) -> AdminError:
    """The answer to a write the store could not take: 403 QuotaExceeded or 503 ServerBusy, with the
    store's reason, in the Atom error body (ARM's and the console's JSON carry the same code)."""
    return AdminError(failure.description or str(failure), status=failure.status_code,
                      code=type(failure).__name__.removesuffix("Error"))


def admin_error_from(exc: BrokerError) -> AdminError:
    if isinstance(exc, EntityNotFoundError):
        return NotFound(exc.description)
    if isinstance(exc, EntityAlreadyExistsError):
        return Conflict(exc.description)
    if isinstance(exc, QuotaExceededError):
        # The REST API's create operations: "403 Quota exceeded; queue not created" (a queue or topic over
        # the namespace's count, a subscription over its topic's).
        return AdminError(exc.description, 403, "QuotaExceeded")
    return BadRequest(exc.description)
