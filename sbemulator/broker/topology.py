"""Entities of the namespace: built from the config file, created, changed and deleted at run time,
and what survives a restart.

A component of the broker (:class:`~sbemulator.broker.core.Broker` builds it): it owns the entities
(``entities``, by lower-case path; the other components read them through it) and the file's
declarations, stores descriptions through ``store``, and ends the receivers of an entity it deletes or
suspends through ``end_receivers`` (the message flow's). Imports ``entity``, ``errors``, ``rules``,
``wakeups``, ``sbemulator.config`` and ``store.base`` (the type); nothing from ``core`` or ``flow``.

What survives a restart (durable mode), and who wins when the config file and the store disagree:

* Every change made at run time (create, update, delete, rules added or removed, through the Atom or
  ARM API or AMQP ``$management``) is stored as the entity's description. A change to an entity the
  config file declares also stores a fingerprint of the file's description of it at that moment.
* At start-up the config file is read first, then the stored descriptions are applied on top:

  - an entity only the store knows (created at run time) comes back as it was last changed;
  - a config-file entity changed or deleted at run time stays changed or deleted **as long as its
    description in the file is still the one the change was made against**;
  - once the file's description of that entity has been edited, or the file declares an entity that
    was created at run time, the file wins: its description applies and the stored change is dropped
    (the entity's messages stay); an entity the file no longer declares, which the store only knew
    as a change to a file entity, is gone.

  In short: the most recent intent wins. Editing the file is a deliberate, later act than the API
  change it contradicts; an untouched file says nothing new, so the API change stands. Users of the
  official emulator, where the config file is the whole truth at every start, see the file's edits
  take effect exactly as they expect, and runtime changes are never silently undone by a restart that
  changed nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sbemulator.config import (
    AuthorizationRuleConfig,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)
from sbemulator.descriptions import (
    MAX_TIMESPAN_SECONDS,
    STATUS_DISABLED,
    STATUS_RECEIVE_DISABLED,
    entity_name_problem,
    for_kind,
)

from ..scheduling import Budget
from .entity import (
    DEAD_LETTER,
    DLQ_SUFFIX,
    QUEUE,
    SUBSCRIPTION,
    TOPIC,
    TRANSFER_DEAD_LETTER,
    TRANSFER_DLQ_SUFFIX,
    Entity,
    EntityRef,
)
from .entity_records import config_from, dumps_typed, typed_from_json
from .errors import (
    BrokerError,
    EntityAlreadyExistsError,
    EntityDisabledError,
    EntityNotFoundError,
    InvalidOperationError,
    QuotaExceededError,
    RuleError,
)
from .purge import PurgeJob
from .rules import FilterError, compile_rule
from .wakeups import Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

log = logging.getLogger(__name__)

# "Service Bus quotas" (Basic and Standard tiers): "Number of topics or queues per namespace: 10,000 ...
# Subsequent requests for creation of a new topic or queue on the namespace are rejected", and "Number
# of subscriptions per topic: 2,000 ... Subsequent requests for creating additional subscriptions for
# the topic are rejected". Both are QuotaExceeded. They bound what the management plane creates at run
# time; a config file is not held to them.
MAX_QUEUES_AND_TOPICS = 10_000
MAX_SUBSCRIPTIONS_PER_TOPIC = 2_000
# The same page: "Number of SQL filters per topic: 2,000" and "Number of correlation filters per topic:
# 100,000", each "Subsequent requests for creation of additional filters on the topic are rejected".
# Counted over the topic's subscriptions; a true or false filter is a SQL filter (TrueFilter is
# SqlFilter "1=1"), so a subscription's $Default rule counts.
# And "Number of shared access authorization rules per namespace, queue, or topic: 12 ... Subsequent
# requests for creation of additional rules are rejected".
MAX_AUTHORIZATION_RULES = 12
MAX_SQL_FILTERS_PER_TOPIC = 2_000
MAX_CORRELATION_FILTERS_PER_TOPIC = 100_000

DEFAULT_RULE = "$Default"
DELETED = "deleted"  # store kind of a config-file entity deleted at run time
_FILE_KEY = "__file__"  # in a stored description: fingerprint of the file's description, or null
_WITH_TOPIC = "__with_topic__"  # a deletion marker of a file subscription deleted with its topic


class Topology:
    def __init__(
        self,
        config: NamespaceConfig,
        store: Store,
        wakeups: Wakeups,
        end_receivers: Callable[[Entity, BrokerError], None],
    ) -> None:
        """Build the config file's entities, then apply what the store remembers (see module doc)."""
        self.config = config
        self.store = store
        self._op = wakeups.operation
        self._ending = end_receivers
        self._change: _Change | None = None  # a management change in progress (begin_change)
        # Deleted containers' messages still to be freed (drop_step); never reassigned: Broker.drops is this list.
        self.drops: list[PurgeJob] = []
        self.entities: dict[str, Entity] = {}  # every addressable container, by lower-case path
        self.file_entities: dict[str, Any] = {}
        for q in self.config.queues:
            self.file_entities[q.name.lower()] = q
            self._add_queue(q)
        for t in self.config.topics:
            ent = self._add_topic(t)
            self.file_entities[ent.key] = ent.config
            for s in t.subscriptions:
                self.file_entities[f"{ent.key}/subscriptions/{s.name.lower()}"] = s
        self._apply_stored_entities()

    # --- a management change: written before it is answered, taken back when it cannot be ----------
    def begin_change(self) -> None:
        """Start a change of the management plane (entities and rules, through the Atom or ARM API or
        the console) that the caller answers only once the store has written it. Until
        :meth:`end_change`, every create, update, delete and rule change here records how to undo it,
        and the receivers it would end (a deleted or suspended entity's) are held, so that taking the
        change back leaves the namespace exactly as before: entities, rules, receivers and locks, and
        the store's pending writes (Service Bus answers such a request with an error and changes
        nothing)."""
        self._change = _Change(self.store.savepoint())

    def end_change(self, keep: bool) -> None:
        """``keep``: the change was written; the receivers it ends are ended now (their lock returns are
        written with the next commit; a deleted entity's are dropped, its rows are gone). Otherwise the
        change is undone, newest step first, and the store forgets what it buffered for it."""
        change, self._change = self._change, None
        if change is None:
            return
        with self._op:
            if keep:
                # The deleted containers' messages out first: their receivers' locks then end with them, not
                # one by one back into a queue that is gone (50,000 locks: 470 ms in the delete's callback).
                self._free_later(change.dropped)
                for ent, error in change.endings:
                    self._ending(ent, error)
                for key in change.deleted:
                    self.store.discard_entity(key)
                return
            self._change = change  # undoing holds the endings of its own steps too (dropped below)
            try:
                for undo in reversed(change.undo):
                    undo()
            finally:
                self._change = None
                self.store.rollback_to(change.savepoint)

    def _undo_create(self, ent: Entity) -> None:
        self._drop(ent)

    def _end_receivers(self, ent: Entity, error: BrokerError) -> None:
        if self._change is not None:
            self._change.endings.append((ent, error))
        else:
            self._ending(ent, error)

    def record(self, undo: Callable[[], None]) -> None:
        """During a change: ``undo`` takes back one step of it (the other components record theirs here)."""
        if self._change is not None:
            self._change.undo.append(undo)

    # --- lookup -------------------------------------------------------------------------------------
    def entity(self, path: str) -> Entity:
        """Case-insensitive; accepts "q", "t", "t/Subscriptions/s", "<x>/$DeadLetterQueue",
        "<x>/$Transfer/$DeadLetterQueue" (a leading "/" or "amqps://host/" prefix is stripped)."""
        ent = self.entities.get(normalize(path))
        if ent is None:
            raise EntityNotFoundError(f"The messaging entity '{path}' could not be found.")
        return ent

    # --- building ---------------------------------------------------------------------------------
    def _register(self, ent: Entity) -> Entity:
        old = self.entities.get(ent.key)
        if old is not None and old is not ent:
            old.live = False
        self.entities[ent.key] = ent
        return ent

    def _add_sub_queues(self, ent: Entity) -> None:
        dlq = Entity(
            key=f"{ent.key}/{DLQ_SUFFIX.lower()}",
            path=f"{ent.path}/{DLQ_SUFFIX}",
            kind=DEAD_LETTER,
            lock_duration_ms=ent.lock_duration_ms,
            max_message_size=ent.max_message_size,
            parent=ent,
        )
        tdlq = Entity(
            key=f"{ent.key}/{TRANSFER_DLQ_SUFFIX.lower()}",
            path=f"{ent.path}/{TRANSFER_DLQ_SUFFIX}",
            kind=TRANSFER_DEAD_LETTER,
            lock_duration_ms=ent.lock_duration_ms,
            max_message_size=ent.max_message_size,
            parent=ent,
        )
        ent.dlq, ent.transfer_dlq = self._register(dlq), self._register(tdlq)

    def _add_queue(self, q: QueueConfig) -> Entity:
        ent = Entity(key=q.name.lower(), path=q.name, kind=QUEUE)
        _configure(ent, q)
        self._register(ent)
        self._add_sub_queues(ent)
        return ent

    def _add_topic(self, t: TopicConfig) -> Entity:
        ent = Entity(key=t.name.lower(), path=t.name, kind=TOPIC)
        _configure(ent, dataclasses.replace(t, subscriptions=()))
        self._register(ent)
        for s in t.subscriptions:
            self._add_subscription(ent, s)
        return ent

    def _add_subscription(self, topic: Entity, s: SubscriptionConfig) -> Entity:
        ent = Entity(
            key=f"{topic.key}/subscriptions/{s.name.lower()}",
            path=f"{topic.path}/Subscriptions/{s.name}",
            kind=SUBSCRIPTION,
            max_message_size=topic.max_message_size,
            parent=topic,
        )
        rules = s.rules or (RuleConfig(name=DEFAULT_RULE, filter_type="Sql", sql_expression="1=1"),)
        ent.rules = [(rc, self._compile(ent, rc)) for rc in rules]
        _configure(ent, s)
        topic.subscriptions[s.name.lower()] = ent
        self._register(ent)
        self._add_sub_queues(ent)
        return ent

    @staticmethod
    def _compile(ent: Entity, rc: RuleConfig) -> Any:
        return _compiled(ent.path, rc)

    # --- runtime entity management (persisted) ---------------------------------------------------
    def create_queue(self, q: QueueConfig) -> EntityRef:
        with self._op:
            self._check_new_name(q.name)
            _check_bounds(QUEUE, q)
            _check_authorization_rules(q.name, q)
            ent = self._add_queue(q)
            self.record(lambda: self._undo_create(ent))
            self._persist(ent)
            return ent.ref()

    def create_topic(self, t: TopicConfig) -> EntityRef:
        with self._op:
            self._check_new_name(t.name)
            _check_authorization_rules(t.name, t)
            ent = self._add_topic(dataclasses.replace(t, subscriptions=()))
            self.record(lambda: self._undo_create(ent))
            self._persist(ent)
            for s in t.subscriptions:
                self.create_subscription(t.name, s)
            return ent.ref()

    def create_subscription(self, topic_name: str, s: SubscriptionConfig) -> EntityRef:
        with self._op:
            topic = self.entities.get(topic_name.lower())
            if topic is None or topic.kind != TOPIC:
                raise EntityNotFoundError(f"The messaging entity '{topic_name}' could not be found.")
            problem = entity_name_problem(s.name, child=True)
            if problem is not None:
                raise InvalidOperationError(f"The subscription name '{s.name}' is invalid. {problem}")
            _check_bounds(SUBSCRIPTION, s)
            if s.name.lower() in topic.subscriptions:
                raise EntityAlreadyExistsError(
                    f"The subscription '{s.name}' already exists on '{topic.path}'."
                )
            if len(topic.subscriptions) >= MAX_SUBSCRIPTIONS_PER_TOPIC:
                raise QuotaExceededError(
                    f"The topic '{topic.path}' already has {len(topic.subscriptions)} subscriptions, the most "
                    f"a topic can have ({MAX_SUBSCRIPTIONS_PER_TOPIC}, Service Bus quotas: subscriptions per "
                    f"topic); '{s.name}' was not created."
                )
            _check_filter_quota(topic, _rules_of(s), f"'{s.name}' was not created")
            ent = self._add_subscription(topic, s)
            self.record(lambda: self._undo_create(ent))
            self._persist(ent)
            return ent.ref()

    def update_entity(self, path: str, config: QueueConfig | TopicConfig | SubscriptionConfig) -> EntityRef:
        """Change a queue's, topic's or subscription's settings in place: messages, locks, receivers and
        (for subscriptions) rules stay; a topic's ``subscriptions`` and a subscription's ``rules`` in
        ``config`` are ignored (change those with the subscription and rule operations). Persisted.
        ``RequiresSession`` and ``RequiresDuplicateDetection`` cannot change (InvalidOperationError), as on
        Service Bus."""
        with self._op:
            ent = self._entity_of_kind(path, (QUEUE, TOPIC, SUBSCRIPTION))
            expected = {QUEUE: QueueConfig, TOPIC: TopicConfig, SUBSCRIPTION: SubscriptionConfig}[ent.kind]
            if not isinstance(config, expected):
                raise InvalidOperationError(f"'{ent.path}' is a {ent.kind}; expected a {expected.__name__}.")
            _check_bounds(ent.kind, config)
            _check_authorization_rules(ent.path, config)
            for prop in for_kind(ent.kind):
                # RequiresSession, RequiresDuplicateDetection ("Enable duplicate message detection": only
                # when the queue or topic is created)
                if prop.immutable and prop.field and getattr(ent.config, prop.field) != getattr(config, prop.field):
                    # Service Bus's text (azservicebus admin_client_test.go, TestAdminClient_UpdateQueue
                    # and TestAdminClient_UpdateSubscription)
                    raise InvalidOperationError(
                        f"The value for the {prop.atom} property of an existing {ent.kind.capitalize()} "
                        "cannot be changed."
                    )
            before = ent.config
            self.record(lambda: self._reconfigure(ent, before))
            self._reconfigure(ent, config)
            self._persist(ent)
            return ent.ref()

    def _reconfigure(self, ent: Entity, config: Any) -> None:
        if ent.kind == TOPIC:
            config = dataclasses.replace(config, subscriptions=())
        elif ent.kind == SUBSCRIPTION:
            config = dataclasses.replace(config, rules=tuple(rc for rc, _ in ent.rules))
        _configure(ent, config)
        if ent.kind != TOPIC and ent.status in (STATUS_DISABLED, STATUS_RECEIVE_DISABLED):
            # suspended for receiving: the links attached until now are detached with that error
            self._end_receivers(ent, EntityDisabledError(
                f"Messaging entity '{ent.path}' is currently disabled for receiving (status {ent.status})."
            ))
        for sub in (ent.dlq, ent.transfer_dlq):
            if sub is not None:
                sub.lock_duration_ms = ent.lock_duration_ms
                sub.max_message_size = ent.max_message_size
        for sub in ent.subscriptions.values():  # topics: size limit and TTL ceiling reach the subscriptions
            _configure(sub, sub.config)

    def delete_entity(self, path: str) -> None:
        with self._op:
            ent = self._entity_of_kind(path, (QUEUE, TOPIC, SUBSCRIPTION))
            containers = [c for e in (ent, *ent.subscriptions.values()) for c in (e, e.dlq, e.transfer_dlq)
                          if c is not None]
            if self._change is None:
                self._free_later(containers)  # before its receivers end (see end_change)
            self.record(self._drop(ent, free_later=True))
            if self._change is not None:
                self._change.deleted.append(ent.key)
                self._change.dropped.extend(containers)  # freed once the delete is kept (end_change)
            self.store.delete_entity(ent.key)
            # A deleted file entity (and a deleted file topic's file subscriptions) is remembered as deleted,
            # so that a topic re-created through the API does not get the file's subscriptions back.
            prefix = ent.key + "/"
            for key in self.file_entities:
                if key == ent.key or key.startswith(prefix):
                    marker = {_FILE_KEY: self._file_fingerprint(key), _WITH_TOPIC: key != ent.key}
                    self.store.save_entity(key, DELETED, json.dumps(marker))

    def _free_later(self, containers: list[Entity]) -> None:
        """The messages of deleted containers, taken out of them now and freed a slice at a time by
        :meth:`drop_step` (the server runs it in callbacks of its own): 100,000 message objects freed at
        once, and a deleted subscription's sizes summed for its topic's quota, held the event loop for
        tens of milliseconds. The purge's job does it (it writes nothing to the store for a container no
        longer live: its rows went with the delete) and gives the topic's quota back as it goes."""
        if containers:
            job = PurgeJob(self.store, containers)
            if job.detach():
                self.drops.append(job)

    def drop_step(self, budget: Budget | None = None) -> None:
        """Free one slice of deleted containers' messages (:meth:`_free_later`); without a budget, one
        chunk of ``Slices.purge_items``."""
        with self._op:
            if self.drops and self.drops[0].step(budget if budget is not None else Budget(0.0)):
                self.drops.pop(0)

    def _drop(self, ent: Entity, free_later: bool = False) -> Callable[[], None]:
        """Forget an entity, its sub-queues and (topics) its subscriptions. Their receivers' links are
        detached with ``amqp:not-found`` on their next receive, as Service Bus detaches the links of a
        deleted entity (the SDK raises MessagingEntityNotFoundError). Returns what puts them back (a
        change taken back, before anything else ran: their timers, messages and receivers are intact).
        ``free_later``: the caller hands the containers to :meth:`_free_later`, which also gives what a
        subscription held back to its topic's quota, a slice at a time."""
        for e in (ent, *ent.subscriptions.values()):
            for c in (e, e.dlq, e.transfer_dlq):
                if c is not None and c.receivers:
                    self._end_receivers(c, EntityNotFoundError(f"The messaging entity '{c.path}' was deleted."))
        prefix = ent.key + "/"
        dropped = {key: self.entities.pop(key) for key in [k for k in self.entities
                                                             if k == ent.key or k.startswith(prefix)]}
        for e in dropped.values():
            e.live = False  # its timers no longer matter
        held = 0
        name = ent.key.rsplit("/", 1)[-1]
        if ent.kind == SUBSCRIPTION and ent.parent is not None:
            ent.parent.subscriptions.pop(name, None)
        if ent.kind == SUBSCRIPTION and ent.parent is not None and not free_later:
            # what the subscription held no longer counts against its topic's MaxSizeInMegabytes
            held = sum(sum(m.size for m in c.messages.values()) + (c.cold.bytes if c.cold is not None else 0)
                       for c in (ent, ent.dlq, ent.transfer_dlq) if c is not None)  # paged-out messages count too
            ent.quota.held_bytes -= held

        def restore() -> None:
            for key, e in dropped.items():
                e.live = True
                self.entities[key] = e
            if ent.kind == SUBSCRIPTION and ent.parent is not None:
                ent.parent.subscriptions[name] = ent
                ent.quota.held_bytes += held

        return restore

    def _check_new_name(self, name: str, *, child: bool = False) -> None:
        problem = entity_name_problem(name, child=child)
        if problem is not None:
            raise InvalidOperationError(f"The entity name '{name}' is invalid. {problem}")
        if name.lower() in self.entities:
            raise EntityAlreadyExistsError(f"The messaging entity '{name}' already exists.")
        held = sum(1 for ent in self.entities.values() if ent.kind in (QUEUE, TOPIC))
        if held >= MAX_QUEUES_AND_TOPICS:
            raise QuotaExceededError(
                f"The namespace already holds {held} queues and topics, the most it can hold "
                f"({MAX_QUEUES_AND_TOPICS}, Service Bus quotas: topics or queues per namespace); "
                f"'{name}' was not created."
            )

    def _entity_of_kind(self, path: str, kinds: tuple[str, ...]) -> Entity:
        ent = self.entity(path)
        if ent.kind not in kinds:
            raise InvalidOperationError(f"'{ent.path}' cannot be changed or deleted.")
        return ent

    def authorization_rules(self, entity_path: str) -> list[AuthorizationRuleConfig]:
        """The shared access rules of the queue or topic that ``entity_path`` names or lies in (a
        subscription, a dead-letter queue): what a token signed with an entity rule's key is checked
        against. Empty for an unknown path or an entity without rules."""
        try:
            ent = self.entity(entity_path)
        except EntityNotFoundError:
            return []
        while ent.parent is not None:
            ent = ent.parent
        return list(getattr(ent.config, "authorization_rules", ()))

    def is_runtime_entity(self, path: str) -> bool:
        """True for an entity the config file does not declare (created at run time)."""
        return self.entity(path).key not in self.file_entities

    # --- persistence --------------------------------------------------------------------------------
    def _file_fingerprint(self, key: str) -> str | None:
        file_config = self.file_entities.get(key)
        if file_config is None:
            return None
        data = dataclasses.asdict(file_config)
        if not data.get("authorization_rules", True):
            del data["authorization_rules"]  # the file has none; keeps fingerprints stored before they existed
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def _persist(self, ent: Entity) -> None:
        data = dataclasses.asdict(ent.config)
        if ent.kind == SUBSCRIPTION:
            data["topic"] = ent.parent.path if ent.parent is not None else ""
        data[_FILE_KEY] = self._file_fingerprint(ent.key)
        self.store.save_entity(ent.key, ent.kind, dumps_typed(data))

    def _forget_stored(self, key: str, why: str) -> None:
        log.warning("%s: %s; the stored change is dropped", key, why)
        self.store.forget_entity(key)

    def _apply_stored_entities(self) -> None:
        self.apply_records(self.store.load_entities())

    def apply_records(self, records: list[tuple[str, str, str]], *, persist: bool = False) -> None:
        """Apply stored entity descriptions (``(key, kind, description)``, as ``Store.load_entities``
        gives them) over the entities that exist, by the rules of the module docstring: what a
        restart does with the store, and what a snapshot import does with the snapshot's records.
        ``persist``: also write the entities this creates or changes to the store (records that do not
        come from it)."""
        records = sorted(records, key=lambda r: (r[1] == SUBSCRIPTION, r[0].count("/")))
        dropped: set[str] = set()
        for key, kind, data in records:
            desc = json.loads(data, object_hook=typed_from_json)
            stored_against = desc.pop(_FILE_KEY, None)
            in_file = key in self.file_entities
            if desc.pop(_WITH_TOPIC, False) and key.split("/subscriptions/", 1)[0] in dropped:
                # deleted only because its topic was; the file brought the topic back, so it comes back too
                self.store.forget_entity(key)
                continue
            if in_file and stored_against != self._file_fingerprint(key):
                self._forget_stored(key, "the config file declares it differently now; the file wins")
                dropped.add(key)
                continue
            if not in_file and stored_against is not None:
                self._forget_stored(key, "the config file no longer declares it")
                continue
            existing = self.entities.get(key)
            if kind == DELETED:
                if existing is not None:
                    self._drop(existing)
                continue
            config = config_from(kind, desc)
            if kind == SUBSCRIPTION:
                topic = self.entities.get(str(desc.get("topic", "")).lower())
                if topic is None or topic.kind != TOPIC:
                    self._forget_stored(key, "its topic no longer exists")
                    continue
                if existing is not None:
                    existing.rules = [(rc, self._compile(existing, rc)) for rc in _rules_of(config)]
                    _configure(existing, dataclasses.replace(config, rules=tuple(rc for rc, _ in existing.rules)))
                else:
                    self._add_subscription(topic, config)
            elif existing is not None:
                self._reconfigure(existing, config)
            elif kind == QUEUE:
                self._add_queue(config)
            else:
                self._add_topic(config)
            if persist:
                self.store.save_entity(key, kind, data)

    def restore_file_topology(self) -> int:
        """Back to exactly what the config file declares (test support ``reset``): runtime entities
        deleted, file entities recreated or reconfigured, stored changes dropped. Returns how many
        runtime entities (queues, topics, subscriptions) were deleted."""
        deleted = 0
        for key in sorted(self.entities, key=lambda k: -k.count("/")):
            ent = self.entities.get(key)
            if ent is not None and ent.kind in (QUEUE, TOPIC, SUBSCRIPTION) and key not in self.file_entities:
                self._drop(ent)
                self.store.delete_entity(key)
                deleted += 1
        for key in list(self.file_entities):
            self.store.forget_entity(key)
        for q in self.config.queues:
            ent = self.entities.get(q.name.lower())
            if ent is None:
                self._add_queue(q)
            else:
                self._reconfigure(ent, q)
        for t in self.config.topics:
            topic = self.entities.get(t.name.lower())
            if topic is None:
                self._add_topic(t)
                continue
            self._reconfigure(topic, t)
            for s in t.subscriptions:
                sub = topic.subscriptions.get(s.name.lower())
                if sub is None:
                    self._add_subscription(topic, s)
                else:
                    sub.rules = [(rc, self._compile(sub, rc)) for rc in _rules_of(s)]
                    self._reconfigure(sub, s)
        return deleted

    # --- rules ($management add-rule / remove-rule / enumerate-rules, admin) --------------------------
    def add_rule(
        self,
        path: str,
        rule: RuleConfig | str,
        *,
        filter_type: str = "Sql",
        sql_expression: str | None = None,
        correlation: dict[str, Any] | None = None,
        action_expression: str | None = None,
    ) -> None:
        """Add a rule to a subscription: a RuleConfig, or a name plus the RuleConfig fields as keywords.
        Raises RuleError (argument-error) when it does not compile, EntityAlreadyExistsError on a
        duplicate name."""
        if isinstance(rule, str):
            rule = RuleConfig(
                name=rule,
                filter_type=filter_type,
                sql_expression=sql_expression,
                correlation=correlation,
                action_expression=action_expression,
            )
        with self._op:
            sub = self._subscription(path)
            if any(rc.name.lower() == rule.name.lower() for rc, _ in sub.rules):
                raise EntityAlreadyExistsError(f"The rule '{rule.name}' already exists.")
            if sub.parent is not None:
                _check_filter_quota(sub.parent, (rule,), f"the rule '{rule.name}' was not added")
            compiled = self._compile(sub, rule)
            self._record_rules(sub)
            sub.rules.append((rule, compiled))
            self._save_rules(sub)

    def set_rule(self, path: str, rule: RuleConfig) -> bool:
        """Add a rule, or replace the rule of that name (case-insensitive) in place; True if it was added.
        RuleError when it does not compile (nothing changes then)."""
        with self._op:
            sub = self._subscription(path)
            if sub.parent is not None:  # a replaced rule of the same kind frees its own place
                replaced = [rc for rc, _ in sub.rules if rc.name.lower() == rule.name.lower()]
                _check_filter_quota(sub.parent, (rule,), f"the rule '{rule.name}' was not added", replaced)
            compiled = self._compile(sub, rule)
            self._record_rules(sub)
            for i, (rc, _) in enumerate(sub.rules):
                if rc.name.lower() == rule.name.lower():
                    sub.rules[i] = (rule, compiled)
                    self._save_rules(sub)
                    return False
            sub.rules.append((rule, compiled))
            self._save_rules(sub)
            return True

    def remove_rule(self, path: str, name: str) -> None:
        with self._op:
            sub = self._subscription(path)
            keep = [(rc, r) for rc, r in sub.rules if rc.name.lower() != name.lower()]
            if len(keep) == len(sub.rules):
                # Service Bus answers 404 with its entity wording; the JS SDK maps that wording to
                # MessagingEntityNotFound.
                raise EntityNotFoundError(f"The messaging entity '{sub.path}/Rules/{name}' could not be found.")
            self._record_rules(sub)
            sub.rules = keep
            self._save_rules(sub)

    def list_rules(self, path: str) -> list[RuleConfig]:
        return [rc for rc, _ in self._subscription(path).rules]

    def _subscription(self, path: str) -> Entity:
        sub = self.entity(path)
        if sub.kind != SUBSCRIPTION:
            raise InvalidOperationError("Rules exist only on subscriptions.")
        return sub

    def _record_rules(self, sub: Entity) -> None:
        rules, config = list(sub.rules), sub.config

        def restore() -> None:
            sub.rules, sub.config = rules, config

        self.record(restore)

    def _save_rules(self, sub: Entity) -> None:
        sub.config = dataclasses.replace(sub.config, rules=tuple(rc for rc, _ in sub.rules))
        self._persist(sub)


