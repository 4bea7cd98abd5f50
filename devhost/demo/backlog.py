"""Backlog and dead-letter counts of the pipeline's entities, for the dashboard.

Preferred: runtime properties from ``ServiceBusAdministrationClient`` (Azure, and the emulator once
its HTTPS management endpoint runs). Otherwise the counts come from peeking over AMQP, page by page,
up to ``peek_limit`` (shown as "N+" beyond it): exact for the small backlogs a demo has, and it works
against any endpoint the data plane reaches. Both counts come from :mod:`devhost.trigger_backlog`,
the same functions the scale controller uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devhost.trigger_backlog import count_by_peeking, open_receiver, runtime_properties
from shared.topology import QUEUE_LEVELING, QUEUE_PRIORITY_FIFO, SUBSCRIPTION_HIGH, SUBSCRIPTION_LOW, TOPIC

log = logging.getLogger("devhost.demo")


@dataclass(frozen=True)
class Entity:
    label: str
    queue: str | None = None
    topic: str | None = None
    subscription: str | None = None


PIPELINE_ENTITIES = (
    Entity("messages/highPriority", topic=TOPIC, subscription=SUBSCRIPTION_HIGH),
    Entity("messages/lowPriority", topic=TOPIC, subscription=SUBSCRIPTION_LOW),
    Entity("leveling", queue=QUEUE_LEVELING),
)
FIFO_ENTITIES = (Entity("priority-fifo", queue=QUEUE_PRIORITY_FIFO), Entity("leveling", queue=QUEUE_LEVELING))


def pipeline_entities(strategy: str) -> tuple[Entity, ...]:
    """What the demo watches: the FIFO baseline has one queue instead of the two subscriptions."""
    return FIFO_ENTITIES if strategy == "fifo" else PIPELINE_ENTITIES


@dataclass(frozen=True)
class Count:
    active: int
    dead_letter: int
    capped: bool = False  # the peek limit was reached: at least this many

    def show(self, value: int) -> str:
        return f"{value}+" if self.capped and value == self.active else str(value)


class BacklogProbe:
    """``counts()`` -> {label: Count}; ``source`` says where the numbers came from."""

    def __init__(self, client_factory: Callable[[], Any], admin_factory: Callable[[], Any] | None = None,
                 entities: tuple[Entity, ...] = PIPELINE_ENTITIES, peek_limit: int = 5000) -> None:
        self.client_factory = client_factory
        self.admin_factory = admin_factory
        self.entities = entities
        self.peek_limit = peek_limit
        self.source = "peek"
        self._admin: Any = None
        self._client: Any = None
        self._receivers: dict[tuple[str, bool], Any] = {}
        if admin_factory is not None:
            try:
                admin = admin_factory()
                if admin is None:
                    raise RuntimeError("the endpoint has no management API")
                self._admin_counts(admin)
                self._admin = admin
                self.source = "runtime properties"
            except Exception as exc:
                log.info("runtime properties unavailable (%s); counting by peeking", exc)

    def _admin_counts(self, admin: Any) -> dict[str, Count]:
        result = {}
        for entity in self.entities:
            props = runtime_properties(admin, entity.queue, entity.topic, entity.subscription)
            result[entity.label] = Count(props.active_message_count, props.dead_letter_message_count)
        return result

    def _receiver(self, entity: Entity, dead_letter: bool) -> Any:
        key = (entity.label, dead_letter)
        if key not in self._receivers:
            if self._client is None:
                self._client = self.client_factory()
            self._receivers[key] = open_receiver(self._client, entity.queue, entity.topic, entity.subscription,
                                                 dead_letter)
        return self._receivers[key]

    def _peek_count(self, entity: Entity, dead_letter: bool) -> tuple[int, bool]:
        return count_by_peeking(self._receiver(entity, dead_letter), self.peek_limit)

    def counts(self) -> dict[str, Count]:
        if self._admin is not None:
            try:
                return self._admin_counts(self._admin)
            except Exception as exc:
                log.warning("runtime properties failed (%s); counting by peeking from now on", exc)
                self._admin = None
                self.source = "peek"
        result = {}
        for entity in self.entities:
            active, capped = self._peek_count(entity, False)
            dead, _ = self._peek_count(entity, True)
            result[entity.label] = Count(active, dead, capped)
        return result

    def dead_letter_reasons(self, label: str = "leveling", limit: int = 200) -> dict[str, int]:
        """Reason -> count among the first ``limit`` dead-lettered messages of ``label`` (peeked, no lock)."""
        entity = next(e for e in self.entities if e.label == label)
        reasons: dict[str, int] = {}
        try:
            for message in self._receiver(entity, True).peek_messages(max_message_count=limit, sequence_number=1):
                reason = message.dead_letter_reason or "(no reason)"
                reasons[reason] = reasons.get(reason, 0) + 1
        except Exception as exc:
            log.warning("cannot peek the dead-letter queue of %s: %s", label, exc)
        return reasons

    def close(self) -> None:
        for receiver in self._receivers.values():
            try:
                receiver.close()
            except Exception:
                pass
        self._receivers.clear()
        for closable in (self._client, self._admin):
            if closable is not None:
                try:
                    closable.close()
                except Exception:
                    pass
