"""The message broker: entities, locks, delivery counts, TTL, scheduling, forwarding, sessions.

Synchronous and single-threaded: the asyncio server calls it from the event loop. It does no
I/O except through the :class:`~sbemulator.store.base.Store` and reads time only from the
injected ``clock`` (seconds, like ``time.time``), so tests move time without sleeping.

Server-facing API (see also :class:`~sbemulator.broker.receiver.Receiver`)::

    broker = Broker(config, store, clock=time.time)
    broker.resolve(path) -> EntityRef                      # EntityNotFoundError
    broker.send(path, [IncomingMessage, ...])              # all-or-nothing per call
    broker.open_receiver(path, ReceiveMode.PEEK_LOCK, on_available, session_id=None,
                         next_available_session=False) -> Receiver
    broker.commit()                                        # group commit, before sending accepts
    broker.next_deadline() -> float | None                 # seconds on the clock's scale
    broker.on_deadline_changed = callback                  # a new earliest timer exists
    broker.tick()                                          # run every timer that is due
    # $management
    broker.peek(path, from_sequence_number, count, session_id=None) -> [BrokerMessage]
    broker.renew_lock(path, [UUID]) -> [locked_until_ms]
    broker.update_disposition(path, [UUID], "completed"|"abandoned"|"defered"|"suspended", ...)
    broker.receive_deferred(path, [seq], mode, session_id=None) -> [Delivery]
    broker.schedule(path, [IncomingMessage]) -> [seq]
    broker.cancel_scheduled(path, [seq])
    broker.get_session_state(path, sid) / set_session_state(path, sid, bytes | None)
    broker.renew_session_lock(path, sid) -> locked_until_ms
    broker.list_sessions(path, skip=0, top=..., updated_after_ms=None) -> [sid]
    broker.add_rule / set_rule / remove_rule / list_rules (subscriptions)
    # management plane (persisted; see topology for what survives a restart, inspection for the rest)
    broker.create_queue / create_topic / create_subscription / update_entity / delete_entity
    broker.entity_views(kind=None, topic=None) / entity_view(path) / find_entity(path) -> EntityView
    broker.counts(path) / session_views(path) / now_ms()
    broker.purge(path, sub_queues=True) / reset() / resubmit_dead_lettered(path, seqs=None) -> Resubmission
    broker.begin_purge(path, sub_queues=True) -> PurgeJob (the same purge in slices: broker/purge.py)

The broker is a facade over components with explicit dependencies, each testable alone and none
reaching into another's state (tests/unit/test_broker_structure.py checks the imports)::

    wakeups     Wakeups      receivers to tell, once the state is consistent (no dependencies)
    timers      Timers       lock, TTL, schedule and session-lock timers, one class per kind
    topology    Topology     owns the entities: built from the config file, changed at run time, stored
    flow        MessageFlow  where messages go (send, fan-out, forward, dead-letter, expiry, take, return);
                             owns sessions (Sessions: session locks and state)
    settlement  Settlement   settling peek-locked messages (model.Outcome), lock checks, renewal
    inspection  Inspection   entity views and counts, purge, reset, resubmitting dead-lettered messages
    idle        AutoDelete   AutoDeleteOnIdle: an idle-deletion timer per entity with an interval

``core`` -> ``inspection``, ``settlement``, ``flow`` -> ``sessions``, ``topology`` -> ``timers``,
``wakeups``, ``receiver`` -> ``entity`` -> ``sbemulator.model``; ``errors``, ``views`` and ``rules``
(-> ``sbemulator.filters``) are leaves. The gateway, ``$management``, the admin plane and the console see only
:class:`~sbemulator.broker.api.BrokerAPI`, which this class implements.

Delivery counts, sequence numbers and what each operation does to a message are described in
:mod:`sbemulator.broker.flow`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sbemulator.config import (
    AuthorizationRuleConfig,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)

from ..model import BrokerMessage, Delivery, IncomingMessage, Outcome, ReceiveMode
from ..scheduling import DEFAULT_SLICES, Budget, Slices
from .entity import NO_LIMIT, EntityRef
from .errors import RuleError
from .flow import MessageFlow
from .idle import AutoDelete
from .inspection import Inspection
from .purge import PurgeJob
from .receiver import Receiver, ReceiverOps
from .settlement import Settlement
from .timers import Timers
from .topology import Topology, normalize
from .views import EntityView, Resubmission, SessionView
from .wakeups import Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

    from .api import BrokerAPI


class Broker:
    def __init__(self, config: NamespaceConfig, store: Store, clock: Callable[[], float] = time.time,
                 slices: Slices = DEFAULT_SLICES) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._wakeups = wakeups = Wakeups()
        self._op = wakeups.operation
        self._timers = timers = Timers(slices)
        # The topology ends the receivers of an entity it deletes or suspends: the flow's job, and the
        # flow reads the topology's entities, so the topology is told through a late-bound call.
        self._topology = topology = Topology(config, store, wakeups, lambda ent, error: flow.end_receivers(ent, error))
        self.drops = topology.drops  # the same list, kept by the topology (BrokerAPI.drops)
        self._flow = flow = MessageFlow(store, clock, topology.entities, topology.entity, timers, wakeups, slices)
        flow.namespace = config.name
        self._sessions = sessions = flow.sessions
        self._settlement = settlement = Settlement(store, clock, topology.entity, flow, sessions, wakeups)
        self._inspection = Inspection(topology, flow, clock, wakeups)
        flow.receiver_ops = ReceiverOps(
            take=flow.take,
            settle=settlement.settle,
            complete=settlement.complete,
            check_lock=settlement.check_lock,
            close=flow.close_receiver,
            acquire_session=sessions.try_acquire_session,
        )
        flow.load()
        # AutoDeleteOnIdle (idle.py): deletes an entity the way the management API does
        self._idle = AutoDelete(topology.entities, timers, topology.delete_entity, self._now)
        self._idle.arm_all()

    def _now(self) -> int:
        return int(self.clock() * 1000)

    # ================================================================= entities
    def resolve(self, path: str) -> EntityRef:
        """Case-insensitive; accepts "q", "t", "t/Subscriptions/s", "<x>/$DeadLetterQueue",
        "<x>/$Transfer/$DeadLetterQueue" (a leading "/" or "amqps://host/" prefix is stripped)."""
        return self._topology.entity(path).ref()

    def entity_paths(self) -> list[str]:
        return [e.path for e in self._topology.entities.values()]

    def message_count(self, path: str) -> int:
        return self._topology.entity(path).message_count()

    def describe(self, path: str) -> Any:
        """The QueueConfig / TopicConfig / SubscriptionConfig an entity was built from (rules current)."""
        return self._topology.entity(path).config

    def create_queue(self, q: QueueConfig) -> EntityRef:
        ref = self._topology.create_queue(q)
        self._idle.arm_path(ref.path)
        return ref

    def create_topic(self, t: TopicConfig) -> EntityRef:
        ref = self._topology.create_topic(t)
        self._idle.arm_path(ref.path)
        return ref

    def create_subscription(self, topic_name: str, s: SubscriptionConfig) -> EntityRef:
        ref = self._topology.create_subscription(topic_name, s)
        self._idle.arm_path(ref.path)
        return ref

    def update_entity(self, path: str, config: QueueConfig | TopicConfig | SubscriptionConfig) -> EntityRef:
        """See :meth:`Topology.update_entity` (an update is use of the entity: AutoDeleteOnIdle)."""
        ref = self._topology.update_entity(path, config)
        self._idle.arm_path(ref.path)
        return ref

    def _touch(self, path: str) -> None:
        """A management operation uses the entity (AutoDeleteOnIdle, idle.py); an unknown path is the
        operation's own error to report."""
        ent = self._topology.entities.get(normalize(path))
        if ent is not None:
            self._idle.touch(ent)

    def delete_entity(self, path: str) -> None:
        self._topology.delete_entity(path)

    def drop_step(self, budget: Budget | None = None) -> None:
        self._topology.drop_step(budget)

    def is_runtime_entity(self, path: str) -> bool:
        """True for an entity the config file does not declare (created at run time)."""
        return self._topology.is_runtime_entity(path)

    def authorization_rules(self, entity_path: str) -> list[AuthorizationRuleConfig]:
        """See :meth:`Topology.authorization_rules`."""
        return self._topology.authorization_rules(entity_path)

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
        """See :meth:`Topology.add_rule`."""
        self._touch(path)  # a new rule is use of the subscription
        self._topology.add_rule(
            path,
            rule,
            filter_type=filter_type,
            sql_expression=sql_expression,
            correlation=correlation,
            action_expression=action_expression,
        )

    def set_rule(self, path: str, rule: RuleConfig) -> bool:
        self._touch(path)
        return self._topology.set_rule(path, rule)

    def remove_rule(self, path: str, name: str) -> None:
        self._topology.remove_rule(path, name)

    def list_rules(self, path: str) -> list[RuleConfig]:
        return self._topology.list_rules(path)

    def begin_change(self) -> None:
        """See :meth:`Topology.begin_change`."""
        self._topology.begin_change()

    def end_change(self, keep: bool) -> None:
        """See :meth:`Topology.end_change`."""
        self._topology.end_change(keep)

    # ================================================================= messaging
    def send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Accept a batch (all or nothing); see :meth:`MessageFlow.send`."""
        self._flow.send(path, messages)

    def withdraw(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Take back a send the store could not write; see :meth:`MessageFlow.withdraw`."""
        self._flow.withdraw(path, messages)

    def check_send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Raise what :meth:`send` would refuse these messages with, without sending them (a
        transaction checks its staged sends before applying any)."""
        self._flow.check_send(path, messages)

    def schedule(self, path: str, messages: Iterable[IncomingMessage]) -> list[int]:
        return self._flow.schedule(path, messages)

    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None:
        self._flow.cancel_scheduled(path, sequence_numbers)

    def open_receiver(
        self,
        path: str,
        mode: ReceiveMode,
        on_available: Callable[[], None],
        session_id: str | None = None,
        next_available_session: bool = False,
        max_receivers: int | None = None,
    ) -> Receiver:
        """See :meth:`MessageFlow.open_receiver`."""
        return self._flow.open_receiver(path, mode, on_available, session_id, next_available_session, max_receivers)

    def receive_deferred(
        self, path: str, sequence_numbers: Iterable[int], mode: ReceiveMode, session_id: str | None = None
    ) -> list[Delivery]:
        return self._flow.receive_deferred(path, sequence_numbers, mode, session_id)

    def peek(
        self, path: str, from_sequence_number: int, count: int, session_id: str | None = None
    ) -> list[BrokerMessage]:
        """See :meth:`MessageFlow.peek`."""
        return self._flow.peek(path, from_sequence_number, count, session_id)

    def update_disposition(
        self,
        path: str,
        lock_tokens: Iterable[uuid.UUID],
        status: str | Outcome,
        dead_letter_reason: str | None = None,
        dead_letter_description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        """$management update-disposition: completed, abandoned, defered (sic) or suspended."""
        self._touch(path)
        self._settlement.update_disposition(
            path, lock_tokens, status, dead_letter_reason, dead_letter_description, properties_to_modify, session_id
        )

    def check_locks(self, path: str, lock_tokens: Iterable[uuid.UUID], session_id: str | None = None) -> None:
        """Raise the lock error :meth:`update_disposition` would raise for these tokens now, without
        settling (a transaction checks its staged settlements before applying any)."""
        self._settlement.check_locks(path, lock_tokens, session_id)

    def undo_point(self, path: str, lock_tokens: Iterable[uuid.UUID | bytes] = (),
                   session_id: str | None = None) -> Callable[[], None]:
        """What puts back, as they are now, the messages these lock tokens lock (locked by their
        receivers) and the session's state: a transaction's settlements and session state, taken back
        when its commit could not be written (see :meth:`Settlement.undo_point`)."""
        undo_messages = self._settlement.undo_point(path, lock_tokens)
        undo_state = self._sessions.state_undo_point(path, session_id) if session_id is not None else None

        def undo() -> None:
            if undo_state is not None:
                undo_state()
            undo_messages()

        return undo

    def renew_lock(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> list[int]:
        self._touch(path)
        return self._settlement.renew_lock(path, lock_tokens)

    # ================================================================= sessions
    def renew_session_lock(self, path: str, session_id: str) -> int:
        self._touch(path)
        return self._sessions.renew_session_lock(path, session_id)

    def get_session_state(self, path: str, session_id: str) -> bytes | None:
        self._touch(path)
        return self._sessions.get_session_state(path, session_id)

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None:
        self._touch(path)
        self._sessions.set_session_state(path, session_id, state)

    def list_sessions(self, path: str, skip: int = 0, top: int = 2**31 - 1,
                      updated_after_ms: int | None = None) -> list[str]:
        """See :meth:`Sessions.list_sessions` (get-message-sessions)."""
        return self._sessions.list_sessions(path, skip, top, updated_after_ms)

    # ================================================================= inspection
    def entity_views(self, kind: str | None = None, topic: str | None = None) -> list[EntityView]:
        return self._inspection.entity_views(kind, topic)

    def entity_view(self, path: str) -> EntityView:
        return self._inspection.entity_view(path)

    def find_entity(self, path: str) -> EntityView | None:
        return self._inspection.find_entity(path)

    def counts(self, path: str) -> dict[str, int]:
        return self._inspection.counts(path)

    def session_views(self, path: str) -> list[SessionView]:
        return self._inspection.session_views(path)

    def now_ms(self) -> int:
        """The broker's clock in epoch milliseconds: what enqueue, lock and expiry times are measured by."""
        return self._now()

    def purge(self, path: str, *, sub_queues: bool = True) -> int:
        """See :meth:`Inspection.purge`."""
        return self._inspection.purge(path, sub_queues=sub_queues)

    def begin_purge(self, path: str, *, sub_queues: bool = True) -> PurgeJob:
        """See :meth:`Inspection.begin_purge`."""
        return self._inspection.begin_purge(path, sub_queues=sub_queues)

    def reset(self) -> dict[str, int]:
        result = self._inspection.reset()
        self._idle.arm_all()
        return result

    def begin_reset(self) -> tuple[int, list[PurgeJob]]:
        """See :meth:`Inspection.begin_reset`."""
        result = self._inspection.begin_reset()
        self._idle.arm_all()
        return result

    def resubmit_dead_lettered(self, path: str, sequence_numbers: Iterable[int] | None = None) -> Resubmission:
        """See :meth:`Inspection.resubmit_dead_lettered`."""
        return self._inspection.resubmit_dead_lettered(path, sequence_numbers)

    def replace_state(self, source: Store) -> None:
        """Replace the namespace's state with what ``source`` holds, as if the broker had started from it
        (a snapshot imported into the running emulator, runtime/snapshot.py): back to exactly the config
        file (:meth:`reset`: runtime entities deleted, every message gone), session states and the
        duplicate-detection history dropped, then ``source``'s entity descriptions applied the way a
        restart applies the store's and its messages, sequence numbers and session states loaded the
        way a restart loads them. Everything loaded is written to this broker's store too (durable:
        the next start has it). The caller checks ``source`` first: this does not stop half-way for
        what a start-up would accept."""
        with self._op:
            self._inspection.reset()
            self._flow.forget_history()
            self._topology.apply_records(source.load_entities(), persist=True)
            self._flow.load(source, persist=True)
            self._idle.arm_all()

    # ================================================================= durability and time
    def commit(self) -> None:
        """Make every change so far durable (one transaction)."""
        self.store.commit()

    def commit_wanted(self) -> bool:
        """Whether work done in slices should stop here so that what is buffered is committed first
        (:meth:`~sbemulator.store.base.Store.commit_wanted`)."""
        return self.store.commit_wanted()

    def close(self) -> None:
        self.store.close()

    @property
    def on_deadline_changed(self) -> Callable[[], None] | None:
        """Set by the server to wake its timer task when a new timer becomes the earliest one
        (called synchronously; it must not call back into the broker)."""
        return self._timers.on_deadline_changed

    @on_deadline_changed.setter
    def on_deadline_changed(self, callback: Callable[[], None] | None) -> None:
        self._timers.on_deadline_changed = callback

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has work (clock seconds), or None."""
        deadline = self._timers.next_deadline()
        return deadline / 1000.0 if deadline is not None else None

    def tick(self, budget: Budget | None = None) -> bool:
        """Process the due timers: lock expiry, TTL expiry, scheduled activation, session-lock expiry.
        With a ``budget`` (sbemulator/scheduling/), stop once it is spent and return True if due timers
        remain (the runtime's scheduler commits, yields to the event loop, then ticks again); without
        it, run all of them."""
        with self._op:
            return self._timers.run_due(self._now(), budget)


if TYPE_CHECKING:

    def _implements_the_api(broker: Broker) -> BrokerAPI:
        return broker  # mypy: the facade is everything the rest of the emulator may call


__all__ = ["NO_LIMIT", "Broker", "EntityRef", "RuleError"]