@dataclasses.dataclass(slots=True)
class _Change:
    """A management change in progress: the store's savepoint, how to undo each step, the receivers it
    ends once it is kept, and the entities it deleted."""

    savepoint: object
    undo: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    endings: list[tuple[Entity, BrokerError]] = dataclasses.field(default_factory=list)
    deleted: list[str] = dataclasses.field(default_factory=list)
    dropped: list[Entity] = dataclasses.field(default_factory=list)  # the deleted entities' containers


def normalize(path: str) -> str:
    """An entity's key: lower-case, without a scheme and host, empty segments dropped."""
    p = path.strip()
    if "://" in p:
        p = p.split("://", 1)[1]
        p = p.split("/", 1)[1] if "/" in p else ""
    return "/".join(part for part in p.split("/") if part).lower()


def _check_bounds(kind: str, config: Any) -> None:
    """The bounds every surface holds an entity to (the table's ``file_bounds`` properties: LockDuration at
    most 5 minutes, MaxDeliveryCount at least 1), also for a config built in code."""
    for prop in for_kind(kind):
        if not prop.file_bounds or prop.field is None:
            continue
        value = getattr(config, prop.field)
        if (prop.minimum is not None and value < prop.minimum) or (prop.maximum is not None and value > prop.maximum):
            raise InvalidOperationError(f"The value supplied for {prop.atom} is invalid: {prop.bound_doc}.")


