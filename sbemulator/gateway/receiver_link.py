"""A client's receiver on a queue, a subscription or a dead-letter queue, optionally of one session: the
broker pumps deliveries into it as credit, session window and output room allow, in slices; the client's
dispositions settle them ("Service Bus: message transfers, locks and settlement"), directly or inside a
transaction (AMQP 1.0 4.4.2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Link
from ..amqp.performatives import SND_SETTLED, Accepted, Modified, Rejected, Released, Source, error
from ..amqp.transactions import TransactionalState
from ..amqp.types import Described, Long, Symbol
from ..broker.api import GatewayBroker
from ..broker.entity import EntityRef
from ..broker.errors import BrokerError
from ..model import ReceiveMode
from ..scheduling import Budget
from .addresses import dotnet_ticks, text_or_none
from .context import GatewayContext, LinkHandler, refused
from .deliveries import encode_delivery
from .faults import RECEIVE, SETTLE, Refusal
from .settling import needs_row, refusal, settle_stored

SESSION_FILTER = Symbol("com.microsoft:session-filter")
ARGUMENT_ERROR = "com.microsoft:argument-error"
LOCKED_UNTIL_UTC = Symbol("com.microsoft:locked-until-utc")
TIMEOUT_PROPERTY = Symbol("com.microsoft:timeout")
DEFAULT_SESSION_WAIT_MS = 60_000


def _refuse_settlement(fault: Refusal) -> None:
    """An injected settle fault: the settlement is refused with the rule's error; the message stays locked."""
    raise BrokerError(fault.description, fault.condition)


