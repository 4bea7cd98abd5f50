"""What a send is checked against before anything is stored ("Service Bus quotas", "Duplicate
detection", the entity's status): message and property sizes, id lengths, the entity's size quota and
duplicate detection. ``MessageFlow`` takes these methods from ``SendAdmission``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from sbemulator.descriptions import STATUS_DISABLED, STATUS_SEND_DISABLED

from ..model import (
    MAX_HEADER_SIZE,
    MAX_ID_LENGTH,
    MAX_PROPERTY_SIZE,
    BrokerMessage,
    IncomingMessage,
)
from .entity import QUEUE, TOPIC, Entity
from .errors import (
    ArgumentError,
    ArgumentOutOfRangeError,
    EntityDisabledError,
    InvalidOperationError,
    MessageSizeExceededError,
    QuotaExceededError,
    SessionRequiredError,
)
from .wakeups import Operation

if TYPE_CHECKING:
    from sbemulator.store.base import Store

_DUP_PRUNE_INTERVAL_MS = 60_000
SEND_SUSPENDED = frozenset({STATUS_DISABLED, STATUS_SEND_DISABLED})


class SendAdmission:
    """The send-checking part of ``MessageFlow`` (a base class of it: one object)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the flow (flow.py)
        store: Store
        namespace: str
        _next_dup_prune: int
        _entity: Callable[[str], Entity]
        _op: Operation

        def _now(self) -> int: ...

        def next_sequence(self, ent: Entity) -> int: ...

        def accept(self, target: Entity, msg: BrokerMessage, now: int) -> int: ...

        def remove(self, ent: Entity, msg: BrokerMessage) -> None: ...

    def check_send(self, path: str, messages: Iterable[IncomingMessage]) -> None:
        """Raise what :meth:`send` would refuse these messages with, without sending them (a
        transaction checks its staged sends before applying any)."""
        with self._op:
            self._check_send(path, messages)

    def _check_send(
        self, path: str, messages: Iterable[IncomingMessage]
    ) -> tuple[Entity, list[IncomingMessage]]:
        ent = self._entity(path)
        if ent.kind not in (QUEUE, TOPIC):
            raise InvalidOperationError(
                f"Cannot send to '{ent.path}': sending is only allowed to queues and topics."
            )
        if ent.status in SEND_SUSPENDED:
            raise EntityDisabledError(
                f"Messaging entity '{ent.path}' is currently disabled for sending (status {ent.status})."
            )
        batch = list(messages)
        for m in batch:
            if m.size > ent.max_message_size:
                raise MessageSizeExceededError(
                    f"The received message (size {m.size} bytes) exceeds the limit "
                    f"({ent.max_message_size} bytes) currently allowed on '{ent.path}'."
                )
            if m.header_size > MAX_PROPERTY_SIZE:  # below that, neither property quota can be exceeded
                self._check_property_sizes(m)
            if len(m.message_id or "") > MAX_ID_LENGTH or len(m.session_id or "") > MAX_ID_LENGTH:
                self._refuse_id_lengths(m)
            if ent.requires_session and m.session_id is None:
                raise SessionRequiredError(
                    "The SessionId was not set on a message, and it cannot be sent to the entity. "
                    "Entities that have session support enabled can only receive messages that have the "
                    "SessionId set to a valid value."
                )
        if ent.held_bytes >= ent.max_size_bytes:  # a queue or topic is its own quota
            self._refuse_full(ent)
        return ent, batch

    def _refuse_full(self, ent: Entity) -> None:
        """"Service Bus quotas", queue or topic size: once an entity holds MaxSizeInMegabytes, subsequent
        incoming messages are refused (QuotaExceeded, QuotaType EntitySize). Service Bus's own reports show
        sizes above the maximum: the send that crosses it is taken, the ones after it are refused, until
        receivers have taken the size below it again. The text is Service Bus's."""
        raise QuotaExceededError(
            f"The maximum entity size has been reached or exceeded for {ent.kind.title()}: "
            f"'{self.namespace}:{ent.kind.upper()}:{ent.path}'. Size of entity in bytes:{ent.held_bytes}, "
            f"Max entity size in bytes: {ent.max_size_bytes}. For more information please see "
            "https://aka.ms/ServiceBusExceptions . QuotaType: EntitySize"
        )

    @staticmethod
    def _check_property_sizes(m: IncomingMessage) -> None:
        """"Service Bus quotas", Message property size: refused before anything of the batch is stored."""
        if m.largest_property is not None and m.largest_property[1] > MAX_PROPERTY_SIZE:
            name, size = m.largest_property
            raise ArgumentError(
                f"SerializationException: the property '{name}' ({size} bytes) exceeds the maximum message "
                f"property size of {MAX_PROPERTY_SIZE // 1024} KB."
            )
        if m.header_size > MAX_HEADER_SIZE:
            raise ArgumentError(
                f"SerializationException: the message header ({m.header_size} bytes: system and user "
                f"properties) exceeds the maximum of {MAX_HEADER_SIZE // 1024} KB."
            )

    @staticmethod
    def _refuse_id_lengths(m: IncomingMessage) -> None:
        """"Service Bus quotas": a message ID and a session ID are at most 128 characters."""
        for what, value in (("MessageId", m.message_id), ("SessionId", m.session_id)):
            if value is not None and len(value) > MAX_ID_LENGTH:
                raise ArgumentOutOfRangeError(
                    f"The {what} is {len(value)} characters long; the maximum is {MAX_ID_LENGTH}."
                )

    def _is_duplicate(self, ent: Entity, m: IncomingMessage, now: int) -> bool:
        if not ent.requires_duplicate_detection or m.message_id is None:
            return False
        dups = ent.duplicates
        while dups:
            mid, expires = next(iter(dups.items()))
            if expires > now:
                break
            del dups[mid]
        if now >= self._next_dup_prune:
            self._next_dup_prune = now + _DUP_PRUNE_INTERVAL_MS
            self.store.prune_duplicates(now)
        mid = str(m.message_id)
        if mid in dups:
            return True
        expires = now + ent.duplicate_window_ms
        dups[mid] = expires
        self.store.add_duplicate(ent.key, mid, expires)
        return False
