"""AutoDeleteOnIdle: a queue, topic or subscription that nothing has used for its idle interval is
deleted, as Service Bus deletes temporary entities ("Message expiration (Time to Live)", sections
"Temporary entities" and "Idleness"; the minimum interval is 5 minutes, which the management API
enforces).

What counts as use, per that page's table: for a queue, sends, receives, updates of the queue,
scheduled messages and browse (peek); for a topic, sends, updates of the topic, scheduled messages
and operations on its subscriptions; for a subscription, receives, updates of the subscription, new
rules and browse. The message flow stamps ``Entity.active_ms`` where those happen (a message
accepted, a take, a peek, a receive by sequence number, cancelling a scheduled message) and the
broker facade where the management operations happen, one attribute store each, so the per-message
path gains no call. This component keeps one :class:`~sbemulator.broker.timers.IdleDeletion` timer
per entity that has an interval, on the broker's clock (a manual clock moves it like every other
timer). When it fires it reads the latest stamp of the entity and of what belongs to it (its
dead-letter queues; a topic's subscriptions and theirs): still in use (or with a receiver attached,
or a scheduled message waiting) it is set again from that time, otherwise the entity is deleted the
way the management API deletes it (persisted; its receivers detached with ``amqp:not-found``).

Imports ``entity``, ``model`` and ``timers``; the deletion itself is handed in (the topology's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from ..model import MessageState
from .entity import TOPIC, Entity
from .timers import IdleDeletion, Timers

log = logging.getLogger(__name__)


class AutoDelete:
    def __init__(self, entities: dict[str, Entity], timers: Timers, delete: Callable[[str], None],
                 now_ms: Callable[[], int]) -> None:
        self._entities = entities
        self._timers = timers
        self._delete = delete
        self._now = now_ms

    def arm_all(self) -> None:
        """Every entity with an interval gets its timer (start-up, reset, a snapshot import)."""
        for ent in list(self._entities.values()):
            self.arm(ent)

    def arm(self, ent: Entity, *, touched: bool = False) -> None:
        """(Re)start ``ent``'s idle timer from its last use; ``touched``: it is being used now (created,
        updated). None without an interval (TimeSpan.MaxValue, the default)."""
        now = self._now()
        if touched or not ent.active_ms:
            ent.active_ms = now  # creation, and a start (the clock is not stored), count as use
        if ent.idle_ms is None:
            ent.idle_timer = None
            return
        self._set(ent, _last_use(ent) + ent.idle_ms)

    def arm_path(self, path: str) -> None:
        """After a create or update through the management plane: the entity (a topic: and its
        subscriptions) is in use now."""
        ent = self._entities.get(path.lower())
        if ent is None:
            return
        self.arm(ent, touched=True)
        for sub in list(ent.subscriptions.values()):
            self.arm(sub, touched=True)

    def touch(self, ent: Entity) -> None:
        """A management operation used ``ent`` (renewing a lock, session state, rules)."""
        ent.active_ms = self._now()

    def fired(self, ent: Entity, now: int) -> None:
        """The timer of ``ent`` came due: delete it if nothing used it for its whole interval."""
        idle = ent.idle_ms
        if idle is None:
            return
        if _in_use(ent):
            ent.active_ms = now
        due = _last_use(ent) + idle
        if due > now:
            self._set(ent, due)
            return
        ent.idle_timer = None
        log.info("%s: deleted after %.0f s without use (AutoDeleteOnIdle)", ent.path, idle / 1000)
        self._delete(ent.path)

    def _set(self, ent: Entity, deadline: int) -> None:
        timer = IdleDeletion(deadline, ent, self)
        ent.idle_timer = timer
        self._timers.add(timer)


def _parts(ent: Entity) -> Iterator[Entity]:
    """The entity and what belongs to it: its dead-letter queues; a topic's subscriptions and theirs."""
    for e in (ent, *(ent.subscriptions.values() if ent.kind == TOPIC else ())):
        for c in (e, e.dlq, e.transfer_dlq):
            if c is not None:
                yield c


def _last_use(ent: Entity) -> int:
    return max(c.active_ms for c in _parts(ent))


def _in_use(ent: Entity) -> bool:
    """A receiver attached (a receive request pending) or a scheduled message waiting ("No scheduled
    messages" is part of idleness)."""
    if any(c.receivers for c in _parts(ent)):
        return True
    # a queue's and a topic's scheduled messages wait in the entity itself (a topic's until they fan out)
    return any(m.state == MessageState.SCHEDULED for m in ent.messages.values())
