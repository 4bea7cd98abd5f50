"""Service Bus transactions: work staged under a transaction id, applied as a whole or not at all.

"Overview of Service Bus transaction processing" (Service Bus docs) and AMQP 1.0 part 4
("Transactions") describe what this does. A client declares a transaction on a coordinator link and
gets an id; transfers and settlements that carry that id (a ``transactional-state``) are *staged*
here instead of reaching the entity; the discharge then applies every staged operation or none:

- **Commit** checks every staged operation first (each send's entity still takes messages, each
  settled message's lock is still held) and applies them only if all pass, within one synchronous
  call, so the store's next commit holds all of the transaction or, after a crash, none of it.
  Staged work lives only in memory: a process killed before the discharge applies nothing of it.
- **Rollback** (discharge with ``fail``, a timeout, the connection going away) drops the staged
  operations. A message settled inside the transaction stays locked by its receiver, as on Service
  Bus: it comes back when its lock ends (a closed plain receiver's locks last until then too).
- **Scope.** Service Bus keeps one transaction within one top-level entity (a queue, or a topic with
  its subscriptions): an operation on another entity is refused ("Local transactions cannot span
  multiple top-level entities"), except a send *via* the transaction's entity, which reaches its
  destination on commit. A send goes via that entity when its link says so (a send-via link:
  ``com.microsoft:transfer-destination-address``, as .NET's ``ServiceBusSender`` with a via entity
  attaches it) or when its link is on the same AMQP session as the transaction's first operation
  (the Java SDK's ``enableCrossEntityTransactions`` opens every link on one session and names no
  via entity: "the first entity that an operation occurs on becomes the send-via entity").
- **A refused operation dooms the transaction.** Its commit then rolls everything back with the
  refusal's reason: an SDK may not look at a transactional transfer's outcome (the Java SDK does
  not), and a commit must not apply the rest of the work as if that operation had succeeded.
- **Timeout.** A transaction not discharged within 2 minutes of its declaration is rolled back;
  its discharge then fails with ``amqp:transaction:timeout``.

The coordinator belongs to one connection (transaction ids are the connection's, like Service Bus's):
its owner (the gateway) feeds it, asks for the timeout to be checked, and rolls everything back when
the connection closes. It depends on the broker only through :class:`TransactionalBroker`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..model import IncomingMessage
from .errors import BrokerError, InvalidOperationError
from .unit_of_work import UnitOfWork

# AMQP 1.0 part 4.5.8 (transaction-error conditions).
UNKNOWN_ID = "amqp:transaction:unknown-id"
ROLLBACK = "amqp:transaction:rollback"
TIMEOUT = "amqp:transaction:timeout"

DEFAULT_TIMEOUT_S = 120.0  # Service Bus: "A transaction times out after 2 minutes."
# Bounds so a client cannot grow the emulator's memory without limit: open transactions per
# connection, and staged operations per transaction.
MAX_OPEN_TRANSACTIONS = 1000
MAX_OPERATIONS = 10_000


class TransactionUnknownError(BrokerError):
    """The id was never declared on this connection, or its transaction is already discharged."""

    condition = UNKNOWN_ID
    status_code = 400


class TransactionRollbackError(BrokerError):
    """A commit found a staged operation that can no longer be applied: nothing was applied."""

    condition = ROLLBACK
    status_code = 400


class TransactionTimeoutError(BrokerError):
    """The transaction ran past its timeout and was rolled back."""

    condition = TIMEOUT
    status_code = 408


class TransactionalBroker(Protocol):
    """What the coordinator needs of the broker: check a send without doing it, and do it."""

    def check_send(self, path: str, messages: Iterable[IncomingMessage]) -> None: ...

    def send(self, path: str, messages: Iterable[IncomingMessage]) -> None: ...

    def withdraw(self, path: str, messages: Iterable[IncomingMessage]) -> None: ...


class StagedSettlement(Protocol):
    """A settlement waiting for its transaction: ``check`` raises what applying it would, ``apply``
    settles, ``undo_point`` (called just before ``apply``) returns what takes the settlement back. The
    gateway builds these over a receiver and a lock token."""

    def check(self) -> None: ...

    def apply(self) -> None: ...

    def undo_point(self) -> Callable[[], None]: ...


@dataclass(slots=True)
class _Send:
    path: str
    messages: list[IncomingMessage]


@dataclass(slots=True)
class Transaction:
    txn_id: bytes
    declared_at: float
    scope: str | None = None  # the lower-case top-level entity of its first operation
    scope_session: object = None  # the AMQP session that operation came over
    operations: list[_Send | StagedSettlement] = field(default_factory=list)
    refused: BrokerError | None = None  # the first operation refused inside it


def top_level_entity(path: str) -> str:
    """'orders' -> 'orders', 'Events/Subscriptions/All' -> 'events', 'q/$DeadLetterQueue' -> 'q'."""
    return path.strip("/").split("/", 1)[0].lower()


class TransactionCoordinator:
    """The transactions of one connection (the broker side of its coordinator link)."""

    def __init__(self, broker: TransactionalBroker, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.timeout_s = timeout_s
        self.clock = clock
        self._open: dict[bytes, Transaction] = {}
        self._timed_out: set[bytes] = set()  # rolled back by the timeout, until their discharge

    # -- declare / discharge -------------------------------------------------------------
    def declare(self) -> bytes:
        self.expire()
        if len(self._open) >= MAX_OPEN_TRANSACTIONS:
            raise InvalidOperationError(
                f"This connection already has {MAX_OPEN_TRANSACTIONS} open transactions; discharge some first."
            )
        txn_id = os.urandom(16)
        self._open[txn_id] = Transaction(txn_id, self.clock())
        return txn_id

    def discharge(self, txn_id: bytes, fail: bool, work: UnitOfWork | None = None) -> None:
        """Commit (``fail`` false) or roll back. Raises for an unknown id (also one discharged
        before), a timed-out transaction, and a commit that found an operation it cannot apply (the
        transaction is then rolled back). What a commit applied is registered on ``work``, which takes it
        back (unit_of_work.apply_stored) if the store cannot write it: all or nothing, in memory too."""
        self.expire()
        txn = self._open.pop(txn_id, None)
        if txn is None:
            if txn_id in self._timed_out:
                self._timed_out.discard(txn_id)
                if fail:
                    return  # rolling back what the timeout rolled back already
                raise TransactionTimeoutError(
                    f"The transaction timed out after {self.timeout_s:g} seconds and was rolled back."
                )
            raise TransactionUnknownError("Transaction hasn't been declared yet, or has already been discharged.")
        if fail:
            return
        if txn.refused is not None:
            raise TransactionRollbackError(
                "The transaction was rolled back: an operation in it was refused: "
                f"{txn.refused.description or txn.refused}", ROLLBACK
            )
        try:
            for op in txn.operations:
                if isinstance(op, _Send):
                    self.broker.check_send(op.path, op.messages)
                else:
                    op.check()
        except BrokerError as exc:
            raise TransactionRollbackError(
                f"The transaction was rolled back: {exc.description or exc}", ROLLBACK
            ) from exc
        work = work if work is not None else UnitOfWork()
        broker = self.broker
        try:
            for op in txn.operations:
                if isinstance(op, _Send):
                    broker.send(op.path, op.messages)
                    work.on_take_back(lambda op=op: broker.withdraw(op.path, op.messages))  # type: ignore[misc]
                else:
                    work.on_take_back(op.undo_point())
                    op.apply()
        except BaseException:
            work.take_back()  # checked above, so not expected: still nothing half applied
            raise

    def rollback_all(self) -> None:
        """The connection (or its coordinator link) is gone: every open transaction is rolled back
        (AMQP 1.0 4.4.1: undischarged transactions of a closed coordinator link are rolled back)."""
        self._open.clear()
        self._timed_out.clear()

    def expire(self) -> None:
        """Roll back the transactions past their timeout (their staged work is dropped now)."""
        if not self._open:
            return
        limit = self.clock() - self.timeout_s
        for txn_id in [t.txn_id for t in self._open.values() if t.declared_at <= limit]:
            del self._open[txn_id]
            self._timed_out.add(txn_id)

    def next_timeout(self) -> float | None:
        """When the oldest open transaction times out (on the coordinator's clock), if any is open."""
        if not self._open:
            return None
        return min(t.declared_at for t in self._open.values()) + self.timeout_s

    # -- staging -----------------------------------------------------------------------------
    def stage_send(self, txn_id: bytes, path: str, messages: list[IncomingMessage],
                   via: str | None = None, session: object = None) -> None:
        """A transactional transfer into ``path`` (through ``via`` for a send-via link; ``session``
        is the AMQP session of its link): checked now (so the sender hears of a refusal at once),
        applied on commit."""
        txn = self._transaction(txn_id)
        try:
            self._check_scope(txn, path, via, session, sending=True)
            self.broker.check_send(path, messages)
            self._add(txn, _Send(path, messages))
        except BrokerError as exc:
            txn.refused = txn.refused or exc
            raise

    def stage_settlement(self, txn_id: bytes, path: str, settlement: StagedSettlement,
                         session: object = None) -> None:
        """A transactional settlement of a message received from ``path``: the lock is checked now
        and again on commit; the message stays locked until then."""
        txn = self._transaction(txn_id)
        try:
            self._check_scope(txn, path, None, session, sending=False)
            settlement.check()
            self._add(txn, settlement)
        except BrokerError as exc:
            txn.refused = txn.refused or exc
            raise

    def refuse(self, txn_id: bytes, error: BrokerError) -> None:
        """An operation of the transaction was refused outside the staging calls: its commit fails."""
        txn = self._open.get(txn_id)
        if txn is not None and txn.refused is None:
            txn.refused = error

    @staticmethod
    def _check_scope(txn: Transaction, path: str, via: str | None, session: object, *, sending: bool) -> None:
        scope = top_level_entity(via if via is not None else path)
        if txn.scope is None:
            txn.scope, txn.scope_session = scope, session
            return
        if scope == txn.scope:
            return
        if sending and via is None and session is not None and session is txn.scope_session:
            return  # sent over the first operation's session: via the transaction's entity
        raise InvalidOperationError(
            "Local transactions cannot span multiple top-level entities such as queue or topic. "
            f"This transaction works on '{txn.scope}'; send to '{path}' via '{txn.scope}' instead."
        )

    def _transaction(self, txn_id: bytes) -> Transaction:
        self.expire()
        txn = self._open.get(txn_id)
        if txn is None:
            if txn_id in self._timed_out:
                raise TransactionTimeoutError(
                    f"The transaction timed out after {self.timeout_s:g} seconds and was rolled back."
                )
            raise TransactionUnknownError("Transaction hasn't been declared yet, or has already been discharged.")
        return txn

    @staticmethod
    def _add(txn: Transaction, op: Any) -> None:
        if len(txn.operations) >= MAX_OPERATIONS:
            raise InvalidOperationError(f"A transaction holds at most {MAX_OPERATIONS} operations here.")
        txn.operations.append(op)

    def __len__(self) -> int:
        return len(self._open)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ROLLBACK",
    "TIMEOUT",
    "UNKNOWN_ID",
    "StagedSettlement",
    "Transaction",
    "TransactionCoordinator",
    "TransactionRollbackError",
    "TransactionTimeoutError",
    "TransactionUnknownError",
    "TransactionalBroker",
    "top_level_entity",
]
