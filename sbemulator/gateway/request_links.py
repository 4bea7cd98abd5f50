"""The request/response links of Service Bus: the ``$cbs`` pair (token exchange, AMQP CBS draft) and an
entity's ``$management`` pair (the operations of "AMQP 1.0 in Azure Service Bus: request-response
operations"). The client's sender carries requests (``CbsRequestLink``, ``ManagementRequestLink``); our
sender (``ReplyLink``) carries the replies, as credit allows."""

from __future__ import annotations

import logging
import uuid
from collections import deque
from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Link
from ..amqp.message import MessageDecodeError, ParsedMessage, encode_message, parse_message
from ..amqp.performatives import SND_SETTLED, Accepted, Properties
from ..amqp.transactions import TransactionalState
from ..amqp.types import Int, Symbol
from .addresses import entity_path
from .cbs import audience_entity, handle_put_token
from .context import GatewayContext, LinkHandler, refused, top_up
from .faults import MANAGEMENT, PUT_TOKEN, SETTLE
from .faults import SEND as SEND_OPERATION
from .management import MgmtReply, required_right

log = logging.getLogger("sbemulator")
_MANAGEMENT_FAULT_KINDS = {"com.microsoft:update-disposition": SETTLE, "com.microsoft:schedule-message": SEND_OPERATION}
# $management operations of a session's lock holder: a lock-lost fault is the session's lock (faults.py)
_SESSION_OPERATIONS = frozenset({"com.microsoft:renew-session-lock", "com.microsoft:get-session-state",
                                 "com.microsoft:set-session-state"})


class ReplyLink(LinkHandler):
    """Our sending side of a request/response pair: replies wait for credit."""

    def __init__(self, gateway: GatewayContext, link: Link) -> None:
        self.gateway = gateway
        self.link = link
        self.queue: deque[bytes] = deque()

    def send(self, payload: bytes) -> None:
        self.queue.append(payload)
        self._drain()

    def _drain(self) -> None:
        conn = self.gateway.connection
        while self.queue and conn.can_send(self.link):
            payload = self.queue.popleft()
            settled = self.link.snd_settle_mode in (SND_SETTLED, 2)
            conn.send_transfer(self.link, uuid.uuid4().bytes, payload, settled=settled)

    def on_credit(self, event: ev.LinkCreditChanged) -> None:
        self._drain()
        if self.link.drain and not self.queue:  # (a drain its replies used up is answered already)
            self.gateway.connection.drain_complete(self.link)

    def on_disposition(self, event: ev.DeliveryStateChanged) -> None:
        if not event.settled:
            self.gateway.connection.settle_outgoing(self.link, event.delivery_id, event.state)

    def on_detach(self) -> None:
        self.queue.clear()


class _RequestLink(LinkHandler):
    """Common part of the request side of $cbs and $management: accept, answer, top up credit."""

    def __init__(self, gateway: GatewayContext, link: Link) -> None:
        self.gateway = gateway
        self.link = link

    def on_message(self, event: ev.MessageReceived) -> None:
        conn = self.gateway.connection
        if not event.settled:
            conn.settle_incoming(self.link, event.delivery_id, Accepted())
        top_up(conn, self.link)
        try:
            request = parse_message(event.payload)
        except MessageDecodeError as exc:
            log.warning("undecodable request on %s: %s", self.link.address, exc)
            # Answered like any malformed request (400), never left unanswered: a client waits for the
            # reply to its message-id. Without a decodable properties section there is nothing to
            # answer to.
            partial = exc.partial
            if partial is not None and partial.properties is not None and partial.properties.message_id is not None:
                self.answer_error(partial, 400, f"The request could not be decoded: {exc}", "amqp:decode-error")
            return
        self.answer(request)

    def answer(self, request: ParsedMessage) -> None:
        raise NotImplementedError

    def answer_error(self, request: ParsedMessage, status: int, description: str, condition: str) -> None:
        raise NotImplementedError

    @staticmethod
    def response(request: ParsedMessage, app_props: dict, body: Any) -> bytes:
        req_props = request.properties
        props = Properties(
            message_id=str(uuid.uuid4()),
            correlation_id=req_props.message_id if req_props else None,
            to=req_props.reply_to if req_props else None,
        )
        return encode_message(properties=props, application_properties=app_props, value=body)


