"""A client's sender into a queue or topic (or through a transfer queue, send-via): every message it
sends is stored before it is accepted ("Service Bus: message transfers, locks and settlement"), and a
transactional one waits for its transaction (AMQP 1.0 4.4.1)."""

from __future__ import annotations

from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Link
from ..amqp.message import MessageDecodeError
from ..amqp.performatives import Accepted, Rejected, error
from ..amqp.transactions import TransactionalState
from ..broker.entity import EntityRef
from ..broker.errors import BrokerError
from ..model import IncomingMessage
from .context import GatewayContext, LinkHandler, refused, top_up
from .deliveries import incoming_messages
from .faults import SEND as SEND_OPERATION
from .faults import Refusal


class EntitySenderLink(LinkHandler):
    """A client sending into a queue or topic: every accepted message is stored before the accept."""

    def __init__(self, gateway: GatewayContext, link: Link, path: str, ref: EntityRef,
                 via: str | None = None) -> None:
        self.gateway = gateway
        self.link = link
        self.path = path
        self.ref = ref
        self.via = via  # the transfer entity of a send-via link

    def on_message(self, event: ev.MessageReceived, messages: list[IncomingMessage] | None = None) -> None:
        """``messages``: the batch's, when the gateway decoded them in slices (else decoded here)."""
        gateway = self.gateway
        conn = gateway.connection
        state: Any
        if gateway.faults.active and refused(gateway, SEND_OPERATION, self.path,
                                             lambda refusal: self._refuse(event, refusal)):
            return
        txn = event.state if type(event.state) is TransactionalState else None
        try:
            if messages is None:
                messages = incoming_messages(event.payload, event.message_format)
            if txn is None:
                gateway.broker.send(self.path, messages)
                # Settled once the store has written it (Gateway.settle_sends): accepted, or refused and
                # taken back if the write failed.
                gateway.sent(self.link, self.path, event.delivery_id, event.settled, messages)
                top_up(conn, self.link)
                return
            gateway.transactions.stage_send(bytes(txn.txn_id or b""), self.path, list(messages), self.via,
                                            self.link.session)
            gateway.arm_transaction_timeout()
            state = Accepted()
        except MessageDecodeError as exc:
            state = Rejected(error("amqp:decode-error", f"The message could not be decoded: {exc}"))
        except BrokerError as exc:
            state = Rejected(error(exc.condition, exc.description or str(exc)))
        if txn is not None:
            # AMQP 1.0 4.4.1: the outcome of transactional work goes back inside a transactional-state.
            state = TransactionalState(txn.txn_id, state)
        if not event.settled:
            conn.settle_incoming(self.link, event.delivery_id, state)
        top_up(conn, self.link)

    def _refuse(self, event: ev.MessageReceived, refusal: Refusal) -> None:
        """An injected send fault: the transfer is ``rejected`` with the condition, nothing stored."""
        conn = self.gateway.connection
        state: Any = Rejected(error(refusal.condition, refusal.description))
        if type(event.state) is TransactionalState:
            state = TransactionalState(event.state.txn_id, state)
        if not event.settled:
            conn.settle_incoming(self.link, event.delivery_id, state)
        top_up(conn, self.link)
