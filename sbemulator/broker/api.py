"""The broker as the rest of the emulator sees it: one small interface per client, the way Azurite's
``IQueueMetadataStore`` is all its handlers know of its metadata store. ``GatewayBroker`` is what the
gateway calls (AMQP links, ``$management``, transactions), ``AdminBroker`` what the admin plane calls
(the Atom and ARM APIs, the console), ``RuntimeBroker`` what the server and its background jobs call
(commits, timers, deferred work). Each is made of the section Protocols below (``Lookup``, ``Messages``,
``Views`` and so on), and ``BrokerAPI`` is all of them: what the composition root holds.
:class:`~sbemulator.broker.core.Broker` implements it (mypy checks that, see ``core``, and checks each
client against its own interface); a test double only needs the methods its test calls.

Imports only leaf modules of the broker (``entity``, ``model``, ``receiver``, ``views``) and
``sbemulator.config``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from sbemulator.config import (
    AuthorizationRuleConfig,
    NamespaceConfig,
    QueueConfig,
    RuleConfig,
    SubscriptionConfig,
    TopicConfig,
)

from ..model import BrokerMessage, Delivery, IncomingMessage, Outcome, ReceiveMode
from ..scheduling import Budget
from .entity import EntityRef
from .purge import PurgeJob as PurgeJob  # what begin_purge returns, for the admin plane (a public module)
from .receiver import Receiver
from .views import EntityView, Resubmission, SessionView


class Lookup(Protocol):
    """Finding entities and what they were built from (every client)."""

    config: NamespaceConfig  # the namespace it was built from (its name, the file's entities)

    def resolve(self, path: str) -> EntityRef:
        """Case-insensitive; accepts "q", "t", "t/Subscriptions/s", "<x>/$DeadLetterQueue",
        "<x>/$Transfer/$DeadLetterQueue" (a leading "/" or "amqps://host/" prefix is stripped)."""
        ...

    def entity_paths(self) -> list[str]: ...

    def message_count(self, path: str) -> int: ...

    def describe(self, path: str) -> Any:
        """The QueueConfig / TopicConfig / SubscriptionConfig an entity was built from (rules current)."""
        ...

    def authorization_rules(self, entity_path: str) -> list[AuthorizationRuleConfig]: ...

    def is_runtime_entity(self, path: str) -> bool:
        """True for an entity the config file does not declare (created at run time)."""
        ...


class EntityAdmin(Protocol):
    """Creating, changing and deleting entities (the Atom and ARM APIs, the console)."""

    def create_queue(self, q: QueueConfig) -> EntityRef: ...

    def create_topic(self, t: TopicConfig) -> EntityRef: ...

    def create_subscription(self, topic_name: str, s: SubscriptionConfig) -> EntityRef: ...

    def update_entity(self, path: str, config: QueueConfig | TopicConfig | SubscriptionConfig) -> EntityRef: ...

    def delete_entity(self, path: str) -> None:
        """The entity is gone at once; its messages are freed later by :meth:`drop_step`."""
        ...


class Rules(Protocol):
    """A subscription's rules ($management and the management APIs)."""

    def add_rule(
        self,
        path: str,
        rule: RuleConfig | str,
        *,
        filter_type: str = "Sql",
        sql_expression: str | None = None,
        correlation: dict[str, Any] | None = None,
        action_expression: str | None = None,
    ) -> None: ...

    def set_rule(self, path: str, rule: RuleConfig) -> bool: ...

    def remove_rule(self, path: str, name: str) -> None: ...

    def list_rules(self, path: str) -> list[RuleConfig]: ...


class Changes(Protocol):
    """A store savepoint around a change that may be refused as a whole."""

    def begin_change(self) -> None:
        """Start a change of entities or rules that is answered only once stored; see
        :meth:`Topology.begin_change`."""
        ...

    def end_change(self, keep: bool) -> None:
        """Keep the change (it was written) or take it back (its commit failed): nothing of it stays,
        in memory or buffered in the store."""
        ...