def _configure(ent: Entity, config: Any) -> None:
    """Set an entity's behaviour from its config (building and updating share this one mapping)."""
    ent.config = config
    ent.status = config.status
    # TimeSpan.MaxValue (the management API's default): no ceiling, no TTL stamped on a message sent without one
    ttl = None if config.default_message_ttl >= MAX_TIMESPAN_SECONDS else _ms(config.default_message_ttl)
    if ent.kind == SUBSCRIPTION and ent.parent is not None and ent.parent.ttl_ms is not None:
        ttl = ent.parent.ttl_ms if ttl is None else min(ttl, ent.parent.ttl_ms)  # the topic's is a ceiling too
    ent.ttl_ms = ttl
    idle = getattr(config, "auto_delete_on_idle", None)
    ent.idle_ms = None if idle is None or idle >= MAX_TIMESPAN_SECONDS else _ms(idle)
    if ent.kind in (QUEUE, SUBSCRIPTION):
        ent.lock_duration_ms = _ms(config.lock_duration)
        ent.max_delivery_count = config.max_delivery_count
        ent.dead_lettering_on_expiration = config.dead_lettering_on_message_expiration
        ent.requires_session = config.requires_session
        # A queue may name itself (the management API accepts it, as the live service does); the
        # broker then keeps the messages where they are instead of forwarding them in a loop.
        ent.forward_to = _other(config.forward_to, ent.path)
        ent.forward_dead_lettered_to = _other(config.forward_dead_lettered_messages_to, ent.path)
    if ent.kind in (QUEUE, TOPIC):
        ent.max_message_size = config.max_message_size_kb * 1024
        ent.max_size_bytes = config.max_size_in_megabytes * 1024 * 1024
        ent.requires_duplicate_detection = config.requires_duplicate_detection
        ent.duplicate_window_ms = _ms(config.duplicate_detection_window)
    if ent.kind == SUBSCRIPTION:
        ent.dead_lettering_on_filter_exceptions = config.dead_lettering_on_filter_evaluation_exceptions
        if ent.parent is not None:
            ent.max_message_size = ent.parent.max_message_size


