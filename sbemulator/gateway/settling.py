"""Settlements confirmed only once they are kept: what a link's disposition checks before it settles.

A complete, abandon or deferral changes only the message's row key and delivery state: the store writes
those to its delivery journal, whose file is allocated up front, so a full disk or a failing SQLite cannot
stop them. The store is asked first whether the journal has room for one more (``ensure_room``); when it
has none and cannot make some (folding the journal into SQLite fails), the settlement is refused with
ServerBusy and the message stays locked by the same receiver. A dead-lettering, or a settlement that
modifies properties, writes a new row: it is written before it is confirmed, and taken back when it
cannot be (the message locked again, nothing of it buffered), as a transaction's commit is.

Why ServerBusy also for a full disk (a send gets QuotaExceeded there): the SDKs retry ServerBusy after a
pause ("Service Bus messaging exceptions", ServerBusyException), and a settlement is worth retrying, where
QuotaExceeded, which they do not retry, would leave the message to lapse and be delivered again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..amqp.performatives import Modified, Rejected
from ..broker.api import GatewayBroker
from ..broker.errors import BrokerError, ServerBusyError
from ..broker.unit_of_work import UnitOfWork, apply_stored


def needs_row(outcome: Any) -> bool:
    """Whether settling with ``outcome`` writes a message row (a dead-lettering, modified properties), not
    only the journal's deletion or delivery state."""
    if isinstance(outcome, Rejected):
        return True
    return isinstance(outcome, Modified) and bool(outcome.message_annotations)


def refusal(failure: BrokerError) -> BrokerError:
    """The error a settlement the store cannot keep is refused with: ServerBusy, which the SDKs retry."""
    if isinstance(failure, ServerBusyError):
        return failure
    return ServerBusyError(
        "Not settled: the emulator's store cannot keep this settlement now, so the message stays as it was "
        "(locked by this receiver). Try again later. " + (failure.description or str(failure))
    )


def settle_stored(broker: GatewayBroker, commit: Callable[[], BrokerError | None], path: str, token: Any,
                  apply: Callable[[], None]) -> None:
    """Apply a settlement that writes a row and answer it only once written: what the connection did so
    far is committed first (a store that cannot write refuses before anything changes), then the
    settlement is applied and committed; a commit that fails takes it back (the message locked by its
    receiver again, its buffered writes forgotten) and refuses it (:func:`refusal`)."""
    def settle(work: UnitOfWork) -> None:
        work.on_take_back(broker.undo_point(path, [token]))
        apply()

    apply_stored(broker, commit, settle, refusal)