class Messages(Protocol):
    """Messages in and out, locks and sessions (AMQP links, $management, the console)."""

    def send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Accept a batch (all or nothing); see :meth:`MessageFlow.send`."""
        ...

    def check_send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Raise what :meth:`send` would refuse these messages with, without sending them."""
        ...

    def withdraw(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Take back a send the store could not write; see :meth:`MessageFlow.withdraw`."""
        ...

    def schedule(self, path: str, messages: Iterable[IncomingMessage]) -> list[int]: ...

    def cancel_scheduled(self, path: str, sequence_numbers: Iterable[int]) -> None: ...

    def open_receiver(
        self,
        path: str,
        mode: ReceiveMode,
        on_available: Callable[[], None],
        session_id: str | None = None,
        next_available_session: bool = False,
        max_receivers: int | None = None,
    ) -> Receiver: ...

    def receive_deferred(
        self, path: str, sequence_numbers: Iterable[int], mode: ReceiveMode, session_id: str | None = None
    ) -> list[Delivery]: ...

    def peek(
        self, path: str, from_sequence_number: int, count: int, session_id: str | None = None
    ) -> list[BrokerMessage]: ...

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
        ...

    def check_locks(self, path: str, lock_tokens: Iterable[uuid.UUID], session_id: str | None = None) -> None:
        """Raise the lock error :meth:`update_disposition` would raise for these tokens now, without settling."""
        ...

    def undo_point(self, path: str, lock_tokens: Iterable[uuid.UUID | bytes] = (),
                   session_id: str | None = None) -> Callable[[], None]:
        """What puts back, as they are now, the messages these lock tokens lock and the session's state
        (a transaction's settlements, taken back when its commit could not be written)."""
        ...

    def renew_lock(self, path: str, lock_tokens: Iterable[uuid.UUID]) -> list[int]: ...

    def renew_session_lock(self, path: str, session_id: str) -> int: ...

    def get_session_state(self, path: str, session_id: str) -> bytes | None: ...

    def set_session_state(self, path: str, session_id: str, state: bytes | None) -> None: ...

    def list_sessions(self, path: str, skip: int = 0, top: int = 2**31 - 1,
                      updated_after_ms: int | None = None) -> list[str]:
        """get-message-sessions: the sessions that have messages or state, or with ``updated_after_ms``
        those whose state was set after it."""
        ...


class Views(Protocol):
    """What the management plane shows and does in bulk."""

    def entity_views(self, kind: str | None = None, topic: str | None = None) -> list[EntityView]: ...

    def entity_view(self, path: str) -> EntityView: ...

    def find_entity(self, path: str) -> EntityView | None: ...

    def counts(self, path: str) -> dict[str, int]: ...

    def session_views(self, path: str) -> list[SessionView]: ...

    def now_ms(self) -> int:
        """The broker's clock in epoch milliseconds: what enqueue, lock and expiry times are measured by."""
        ...

    def purge(self, path: str, *, sub_queues: bool = True) -> int: ...

    def begin_purge(self, path: str, *, sub_queues: bool = True) -> PurgeJob:
        """A purge whose messages are out of the entity at once and dropped in slices (broker/purge.py)."""
        ...

    def reset(self) -> dict[str, int]: ...

    def begin_reset(self) -> tuple[int, list[PurgeJob]]:
        """``reset`` with its purges as jobs in slices: (entities deleted, the purges to run)."""
        ...

    def resubmit_dead_lettered(self, path: str, sequence_numbers: Iterable[int] | None = None) -> Resubmission: ...


class Pacing(Protocol):
    """Whether work done in slices should let a commit run first."""

    def commit_wanted(self) -> bool:
        """Whether work done in slices should stop and let a commit run first: a durable commit's time
        grows with what it writes (store.base.Store.commit_wanted)."""
        ...


class Durability(Protocol):
    """Commits, timers and deferred work (the server and its jobs)."""

    def commit(self) -> None:
        """Make every change so far durable (one transaction)."""
        ...

    def close(self) -> None: ...

    @property
    def on_deadline_changed(self) -> Callable[[], None] | None:
        """Set by the server to wake its timer task when a new timer becomes the earliest one
        (called synchronously; it must not call back into the broker)."""
        ...

    @on_deadline_changed.setter

    def on_deadline_changed(self, callback: Callable[[], None] | None) -> None: ...

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has work (clock seconds), or None."""
        ...

    def tick(self, budget: Budget | None = None) -> bool:
        """Process the due timers (lock, TTL and session-lock expiry, scheduled activation); with a
        ``budget`` one slice of them, returning True if due timers remain."""
        ...

    @property
    def drops(self) -> Sequence[object]:
        """Deleted entities' messages still to be freed by :meth:`drop_step` (non-empty while any remain):
        an attribute, read after every commit (runtime/server.py ``fold_later``) without a call."""
        ...

    def drop_step(self, budget: Budget | None = None) -> None:
        """Free one slice of deleted entities' messages (``Slices.purge_items`` when no budget is given):
        a job of the runtime's scheduler, run after a commit beside the store's folds."""
        ...


class GatewayBroker(Lookup, Rules, Changes, Messages, Pacing, Protocol):
    """What the gateway may call: AMQP links, ``$management`` and transactions."""


class AdminBroker(Lookup, EntityAdmin, Rules, Changes, Messages, Views, Protocol):
    """What the admin plane may call: the Atom and ARM APIs, the console, snapshots' imports.

    ``commit`` too: a management write is durable before it is answered."""

    def commit(self) -> None: ...


class RuntimeBroker(Lookup, Views, Pacing, Durability, Protocol):
    """What the runtime may call: the server's commits and timers, its background jobs, snapshots."""


class BrokerAPI(GatewayBroker, AdminBroker, RuntimeBroker, Protocol):
    """Everything the broker offers: what the composition root holds and hands to each client as the
    interface of its own (the way Azurite's handlers each know one ``IQueueMetadataStore``)."""