def _compiled(path: str, rc: RuleConfig) -> Any:
    try:
        return compile_rule(
            rc.name, rc.filter_type, rc.sql_expression, rc.correlation, rc.action_expression,
            rc.filter_parameters, rc.action_parameters or {},
        )
    except FilterError as exc:
        raise RuleError(f"{path}: rule {rc.name!r}: {exc}") from exc


def _other(target: str | None, own_path: str) -> str | None:
    return None if target is None or target.lower() == own_path.lower() else target


def _check_authorization_rules(name: str, config: Any) -> None:
    rules = getattr(config, "authorization_rules", ())
    if len(rules) > MAX_AUTHORIZATION_RULES:
        raise QuotaExceededError(
            f"'{name}' would have {len(rules)} shared access authorization rules, more than an entity can have "
            f"({MAX_AUTHORIZATION_RULES}, Service Bus quotas: shared access authorization rules per namespace, "
            "queue, or topic); nothing was changed.")


def _is_correlation(rule: RuleConfig) -> bool:
    return rule.filter_type.lower() == "correlation"


def _check_filter_quota(topic: Entity, adding: tuple[RuleConfig, ...], what: str,
                        replaced: list[RuleConfig] | None = None) -> None:
    """QuotaExceeded when ``adding`` would take the topic past its SQL or correlation filters."""
    rules = [rc for sub in topic.subscriptions.values() for rc, _ in sub.rules]
    for rc in replaced or ():
        rules.remove(rc)
    correlation = sum(1 for rc in rules if _is_correlation(rc))
    sql = len(rules) - correlation
    new_correlation = sum(1 for rc in adding if _is_correlation(rc))
    new_sql = len(adding) - new_correlation
    if new_sql and sql + new_sql > MAX_SQL_FILTERS_PER_TOPIC:
        raise QuotaExceededError(
            f"The topic '{topic.path}' already has {sql} SQL filters, the most a topic can have "
            f"({MAX_SQL_FILTERS_PER_TOPIC:,}, Service Bus quotas: SQL filters per topic); {what}.")
    if new_correlation and correlation + new_correlation > MAX_CORRELATION_FILTERS_PER_TOPIC:
        raise QuotaExceededError(
            f"The topic '{topic.path}' already has {correlation} correlation filters, the most a topic can "
            f"have ({MAX_CORRELATION_FILTERS_PER_TOPIC:,}, Service Bus quotas: correlation filters per topic); "
            f"{what}.")


