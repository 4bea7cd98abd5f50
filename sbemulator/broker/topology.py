"""Entities of the namespace: built from the config file, created and deleted at run time
(persisted in the store), and subscription rules.

A mixin of :class:`~sbemulator.broker.core.Broker`: it shares the broker's state (``_entities``,
``store``) and helpers (``_op``, ``_entity``, ``_close_receiver``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

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
from .errors import (
    EntityAlreadyExistsError,
    EntityNotFoundError,
    InvalidOperationError,
    RuleError,
)
from .rules import FilterError, compile_rule


class TopologyMixin:
    _entities: dict[str, Entity]
    _runtime_keys: set[str]
    store: Any

    def _register(self, ent: Entity) -> Entity:
        self._entities[ent.key] = ent
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
        ent = Entity(
            key=q.name.lower(),
            path=q.name,
            kind=QUEUE,
            lock_duration_ms=_ms(q.lock_duration),
            max_delivery_count=q.max_delivery_count,
            ttl_ms=_ms(q.default_message_ttl),
            dead_lettering_on_expiration=q.dead_lettering_on_message_expiration,
            requires_session=q.requires_session,
            forward_to=q.forward_to,
            forward_dead_lettered_to=q.forward_dead_lettered_messages_to,
            max_message_size=q.max_message_size_kb * 1024,
            requires_duplicate_detection=q.requires_duplicate_detection,
            duplicate_window_ms=_ms(q.duplicate_detection_window),
            config=q,
        )
        self._register(ent)
        self._add_sub_queues(ent)
        return ent

    def _add_topic(self, t: TopicConfig) -> Entity:
        ent = Entity(
            key=t.name.lower(),
            path=t.name,
            kind=TOPIC,
            ttl_ms=_ms(t.default_message_ttl),
            max_message_size=t.max_message_size_kb * 1024,
            requires_duplicate_detection=t.requires_duplicate_detection,
            duplicate_window_ms=_ms(t.duplicate_detection_window),
            config=dataclasses.replace(t, subscriptions=()),
        )
        self._register(ent)
        for s in t.subscriptions:
            self._add_subscription(ent, s)
        return ent

    def _add_subscription(self, topic: Entity, s: SubscriptionConfig) -> Entity:
        ttl = _ms(s.default_message_ttl)
        if topic.ttl_ms is not None:
            ttl = min(ttl, topic.ttl_ms)
        ent = Entity(
            key=f"{topic.key}/subscriptions/{s.name.lower()}",
            path=f"{topic.path}/Subscriptions/{s.name}",
            kind=SUBSCRIPTION,
            lock_duration_ms=_ms(s.lock_duration),
            max_delivery_count=s.max_delivery_count,
            ttl_ms=ttl,
            dead_lettering_on_expiration=s.dead_lettering_on_message_expiration,
            dead_lettering_on_filter_exceptions=s.dead_lettering_on_filter_evaluation_exceptions,
            requires_session=s.requires_session,
            forward_to=s.forward_to,
            forward_dead_lettered_to=s.forward_dead_lettered_messages_to,
            max_message_size=topic.max_message_size,
            parent=topic,
            config=s,
        )
        rules = s.rules or (RuleConfig(name="$Default", filter_type="Sql", sql_expression="1=1"),)
        for rc in rules:
            ent.rules.append((rc, self._compile(ent, rc)))
        topic.subscriptions[s.name.lower()] = ent
        self._register(ent)
        self._add_sub_queues(ent)
        return ent

    @staticmethod
    def _compile(ent: Entity, rc: RuleConfig) -> Any:
        try:
            return compile_rule(
                rc.name, rc.filter_type, rc.sql_expression, rc.correlation, rc.action_expression
            )
        except FilterError as exc:
            raise RuleError(f"{ent.path}: rule {rc.name!r}: {exc}") from exc

    # --- runtime entity management (persisted) ---------------------------------------------------
    def create_queue(self, q: QueueConfig) -> EntityRef:
        with self._op():
            self._check_new_name(q.name)
            ent = self._add_queue(q)
            self._runtime_keys.add(ent.key)
            self.store.save_entity(ent.key, QUEUE, _dumps(dataclasses.asdict(q)))
            return ent.ref()

    def create_topic(self, t: TopicConfig) -> EntityRef:
        with self._op():
            self._check_new_name(t.name)
            ent = self._add_topic(dataclasses.replace(t, subscriptions=()))
            self._runtime_keys.add(ent.key)
            self.store.save_entity(ent.key, TOPIC, _dumps(dataclasses.asdict(ent.config)))
            for s in t.subscriptions:
                self.create_subscription(t.name, s)
            return ent.ref()

    def create_subscription(self, topic_name: str, s: SubscriptionConfig) -> EntityRef:
        with self._op():
            topic = self._entities.get(topic_name.lower())
            if topic is None or topic.kind != TOPIC:
                raise EntityNotFoundError(f"The messaging entity '{topic_name}' could not be found.")
            if s.name.lower() in topic.subscriptions:
                raise EntityAlreadyExistsError(
                    f"The subscription '{s.name}' already exists on '{topic.path}'."
                )
            ent = self._add_subscription(topic, s)
            self._persist_subscription(ent)
            return ent.ref()

    def _persist_subscription(self, ent: Entity) -> None:
        self._runtime_keys.add(ent.key)
        data = dataclasses.asdict(ent.config)
        data["topic"] = ent.parent.path if ent.parent else ""
        self.store.save_entity(ent.key, SUBSCRIPTION, _dumps(data))

    def delete_entity(self, path: str) -> None:
        with self._op():
            ent = self._entity(path)
            if ent.kind not in (QUEUE, TOPIC, SUBSCRIPTION):
                raise InvalidOperationError(f"'{ent.path}' cannot be deleted.")
            doomed = [ent, *ent.subscriptions.values()]
            for e in doomed:
                for r in list(e.receivers.values()) + [
                    r for sub in (e.dlq, e.transfer_dlq) if sub for r in sub.receivers.values()
                ]:
                    self._close_receiver(r)
            prefix = ent.key + "/"
            for key in [k for k in self._entities if k == ent.key or k.startswith(prefix)]:
                del self._entities[key]
            if ent.kind == SUBSCRIPTION and ent.parent is not None:
                ent.parent.subscriptions.pop(ent.key.rsplit("/", 1)[1], None)
            self._runtime_keys.discard(ent.key)
            self.store.delete_entity(ent.key)

    def _check_new_name(self, name: str) -> None:
        if name.lower() in self._entities:
            raise EntityAlreadyExistsError(f"The messaging entity '{name}' already exists.")

    def _load_runtime_entities(self) -> None:
        subs: list[dict[str, Any]] = []
        for key, kind, data in self.store.load_entities():
            desc = json.loads(data)
            if kind == SUBSCRIPTION:
                subs.append(desc)
                continue
            if key in self._entities:  # the config file wins
                continue
            if kind == QUEUE:
                self._add_queue(QueueConfig(**desc))
            elif kind == TOPIC:
                desc.pop("subscriptions", None)
                self._add_topic(TopicConfig(**desc))
            self._runtime_keys.add(key)
        for desc in subs:
            topic = self._entities.get(str(desc.pop("topic", "")).lower())
            if topic is None or topic.kind != TOPIC or desc["name"].lower() in topic.subscriptions:
                continue
            desc["rules"] = tuple(RuleConfig(**r) for r in desc.get("rules", ()))
            ent = self._add_subscription(topic, SubscriptionConfig(**desc))
            self._runtime_keys.add(ent.key)

    # --- rules ($management add-rule / remove-rule / enumerate-rules) ------------------------------
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
        with self._op():
            sub = self._entity(path)
            if sub.kind != SUBSCRIPTION:
                raise InvalidOperationError("Rules exist only on subscriptions.")
            if any(rc.name.lower() == rule.name.lower() for rc, _ in sub.rules):
                raise EntityAlreadyExistsError(f"The rule '{rule.name}' already exists.")
            sub.rules.append((rule, self._compile(sub, rule)))
            self._save_rules(sub)

    def remove_rule(self, path: str, name: str) -> None:
        with self._op():
            sub = self._entity(path)
            keep = [(rc, r) for rc, r in sub.rules if rc.name.lower() != name.lower()]
            if len(keep) == len(sub.rules):
                # Service Bus answers 404 with its entity wording; the JS SDK maps that wording to
                # MessagingEntityNotFound.
                raise EntityNotFoundError(f"The messaging entity '{sub.path}/Rules/{name}' could not be found.")
            sub.rules = keep
            self._save_rules(sub)

    def list_rules(self, path: str) -> list[RuleConfig]:
        sub = self._entity(path)
        return [rc for rc, _ in sub.rules]

    def _save_rules(self, sub: Entity) -> None:
        sub.config = dataclasses.replace(sub.config, rules=tuple(rc for rc, _ in sub.rules))
        if sub.key in self._runtime_keys:
            self._persist_subscription(sub)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _dumps(data: Any) -> str:
    # Correlation-filter values added over AMQP may be UUIDs or timestamps: kept as text.
    return json.dumps(data, default=str)