class EntityReceiverLink(LinkHandler):
    """A client receiving from a queue, subscription or dead-letter queue (optionally a session)."""

    def __init__(self, gateway: GatewayContext, link: Link, path: str, ref: EntityRef, mode: ReceiveMode) -> None:
        self.gateway = gateway
        self.link = link
        self.path = path
        self.ref = ref
        self.mode = mode
        self.receiver: Any = None
        self.waiting_for_session = False
        self.closed = False
        self.continued = False  # the last pump stopped at its slice and goes on at the next loop iteration
        self._timeout_handle: Any = None

    @classmethod
    def attach(cls, gateway: GatewayContext, link: Link, path: str, ref: EntityRef) -> None:
        mode = ReceiveMode.RECEIVE_AND_DELETE if link.snd_settle_mode == SND_SETTLED else ReceiveMode.PEEK_LOCK
        handler = cls(gateway, link, path, ref, mode)
        link.context = handler
        source = link.source
        filters = getattr(source, "filter", None) or {}
        session_requested = SESSION_FILTER in filters
        session_id = filters.get(SESSION_FILTER) if session_requested else None
        if isinstance(session_id, Described):
            session_id = session_id.value
        if isinstance(session_id, bytes):
            session_id = session_id.decode("utf-8", "replace")
        if session_id is not None and not isinstance(session_id, str):
            # A session id is a string: Service Bus refuses a receiver whose session filter holds anything
            # else (azure-servicebus's live test_session_by_session_client_conn_str_receive_handler_peeklock
            # expects ServiceBusError for session_id=1, which the SDK sends as an AMQP int).
            link.context = None
            gateway.connection.reject_attach(
                link, ARGUMENT_ERROR,
                f"The session filter must be a string (the session id), not {type(session_id).__name__} "
                f"{session_id!r}.")
            return
        try:
            handler.receiver = gateway.broker.open_receiver(
                path,
                mode,
                handler.on_available,
                session_id=session_id if session_requested and session_id is not None else None,
                next_available_session=session_requested and session_id is None,
                max_receivers=gateway.limits.max_receivers_per_entity,
            )
        except BrokerError as exc:
            link.context = None
            gateway.connection.reject_attach(link, exc.condition, exc.description or str(exc))
            return
        gateway.receivers.add(handler)
        if not gateway.connection.can_send(link):
            handler.receiver.set_waiting(False)  # no credit yet: the first flow pumps it
        if session_requested and session_id is None:
            handler.waiting_for_session = True
            wait_ms = link.properties.get(TIMEOUT_PROPERTY) if link.properties else None
            handler._try_session()
            if handler.waiting_for_session:
                delay = (wait_ms if wait_ms is not None else DEFAULT_SESSION_WAIT_MS) / 1000.0
                handler._timeout_handle = gateway.call_later(delay, handler._session_wait_expired)
            return
        handler._complete_attach()

    def _complete_attach(self) -> None:
        props = None
        source = self.link.source
        if self.receiver.session_id is not None:
            locked_until = self.receiver.locked_until_ms or 0
            props = {LOCKED_UNTIL_UTC: Long(dotnet_ticks(locked_until))}
            filters = dict(getattr(source, "filter", None) or {})
            filters[SESSION_FILTER] = _session_filter_value(filters.get(SESSION_FILTER), self.receiver.session_id)
            source = Source(
                source.address, source.durable, source.expiry_policy, source.timeout, source.dynamic,
                source.dynamic_node_properties, source.distribution_mode, filters, source.default_outcome,
                source.outcomes, source.capabilities,
            )
        self.gateway.connection.accept_attach(self.link, source=source, properties=props)

    def _try_session(self) -> None:
        if not self.waiting_for_session or self.closed:
            return
        # try_acquire_session may notify this receiver re-entrantly (on_available -> _try_session),
        # so only the call that still finds us waiting completes the attach.
        if self.receiver.try_acquire_session() is not None and self.waiting_for_session:
            self.waiting_for_session = False
            if self._timeout_handle is not None:
                self._timeout_handle.cancel()
            self._complete_attach()
            self.gateway.flush_soon()

    def _session_wait_expired(self) -> None:
        if not self.waiting_for_session or self.closed:
            return
        self.waiting_for_session = False
        self.gateway.connection.reject_attach(
            self.link, "com.microsoft:timeout", "No session is available within the requested timeout."
        )
        self._release()
        self.gateway.flush_soon()

    # -- broker callbacks --------------------------------------------------------------
    def on_available(self) -> None:
        if self.closed:
            return
        if self.waiting_for_session:
            self._try_session()
            return
        self.gateway.schedule_pump(self)

    def step(self, budget: Budget) -> bool:
        """The rest of a pump that used its slice, as a job of the scheduler (``GatewayContext.pump_later``):
        one more slice (ended by the budget too), then this connection's flush; done unless it used this
        slice as well."""
        self.pump(budget)
        self.gateway.flush_soon()
        return not self.continued

    def pump(self, budget: Budget | None = None) -> None:
        self.continued = False
        if self.closed or self.waiting_for_session:
            return
        conn = self.gateway.connection
        link = self.link
        peek_lock = self.mode is ReceiveMode.PEEK_LOCK
        gateway = self.gateway
        # A pump that may take more than one take's worth times its slice from its start, so the slice is
        # Slices.pump_s plus at most one take (before, the first take of 128 came on top of it: 15-19 ms
        # a slice on this project's machines); a smaller one reads no clock unless its take was full.
        slices = gateway.slices
        take_n = slices.pump_take
        stop = time.perf_counter() + slices.pump_s if link.link_credit > take_n else 0.0
        while conn.can_send(link):
            if gateway.output_full():
                # Backpressure: nothing more is taken from the broker (no locks, no delivery counts)
                # until the output has room; resume_writing or unblock pumps this receiver again.
                gateway.block(self)
                self.receiver.set_waiting(False)
                return
            try:
                batch = self.receiver.take(min(link.link_credit, take_n, link.session.remote_incoming_window))
            except BrokerError as exc:  # the session lock expired: this link is over
                conn.detach(link, exc.condition, exc.description or str(exc))
                self._release()
                return
            if not batch:
                break
            # A peek-locked delivery's tag is its lock key (the SDKs read the lock token from it); a
            # receive-and-delete delivery has no key and no lock, and goes settled with an empty tag, as
            # Service Bus sends it (the Python SDK's test_message_backcompat_receive_and_delete_databody
            # expects no tag; the JS, Java, Go and .NET SDKs read a lock token only from a 16-byte tag).
            # Every delivery carries delivery annotations: the lock token when locked, else an empty map.
            conn.send_transfers(link, [
                (d.lock_key or _NO_TAG,
                 encode_delivery(d.message, header_delivery_count=d.header_delivery_count,
                                 locked_until_ms=d.locked_until_ms, lock_token=d.lock_token_bytes,
                                 delivered=True),
                 d.lock_key)
                for d in batch
            ], settled=not peek_lock)
            if len(batch) == take_n:  # a full take: more may follow, so the slice's time is checked
                now = time.perf_counter()
                if not stop:
                    stop = now + slices.pump_s
                # the slice also ends once the store wants a commit of the locks taken so far (the flush
                # after this pump commits them; a durable commit's time grows with what it writes)
                if (now >= stop or gateway.broker.commit_wanted() or (budget is not None and budget.time_spent())) \
                        and conn.can_send(link):
                    self.continued = True  # a drain completes once the pump has used the credit it can
                    gateway.pump_later(self)
                    return
        if link.drain and link.link_credit > 0 and conn.can_send(link):
            conn.drain_complete(link)
        # New messages wake this receiver only while it could take them; without credit (or session
        # window) the next flow pumps it (on_credit), so idle links cost a send nothing.
        self.receiver.set_waiting(conn.can_send(link))

    # -- AMQP events ----------------------------------------------------------------------
    def on_credit(self, event: ev.LinkCreditChanged) -> None:
        if self.gateway.faults.active and event.link.link_credit > 0 and refused(
                self.gateway, RECEIVE, self.path, self._refuse_receive, session=self.ref.requires_session):
            return
        self.pump()
        if event.drain and self.link.drain and self.link.link_credit > 0 and not self.continued:
            self.gateway.connection.drain_complete(self.link)

    def _refuse_receive(self, fault: Refusal) -> None:
        """An injected receive fault: Service Bus ends the receive link with the error; the SDK reopens it
        to retry."""
        self.gateway.connection.detach(self.link, fault.condition, fault.description)
        self._release()

    def on_disposition(self, event: ev.DeliveryStateChanged) -> None:
        token = event.context
        state = event.state
        if type(state) is TransactionalState:
            self._transactional_disposition(event, state)
            return
        echo: Any = state
        receiver = self.receiver
        try:
            if token is None:
                return
            if self.gateway.faults.active and isinstance(state, (Accepted, Modified, Rejected)) and refused(
                    self.gateway, SETTLE, self.path, _refuse_settlement, session=self.ref.requires_session):
                return  # the connection was dropped (a refusal raised: the message stays locked)
            if type(state) is Accepted:
                self._admit()
                receiver.complete(token)  # the SDK's complete, one per message: no dispatch on the outcome
            elif isinstance(state, (Released, Modified, Rejected)):
                if needs_row(state):  # written (or refused and taken back) before it is confirmed
                    settle_stored(self.gateway.broker, self.gateway.commit_now, receiver.path, token,
                                  lambda: _apply_outcome(receiver, token, state))
                else:
                    self._admit()
                    _apply_outcome(receiver, token, state)
                if isinstance(state, Rejected):
                    echo = Rejected()
            else:
                return
        except BrokerError as exc:
            echo = Rejected(error(exc.condition, exc.description or str(exc)))
        if not event.settled:
            self.gateway.connection.settle_outgoing(self.link, event.delivery_id, echo)
        self.gateway.flush_soon()

    def _admit(self) -> None:
        """Refuse a settlement the store could not keep (its journal full and not foldable): ServerBusy,
        before anything changes, so the message stays locked by this receiver (gateway/settling.py)."""
        room = self.gateway.settle_room
        if room is not None:  # None: a store that keeps nothing, which always has room
            failure = room(self.path)
            if failure is not None:
                raise refusal(failure)

    def _transactional_disposition(self, event: ev.DeliveryStateChanged, state: TransactionalState) -> None:
        """A settlement inside a transaction (AMQP 1.0 4.4.2): checked now, applied on commit; the
        echo carries the same outcome inside a transactional-state, or the refusal."""
        token = event.context
        outcome = state.outcome
        echo: Any = TransactionalState(state.txn_id, Rejected() if isinstance(outcome, Rejected) else outcome)
        if token is None:
            return
        try:
            staged = _StagedSettlement(self.gateway.broker, self.receiver, token, outcome)
            self.gateway.transactions.stage_settlement(bytes(state.txn_id or b""), self.path, staged,
                                                       self.link.session)
            self.gateway.arm_transaction_timeout()
        except BrokerError as exc:
            echo = TransactionalState(state.txn_id, Rejected(error(exc.condition, exc.description or str(exc))))
        if not event.settled:
            self.gateway.connection.settle_outgoing(self.link, event.delivery_id, echo)
        self.gateway.flush_soon()

    def on_detach(self) -> None:
        if self._timeout_handle is not None:
            self._timeout_handle.cancel()
        self._release()

    def _release(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.gateway.receivers.discard(self)
        if self.receiver is not None:
            self.receiver.close()


class _StagedSettlement:
    """One settlement waiting for its transaction's commit: the outcome the client chose for the
    message ``token`` locked by ``receiver``."""

    __slots__ = ("broker", "outcome", "receiver", "token")

    def __init__(self, broker: GatewayBroker, receiver: Any, token: Any, outcome: Any) -> None:
        if not isinstance(outcome, (Accepted, Modified, Rejected, Released)):
            raise BrokerError(f"Outcome {type(outcome).__name__} cannot settle a message.", "amqp:not-implemented")
        self.broker = broker
        self.receiver = receiver
        self.token = token
        self.outcome = outcome

    def check(self) -> None:
        self.receiver.check_lock(self.token)

    def apply(self) -> None:
        _apply_outcome(self.receiver, self.token, self.outcome)

    def undo_point(self) -> Callable[[], None]:
        return self.broker.undo_point(self.receiver.path, [self.token])


def _apply_outcome(receiver: Any, token: Any, outcome: Accepted | Released | Modified | Rejected) -> None:
    """A client's settlement of a peek-locked message, on the link or at a transaction's commit:
    accepted completes, released returns uncounted, modified defers (undeliverable-here) or abandons
    with the annotations as properties to modify, rejected dead-letters with the error's
    DeadLetterReason / DeadLetterErrorDescription and the rest of its info as properties."""
    if isinstance(outcome, Accepted):
        receiver.complete(token)
    elif isinstance(outcome, Released):
        receiver.release(token)
    elif isinstance(outcome, Modified):
        props = outcome.message_annotations
        props = {str(k): v for k, v in props.items()} if isinstance(props, dict) else None
        if outcome.undeliverable_here:
            receiver.defer(token, props)
        else:
            receiver.abandon(token, props)
    else:
        reason = description = None
        props = None
        err = outcome.error
        if err is not None and isinstance(err.info, dict):
            info = {str(k): v for k, v in err.info.items()}
            reason = info.pop("DeadLetterReason", None)
            description = info.pop("DeadLetterErrorDescription", None)
            props = info or None
        receiver.dead_letter(token, text_or_none(reason), text_or_none(description), props)


# The delivery tag of a receive-and-delete delivery: empty (AMQP 1.0 2.7.5 allows a zero-length tag).
_NO_TAG = b""


def _session_filter_value(requested: Any, session_id: str) -> Any:
    """The session id for the attach reply's filter, in the form the client asked in.

    A filter-set's values are described types (AMQP 1.0 part 3, 3.5.8 "filter-set": each value is null
    or a described filter); the Service Bus AMQP guide's session filter is the described
    ``com.microsoft:session-filter`` (0x00000137:0000000C) around the session id. go-amqp refuses a
    plain string there ("invalid described type header"), so the reply keeps the client's descriptor;
    clients that sent the bare id (rhea, pyamqp) get the bare id back, which they read as it is.
    """
    if isinstance(requested, Described):
        return Described(requested.descriptor, session_id)
    return session_id