def _rules_of(s: SubscriptionConfig) -> tuple[RuleConfig, ...]:
    return s.rules or (RuleConfig(name=DEFAULT_RULE, filter_type="Sql", sql_expression="1=1"),)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def runtime_record(kind: str, description: dict[str, Any], topic: str | None = None) -> str:
    """The stored form of an entity created at run time with ``description`` (what
    :func:`description_json` gives; a subscription also names its ``topic``), for
    :meth:`Topology.apply_records`. Raises a :class:`BrokerError` naming the problem when the
    description does not make a valid entity of ``kind`` (an unknown or mistyped field, a rule that
    does not compile), so a caller can refuse it before applying anything."""
    desc = json.loads(json.dumps(description), object_hook=typed_from_json)
    desc.pop(_FILE_KEY, None)
    desc.pop(_WITH_TOPIC, None)
    if kind == SUBSCRIPTION:
        desc["topic"] = topic or ""
    try:
        config = config_from(kind, desc)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidOperationError(f"The {kind}'s description is not valid: {exc}.") from None
    if kind == SUBSCRIPTION:
        for rc in _rules_of(config):
            _compiled(str(desc.get("name", "")), rc)  # RuleError (a BrokerError) when it does not compile
    return dumps_typed({**desc, _FILE_KEY: None})
