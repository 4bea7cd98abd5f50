"""A receiver: the broker-side half of one receiving link."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model import Delivery, Outcome, ReceiveMode
from .errors import BrokerError, SessionLockLostError

if TYPE_CHECKING:
    from .entity import Entity, Session


class ReceiverOps:
    """What a receiver calls in the broker, wired once by the broker from its components: ``take``,
    ``close`` and the session acquisition (the message flow and its sessions), ``settle``,
    ``complete`` and ``check_lock`` (the settlement). This module depends on no component's module."""

    __slots__ = ("acquire_session", "check_lock", "close", "complete", "settle", "take")

    def __init__(
        self,
        take: Callable[[Receiver, int], list[Delivery]],
        settle: Callable[..., None],
        complete: Callable[[Entity, uuid.UUID | bytes, Receiver], None],
        check_lock: Callable[[Entity, uuid.UUID | bytes, Receiver], None],
        close: Callable[[Receiver], None],
        acquire_session: Callable[[Receiver], str | None],
    ) -> None:
        self.take = take
        self.settle = settle
        self.complete = complete
        self.check_lock = check_lock
        self.close = close
        self.acquire_session = acquire_session


class Receiver:
    """Takes messages from one entity; settles the ones it took.

    ``on_available`` is called (synchronously, at the end of the broker call that caused it)
    whenever messages may have become available to this receiver; the server answers by calling
    :meth:`take` if the link has credit. It is also called when the session lock of a session
    receiver is lost, so that the next :meth:`take` raises :class:`SessionLockLostError`.

    A receiver that cannot take messages for now (its link has no credit) says so with
    :meth:`set_waiting`: new messages then do not wake it, so a send costs nothing per idle receiver.
    Its owner takes again when it can (the next flow), and says ``set_waiting(True)`` if that finds
    nothing. A new receiver is waiting until it says otherwise.
    """

    def __init__(
        self,
        ops: ReceiverOps,
        entity: Entity,
        mode: ReceiveMode,
        on_available: Callable[[], None],
        session_id: str | None,
        next_available_session: bool,
    ) -> None:
        self._ops = ops
        self.entity = entity
        self.mode = mode
        self.on_available = on_available
        self.next_available_session = next_available_session
        self.session: Session | None = None
        self.session_lost = False
        # Set when the entity stops serving this receiver (suspended for receiving): the next take
        # raises it, so the server detaches the link with that error.
        self.ended_by: BrokerError | None = None
        self.closed = False
        # Lock keys (model.LockKey) in the order they were taken, a dict used as an ordered set: a session
        # receiver's close returns them in slices of that order, which is about sequence order, so each
        # slice's rows are neighbours in a durable store (a set's order scattered every slice of 512 over
        # the whole queue: a write of ~500 pages per slice). Never tracked by the cyclic collector either
        # (a dict of bytes and None is not; a set is).
        self.locks: dict[bytes, None] = {}
        self.waiting = True
        self._requested_session = session_id

    # --- info ------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.entity.path

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    @property
    def locked_until_ms(self) -> int | None:
        """The session lock's expiry (None for a session-less receiver or before a session is held)."""
        return self.session.locked_until_ms if self.session is not None else None

    # --- receiving ---------------------------------------------------------------------------
    def set_waiting(self, waiting: bool) -> None:
        """Whether a new message should wake this receiver: True while it could take one now (credit left
        after taking everything available), False while it cannot (no credit, or its output is full)."""
        if waiting is self.waiting:
            return
        self.waiting = waiting
        if self.closed or self.entity.requires_session:  # a session's messages wake its owner (or seekers)
            return
        if waiting:
            self.entity.waiting[id(self)] = self
        else:
            self.entity.waiting.pop(id(self), None)

    def try_acquire_session(self) -> str | None:
        """Next-available receivers: lock the session with the oldest available message, if any."""
        return self._ops.acquire_session(self)

    def take(self, max_count: int) -> list[Delivery]:
        """Up to ``max_count`` messages in FIFO order; peek-lock locks them and counts the delivery."""
        if self.session_lost:
            raise SessionLockLostError(f"The session lock on {self.path} was lost.")
        if self.ended_by is not None:
            raise self.ended_by
        if self.closed or max_count <= 0:
            return []
        return self._ops.take(self, max_count)

    # --- settlement -----------------------------------------------------------------------------
    def check_lock(self, lock_token: uuid.UUID | bytes) -> None:
        """Raise MessageLockLostError (or SessionLockLostError) if settling ``lock_token`` now would,
        without settling: a transaction checks its staged settlements before applying any."""
        self._ops.check_lock(self.entity, lock_token, self)

    def complete(self, lock_token: uuid.UUID | bytes) -> None:
        self._ops.complete(self.entity, lock_token, self)

    def abandon(self, lock_token: uuid.UUID | bytes, properties_to_modify: dict[str, Any] | None = None) -> None:
        self._ops.settle(
            self.entity, lock_token, Outcome.ABANDONED, receiver=self, properties_to_modify=properties_to_modify
        )

    def defer(self, lock_token: uuid.UUID | bytes, properties_to_modify: dict[str, Any] | None = None) -> None:
        self._ops.settle(
            self.entity, lock_token, Outcome.DEFERRED, receiver=self, properties_to_modify=properties_to_modify
        )

    def dead_letter(
        self,
        lock_token: uuid.UUID | bytes,
        reason: str | None = None,
        description: str | None = None,
        properties_to_modify: dict[str, Any] | None = None,
    ) -> None:
        self._ops.settle(
            self.entity,
            lock_token,
            Outcome.DEAD_LETTERED,
            receiver=self,
            reason=reason,
            description=description,
            properties_to_modify=properties_to_modify,
        )

    def release(self, lock_token: uuid.UUID | bytes) -> None:
        """The client gave the message back unprocessed: available again, delivery not counted."""
        self._ops.settle(self.entity, lock_token, Outcome.RELEASED, receiver=self)

    def close(self) -> None:
        """Detach: a session receiver's unsettled messages return to the entity (uncounted) and its session
        is unlocked; a plain receiver's stay locked until their locks lapse (settle them by token meanwhile)."""
        if not self.closed:
            self._ops.close(self)

    def __repr__(self) -> str:
        return f"<Receiver {self.path} session={self.session_id!r} mode={self.mode.name}>"
