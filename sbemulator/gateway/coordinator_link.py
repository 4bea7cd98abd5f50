"""The transaction controller's link (AMQP 1.0 4.2, "Transactions in Azure Service Bus"): declares and
discharges, a commit accepted only once what it did is stored."""

from __future__ import annotations

from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Link
from ..amqp.message import MessageDecodeError, parse_message
from ..amqp.performatives import Accepted, Rejected, error, from_described
from ..amqp.transactions import Declare, Declared, Discharge
from ..broker.errors import BrokerError
from ..broker.unit_of_work import apply_stored
from .context import GatewayContext, LinkHandler, top_up


class CoordinatorLink(LinkHandler):
    """The transaction controller's link (AMQP 1.0 4.2): each message is a declare or a discharge,
    answered in its disposition (``declared`` with the new id, ``accepted``, or ``rejected`` with a
    transaction error)."""

    def __init__(self, gateway: GatewayContext, link: Link) -> None:
        self.gateway = gateway
        self.link = link

    def on_message(self, event: ev.MessageReceived) -> None:
        conn = self.gateway.connection
        state: Any
        try:
            body = from_described(parse_message(event.payload).body_value())
            if isinstance(body, Declare):
                if body.global_id is not None:
                    raise BrokerError("Distributed transactions (a declare with a global-id) are not supported.",
                                      "amqp:not-implemented")
                state = Declared(self.gateway.transactions.declare())
                self.gateway.arm_transaction_timeout()
            elif isinstance(body, Discharge):
                self._discharge(bytes(body.txn_id or b""), bool(body.fail))
                state = Accepted()
            else:
                raise BrokerError("A coordinator takes declare and discharge messages only.", "amqp:decode-error")
        except MessageDecodeError as exc:
            state = Rejected(error("amqp:decode-error", f"The message could not be decoded: {exc}"))
        except BrokerError as exc:
            state = Rejected(error(exc.condition, exc.description or str(exc)))
        if not event.settled:
            conn.settle_incoming(self.link, event.delivery_id, state)
        top_up(conn, self.link)
        self.gateway.flush_soon()

    def _discharge(self, txn_id: bytes, fail: bool) -> None:
        """A commit is accepted only once what it did is stored. A store that cannot write now (a
        full disk: QuotaExceeded; another write error: ServerBusy) refuses the commit before anything of
        the transaction applies (it is rolled back); one that fails at this commit's own write takes all
        of it back (its sends never stored later, its settlements and session state as before, the
        messages it settled locked by their receivers) and refuses the commit with that error."""
        gateway = self.gateway
        transactions = gateway.transactions
        if fail:
            transactions.discharge(txn_id, True)
            return
        failure = gateway.commit_now()
        if failure is not None:
            transactions.discharge(txn_id, True)
            raise failure
        # one unit of work: what the commit buffers is forgotten, and what it did taken back, if refused
        apply_stored(gateway.broker, gateway.commit_now, lambda work: transactions.discharge(txn_id, False, work))

    def on_detach(self) -> None:
        # AMQP 1.0 4.4.1: closing the coordinator link rolls back the transactions it declared.
        self.gateway.rollback_transactions()
