"""What the management plane needs from the broker beyond messaging: entity views with counts,
purge, reset to the config file, and resubmitting dead-lettered messages.

A component of the broker (:class:`~sbemulator.broker.core.Broker` builds it and offers its methods):
it reads the topology's entities and moves messages through the message flow (the ``Flow`` Protocol
below). Imports ``entity``, ``errors``, ``model``, ``purge``, ``views``, ``wakeups`` and ``topology``; nothing
from ``core`` or ``flow``. The admin package (Atom and ARM APIs, the web console) goes through the
broker's API (``sbemulator.broker.api.BrokerAPI``), never through broker internals:

=============================================  =====================================================
``entity_views(kind=None, topic=None)``         queues, topics, subscriptions (``topic``: its
                                                subscriptions) as :class:`EntityView`, with counts
``entity_view(path)`` / ``find_entity(path)``   one entity (EntityNotFoundError / None)
``create_queue/topic/subscription(config)``     create (persisted); ``update_entity(path, config)``
``delete_entity(path)``                         change or delete (persisted); see ``topology``
``add_rule/set_rule/remove_rule/list_rules``    subscription rules (persisted)
``peek(path, from_sequence_number, count)``     messages in every state, without locking; page on
                                                with ``last.sequence_number + 1``; the path may be
                                                a sub-queue (``orders/$DeadLetterQueue``, see
                                                ``views.SUB_QUEUES``)
``session_views(path)``                         sessions with messages, state or a lock holder
``now_ms()``                                    the broker's clock (the times in views and messages)
``send(path, [IncomingMessage])``               send as a client would (``sbemulator.gateway.deliveries``
                                                turns an encoded AMQP message into IncomingMessage)
``resubmit_dead_lettered(path, seqs=None)``     dead-lettered messages back to their entity
``purge(path, sub_queues=True)`` / ``reset()``  remove messages / back to the config file
``begin_purge(path, sub_queues=True)``         a purge in slices (``purge.PurgeJob``)
=============================================  =====================================================

To send from outside AMQP (a console's "send message"), build the IncomingMessage from an encoded
message so that receivers get exactly what a client would have sent::

    from sbemulator.amqp.message import encode_message
    from sbemulator.amqp.performatives import Properties
    from sbemulator.gateway.deliveries import incoming_messages
    payload = encode_message(properties=Properties(message_id="m1", content_type="text/plain"),
                             application_properties={"k": "v"}, data=b"hello")
    broker.send("orders", incoming_messages(payload, 0))

Every call that changes state must be followed by ``commit()`` (the server does it per batch; the
admin plane after each request) to be durable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from ..descriptions import KINDS
from ..model import BrokerMessage, MessageState
from .entity import DEAD_LETTER, QUEUE, SUBSCRIPTION, TOPIC, TRANSFER_DEAD_LETTER, Entity
from .errors import EntityNotFoundError, InvalidOperationError, MessageNotFoundError
from .purge import MessageStore, PurgeJob
from .topology import Topology
from .views import EntityView, MessageCounts, Resubmission, SessionView
from .wakeups import Wakeups

_MAIN_KINDS = KINDS  # queues, topics, subscriptions: not their sub-queues
_DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")


class Flow(Protocol):
    """What inspection needs from the message flow."""

    def remove(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def accept(self, target: Entity, msg: BrokerMessage, now: int) -> int: ...

    def deliver_to_subscription(self, sub: Entity, msg: BrokerMessage, now: int) -> None: ...

    @property
    def store(self) -> MessageStore:
        """Where a purge's slices delete their messages' rows."""
        ...

    def insert(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def queue(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def take_back(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def unpage(self, ent: Entity, sequence_numbers: Iterable[int]) -> None: ...

    def page_in_next(self, ent: Entity) -> bool: ...


class Inspection:
    def __init__(self, topology: Topology, flow: Flow, clock: Callable[[], float], wakeups: Wakeups) -> None:
        self._topology = topology
        self._entities = topology.entities
        self._entity = topology.entity
        self._flow = flow
        self.clock = clock
        self._op = wakeups.operation

    def _now(self) -> int:
        return int(self.clock() * 1000)

    # --- views -------------------------------------------------------------------------------------
    def entity_views(self, kind: str | None = None, topic: str | None = None) -> list[EntityView]:
        """Queues, topics and subscriptions (in creation order), or only one ``kind``, or the
        subscriptions of ``topic`` (EntityNotFoundError if there is no such topic)."""
        if topic is not None:
            parent = self._entity(topic)
            if parent.kind != TOPIC:
                raise EntityNotFoundError(f"The topic '{topic}' could not be found.")
            return [self._view(s) for s in parent.subscriptions.values()]
        wanted = _MAIN_KINDS if kind is None else (kind,)
        return [self._view(e) for e in self._entities.values() if e.kind in wanted]

    def entity_view(self, path: str) -> EntityView:
        """One queue, topic or subscription; EntityNotFoundError otherwise (sub-queues included)."""
        view = self.find_entity(path)
        if view is None:
            raise EntityNotFoundError(f"The messaging entity '{path}' could not be found.")
        return view

    def find_entity(self, path: str) -> EntityView | None:
        try:
            ent = self._entity(path)
        except EntityNotFoundError:
            return None
        return self._view(ent) if ent.kind in _MAIN_KINDS else None

    def _view(self, ent: Entity) -> EntityView:
        containers = [c for c in (ent, ent.dlq, ent.transfer_dlq) if c is not None]
        size = 0
        last = 0
        for c in containers:
            for m in c.messages.values():
                size += m.size
                if m.enqueued_time_ms > last:
                    last = m.enqueued_time_ms
            if c.cold is not None:
                size += c.cold.bytes
                last = max(last, c.cold.last_enqueued_ms())
        if ent.kind != SUBSCRIPTION:
            # A queue's or topic's SizeInBytes is what counts against its MaxSizeInMegabytes: a topic's is
            # what its subscriptions hold (each subscription's copy counts) and its scheduled messages.
            size = ent.held_bytes
        return EntityView(
            kind=ent.kind,
            path=ent.path,
            name=ent.path.rsplit("/", 1)[1] if ent.kind == SUBSCRIPTION else ent.path,
            topic=ent.parent.path if ent.kind == SUBSCRIPTION and ent.parent is not None else None,
            config=ent.config,
            counts=_counts(ent),
            size_in_bytes=size,
            last_enqueued_ms=last,
            subscription_count=len(ent.subscriptions),
            rules=tuple(rc for rc, _ in ent.rules),
            requires_session=ent.requires_session,
            created_at_runtime=ent.key not in self._topology.file_entities,
        )

    def counts(self, path: str) -> dict[str, int]:
        """Message counts by kind, as the management API reports them (CountDetails)."""
        return _counts(self._entity(path)).as_dict()

    def session_views(self, path: str) -> list[SessionView]:
        """The sessions of a queue or subscription that hold messages or state, or whose lock a receiver
        holds (a console shows them; ``list_sessions`` is the narrower get-message-sessions)."""
        ent = self._entity(path)
        now = self._now()
        return [
            SessionView(
                id=s.id,
                message_count=s.count,
                locked_until_ms=s.locked_until_ms if s.owner is not None and s.locked_until_ms > now else None,
                state=s.state,
            )
            for s in ent.sessions.values()
            if s.count > 0 or s.state is not None or s.owner is not None
        ]

    def now_ms(self) -> int:
        """The broker's clock in epoch milliseconds: what enqueue, lock and expiry times are measured by."""
        return self._now()

    # --- purge and reset ---------------------------------------------------------------------------
    def purge(self, path: str, *, sub_queues: bool = True) -> int:
        """Remove every message of an entity and of its dead-letter sub-queues (a topic: its scheduled
        messages and every subscription's); a sub-queue path purges only that sub-queue, and
        ``sub_queues=False`` only the entity's own messages (active, deferred, scheduled: not its
        dead-letter queues, nor a topic's subscriptions). Locks held on them are lost. Returns how
        many messages were removed. All in one call: :meth:`begin_purge` is the same in slices."""
        job = self.begin_purge(path, sub_queues=sub_queues)
        with self._op:
            return job.run()

    def begin_purge(self, path: str, *, sub_queues: bool = True) -> PurgeJob:
        """:meth:`purge` as a :class:`~.purge.PurgeJob`: the messages are out of the entity when this
        returns (what was there now, not what is sent later), and dropped by the job's slices
        (``step`` / ``run_async``), so a purge of 100,000 never holds the event loop for long."""
        with self._op:
            ent = self._entity(path)
            if ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER) or not sub_queues:
                containers = [ent]
            else:
                containers = [
                    c for e in (ent, *ent.subscriptions.values()) for c in (e, e.dlq, e.transfer_dlq) if c is not None
                ]
            job = PurgeJob(self._flow.store, containers)
            job.detach()
            return job

    def reset(self) -> dict[str, int]:
        """Back to exactly the config file: runtime entities deleted, file entities recreated or
        reconfigured as declared, every message gone. Returns ``{"deleted": n, "purged": m}``."""
        deleted, jobs = self.begin_reset()
        with self._op:
            return {"deleted": deleted, "purged": sum(job.run() for job in jobs)}

    def begin_reset(self) -> tuple[int, list[PurgeJob]]:
        """:meth:`reset` with its purges in slices: the topology is the config file's and every entity
        empty when this returns; the jobs drop the messages (``run_async``). Returns how many entities were
        deleted, and the jobs."""
        with self._op:
            deleted = self._topology.restore_file_topology()
            jobs = [self.begin_purge(e.path) for e in list(self._entities.values()) if e.kind in (QUEUE, TOPIC)]
            return deleted, jobs

    # --- dead letters ------------------------------------------------------------------------------
    def resubmit_dead_lettered(self, path: str, sequence_numbers: Iterable[int] | None = None) -> Resubmission:
        """Send dead-lettered messages back to the queue or subscription they were dead-lettered from,
        as new messages: a new sequence number and enqueued time, delivery count 0, the dead-letter
        reason and description removed (as "Message sessions" describes for messages moved back for
        reprocessing: the original order is lost). A subscription's messages go back to that
        subscription only, not through the topic. ``path`` is the entity (its dead-letter queue is
        meant) or one of its sub-queues; ``sequence_numbers`` selects messages (all of them when None;
        MessageNotFoundError for a missing one, and then nothing moves). Messages a receiver holds
        locked are left where they are (``skipped_locked``): moving them would break its settlement.
        ``sequence_numbers`` of the result are the new ones (in the target; for a forwarding entity, in
        the entity itself)."""
        with self._op:
            ent = self._entity(path)
            source: Entity | None
            owner: Entity | None
            if ent.kind in (DEAD_LETTER, TRANSFER_DEAD_LETTER):
                source, owner = ent, ent.parent
            elif ent.kind in (QUEUE, SUBSCRIPTION):
                source, owner = ent.dlq, ent
            else:
                raise InvalidOperationError(f"'{ent.path}' has no dead-letter queue of its own.")
            assert source is not None and owner is not None
            now = self._now()
            out: list[int] = []
            skipped: list[int] = []
            if sequence_numbers is None:
                # Only what the queue holds now: a resubmitted message dead-lettered again on its way
                # (a session subscription refusing it) comes back with a newer number and stays.
                cold = source.cold
                last = max(max(source.messages, default=0), cold.seqs[-1] if cold is not None else 0)
                self._resubmit(source, owner, [m for _, m in sorted(source.messages.items())], now, out, skipped)
                # A dead-letter queue's paged-out messages (broker/paging.py) move a store read at a time,
                # so a large one is never held in memory whole.
                while (cold := source.cold) is not None and cold.first() <= last and self._flow.page_in_next(source):
                    held = set(skipped)
                    chosen = [m for s, m in sorted(source.messages.items()) if s <= last and s not in held]
                    self._resubmit(source, owner, chosen, now, out, skipped)
                return Resubmission(tuple(out), tuple(skipped))
            wanted = list(sequence_numbers)
            self._flow.unpage(source, wanted)
            chosen = []
            for seq in wanted:
                msg = source.messages.get(seq)
                if msg is None:
                    raise MessageNotFoundError(
                        f"The dead-lettered message with sequence number {seq} was not found in '{source.path}'."
                    )
                chosen.append(msg)
            self._resubmit(source, owner, chosen, now, out, skipped)
            return Resubmission(tuple(out), tuple(skipped))

    def _resubmit(self, source: Entity, owner: Entity, chosen: list[BrokerMessage], now: int, out: list[int],
                  skipped: list[int]) -> None:
        """Move the ``chosen`` messages of ``source`` back to ``owner`` as new ones (their new numbers
        appended to ``out``); the locked ones stay (their numbers appended to ``skipped``)."""
        skipped.extend(m.sequence_number for m in chosen if m.locked)
        moved = [m for m in chosen if not m.locked]
        self._topology.record(lambda: self._unresubmit(source, moved))
        for msg in moved:
            self._flow.remove(source, msg)
            fresh = _as_new(msg)
            if owner.kind == SUBSCRIPTION:
                self._flow.deliver_to_subscription(owner, fresh, now)
                out.append(fresh.sequence_number)
            else:
                out.append(self._flow.accept(owner, fresh, now))

    def _unresubmit(self, source: Entity, moved: list[BrokerMessage]) -> None:
        """Take back a resubmission whose commit failed (a change, topology.begin_change): the new
        messages (found among the store's pending writes by their shared properties, as a withdrawn send
        is) leave wherever they went, and the dead-lettered ones are back in ``source``, available."""
        originals = {id(m.properties_raw): m for m in moved}
        for key, _, msg in list(self._topology.store.pending_messages()):
            original = originals.get(id(msg.properties_raw))
            ent = self._topology.entities.get(key)
            if original is not None and msg is not original and ent is not None:
                self._flow.take_back(ent, msg)  # in memory, or only indexed (a paged backlog)
        for msg in moved:
            if source.messages.get(msg.sequence_number) is None:
                self._flow.insert(source, msg)
                self._flow.queue(source, msg)


def _counts(ent: Entity) -> MessageCounts:
    by_state = [0, 0, 0]
    for m in ent.messages.values():
        by_state[m.state] += 1
    if ent.cold is not None:
        by_state[MessageState.ACTIVE] += len(ent.cold)
    return MessageCounts(
        active=by_state[MessageState.ACTIVE],
        deferred=by_state[MessageState.DEFERRED],
        scheduled=by_state[MessageState.SCHEDULED],
        dead_letter=ent.dlq.message_count() if ent.dlq is not None else 0,
        transfer_dead_letter=ent.transfer_dlq.message_count() if ent.transfer_dlq is not None else 0,
    )


def _as_new(msg: BrokerMessage) -> BrokerMessage:
    fresh = msg.copy()
    for name in _DEAD_LETTER_PROPERTIES:
        fresh.application_properties.pop(name, None)
    fresh.dead_letter_reason = fresh.dead_letter_description = fresh.dead_letter_source = None
    fresh.state = MessageState.ACTIVE
    fresh.delivery_count = 0
    fresh.hops = 0
    fresh.scheduled_enqueue_time_ms = None
    fresh.enqueue_sequence_number = None
    fresh.expires_at_ms = None
    return fresh