class CbsRequestLink(_RequestLink):
    def answer(self, request: ParsedMessage) -> None:
        if self.gateway.faults.active:
            audience = (request.application_properties or {}).get("name")
            entity = audience_entity(audience) if isinstance(audience, str) else ""
            if refused(self.gateway, PUT_TOKEN, entity, lambda refusal: self.answer_error(
                    request, refusal.status_code, refusal.description, refusal.condition)):
                return
        outcome = handle_put_token(request, self.gateway.validator, self.gateway.wall_clock(),
                                   self.gateway.entity_exists, self.gateway.refusals)
        if outcome.grant is not None:
            self.gateway.add_grant(outcome.grant)
        payload = self.response(
            request,
            {"status-code": Int(outcome.status_code), "status-description": outcome.description},
            None,
        )
        self.gateway.send_reply(None, self.gateway.cbs_reply_links, payload)

    def answer_error(self, request: ParsedMessage, status: int, description: str, condition: str) -> None:
        payload = self.response(request, {"status-code": Int(status), "status-description": description}, None)
        self.gateway.send_reply(None, self.gateway.cbs_reply_links, payload)


class ManagementRequestLink(_RequestLink):
    def __init__(self, gateway: GatewayContext, link: Link, entity: str) -> None:
        super().__init__(gateway, link)
        self.entity = entity
        self._txn_id: bytes | None = None  # of the request being answered, when it is transactional

    def on_message(self, event: ev.MessageReceived) -> None:
        # The Java SDK sends a request that belongs to a transaction with a transactional-state on
        # its transfer (ManagementChannel: update-disposition and schedule-message).
        state = event.state
        self._txn_id = bytes(state.txn_id or b"") if type(state) is TransactionalState else None
        try:
            super().on_message(event)
        finally:
            self._txn_id = None

    def answer(self, request: ParsedMessage) -> None:
        gateway = self.gateway
        right = required_right(request)
        # Checked against the link's own address: a client may have put its token for '<entity>/$management'.
        path = entity_path(self.link.address)
        missing = gateway.missing_claim(path, right, self.link.address) if right is not None else None
        if missing is not None:
            self._reply(request, MgmtReply(401, missing, None, "amqp:unauthorized-access"))
            return
        if gateway.faults.active:
            # a settlement by lock token over $management (the SDKs' fallback) is a settlement too,
            # and scheduling a message is sending one
            operation = (request.application_properties or {}).get("operation")
            kind = _MANAGEMENT_FAULT_KINDS.get(operation, MANAGEMENT) if isinstance(operation, str) else MANAGEMENT
            body = request.body_value() if operation in _SESSION_OPERATIONS or kind is SETTLE else None
            in_session = operation in _SESSION_OPERATIONS or (
                isinstance(body, dict) and body.get("session-id") is not None)
            if refused(gateway, kind, self.entity, lambda refusal: self._reply(request, MgmtReply(
                    refusal.status_code, refusal.description, None, refusal.condition)), session=in_session):
                return
        txn_id = self._txn_id
        if txn_id is None:
            reply = gateway.management.handle(self.entity, request)
        else:
            transactions = gateway.transactions
            reply = gateway.management.handle_in_transaction(
                self.entity, request,
                lambda staged: transactions.stage_settlement(txn_id, self.entity, staged, self.link.session),
                lambda exc: transactions.refuse(txn_id, exc),
            )
            gateway.arm_transaction_timeout()
        self._reply(request, reply)

    def answer_error(self, request: ParsedMessage, status: int, description: str, condition: str) -> None:
        self._reply(request, MgmtReply(status, description, None, condition))

    def _reply(self, request: ParsedMessage, reply: MgmtReply) -> None:
        props = {"statusCode": Int(reply.status_code), "statusDescription": reply.description}
        if reply.error_condition:
            props["errorCondition"] = Symbol(reply.error_condition)
        payload = self.response(request, props, reply.body)
        reply_to = request.properties.reply_to if request.properties else None
        self.gateway.send_reply(str(reply_to) if reply_to is not None else None, None, payload)
        self.gateway.flush_soon()
