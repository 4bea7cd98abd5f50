"""One client connection: AMQP events in, broker calls, AMQP frames out.

The gateway owns the link roles Service Bus clients use: the ``$cbs`` pair (token exchange), the
``<entity>/$management`` pair (request/response operations), senders into entities and receivers
out of them. It holds no socket: the server feeds it bytes and flushes what it produces, so the
same object runs under asyncio or in a test.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Connection, Link, Phase
from ..amqp.message import MessageDecodeError, encode_message, parse_message
from ..amqp.performatives import (
    SND_SETTLED,
    Accepted,
    Modified,
    Properties,
    Rejected,
    Released,
    Source,
    error,
    from_described,
)
from ..amqp.states import EndpointState
from ..amqp.transactions import LOCAL_TRANSACTIONS, Coordinator, Declare, Declared, Discharge, TransactionalState
from ..amqp.types import Array, Described, Int, Long, Symbol
from ..auth import LISTEN, SEND, Grant, SasValidator, claims_required
from ..broker.api import BrokerAPI
from ..broker.errors import BrokerError
from ..broker.transactions import DEFAULT_TIMEOUT_S, TransactionCoordinator
from ..model import IncomingMessage, ReceiveMode
from ..scheduling import DEFAULT_SLICES, Slices
from .cbs import RefusalLog, audience_entity, handle_put_token
from .deliveries import BATCH_MESSAGE_FORMAT, BatchDecoder, encode_delivery, incoming_messages
from .faults import CONNECT, DROP, LATENCY, MANAGEMENT, PUT_TOKEN, RECEIVE, SETTLE, Faults, Refusal
from .faults import SEND as SEND_OPERATION
from .limits import (
    COORDINATOR_MAX_MESSAGE_BYTES,
    DEFAULT_LIMITS,
    RESOURCE_LIMIT_EXCEEDED,
    UNAUTHORIZED_ACCESS,
    Limits,
)
from .management import ManagementHandler, MgmtReply, required_right
from .settling import needs_row, refusal, settle_stored

log = logging.getLogger("sbemulator")
_MANAGEMENT_FAULT_KINDS = {"com.microsoft:update-disposition": SETTLE, "com.microsoft:schedule-message": SEND_OPERATION}
# $management operations of a session's lock holder: a lock-lost fault is the session's lock (faults.py)
_SESSION_OPERATIONS = frozenset({"com.microsoft:renew-session-lock", "com.microsoft:get-session-state",
                                 "com.microsoft:set-session-state"})

SESSION_FILTER = Symbol("com.microsoft:session-filter")
ARGUMENT_ERROR = "com.microsoft:argument-error"
LOCKED_UNTIL_UTC = Symbol("com.microsoft:locked-until-utc")
TIMEOUT_PROPERTY = Symbol("com.microsoft:timeout")
MAX_BATCH_SIZE = Symbol("com.microsoft:max-message-batch-size")
# A send-via link (Service Bus "Transfers and send via"): the target is the transfer entity, the
# final destination is this link property.
TRANSFER_DESTINATION = Symbol("com.microsoft:transfer-destination-address")
DOTNET_EPOCH_TICKS = 621355968000000000
SENDER_CREDIT = 1000  # per link, topped up once half is used; Service Bus grants about as much
# How large the receiver pump's, the event backlog's and batch decoding's slices are: the namespace's
# Slices (sbemulator/scheduling/slices.py: pump_take, pump_s, dispatch_events, dispatch_s,
# batch_decode_items), given to each Gateway like its Limits.
DEFAULT_SESSION_WAIT_MS = 60_000


def _decoded_in_slices(event: ev.MessageReceived) -> bool:
    """Whether a transfer is a batch large enough to be decoded in slices (Connection.BATCH_IN_SLICES)
    sent on an entity sender link (the only links that take batches)."""
    return (event.message_format == BATCH_MESSAGE_FORMAT and len(event.payload) > Connection.BATCH_IN_SLICES
            and type(event.link.context) is EntitySenderLink)


def _room_to_settle(path: str) -> BrokerError | None:
    return None


def _nothing_to_commit() -> BrokerError | None:
    """A gateway without a server (tests drive it directly) has no store to commit."""
    return None


def entity_path(address: str | None) -> str:
    """'amqps://host:5671/Queue/' -> 'Queue' (case kept; the broker compares case-insensitively)."""
    text = (address or "").strip()
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("/", 1)[1] if "/" in text else ""
    return text.strip("/")


def _auth_scope(path: str) -> str:
    """The path a token must cover: the entity itself, without sub-queues or $management."""
    parts = path.split("/")
    lowered = [p.lower() for p in parts]
    for marker in ("$management", "$deadletterqueue", "$transfer"):
        if marker in lowered:
            parts = parts[: lowered.index(marker)]
            lowered = lowered[: len(parts)]
    return "/".join(parts)


def _resource_uri(address: str | None, hostname: str, path: str) -> str:
    """'sb://<host>/<path>': how Service Bus names the resource in an authorization error (the host
    from the link's address, else the one the client's open named)."""
    text = (address or "").strip()
    host = text.split("://", 1)[1].split("/", 1)[0] if "://" in text else hostname
    return f"sb://{host}/{path}"


def dotnet_ticks(unix_ms: int) -> int:
    return DOTNET_EPOCH_TICKS + unix_ms * 10_000


class Gateway:
    """Connects one AMQP connection to the broker."""

    def __init__(
        self,
        broker: BrokerAPI,
        validator: SasValidator,
        *,
        request_flush: Callable[[Gateway], None],
        call_later: Callable[[float, Callable[[], None]], Any],
        wall_clock: Callable[[], float] = time.time,
        max_frame_size: int = 1024 * 1024,
        idle_timeout_ms: int | None = 240_000,
        transaction_timeout_s: float = DEFAULT_TIMEOUT_S,
        peer: str = "",
        limits: Limits = DEFAULT_LIMITS,
        slices: Slices = DEFAULT_SLICES,
        over_capacity: bool = False,
        faults: Faults | None = None,
        hold_output: Callable[[float], None] | None = None,
        abort: Callable[[], None] | None = None,
        pause_input: Callable[[bool], None] | None = None,
    ) -> None:
        self.broker = broker
        # Stops (True) and resumes (False) reading this connection's socket while events it sent wait
        # to be handled in slices (_dispatch_backlog).
        self.pause_input = pause_input
        self._backlog: deque[Any] = deque()
        self._decoding: BatchDecoder | None = None  # the batch at the backlog's front, decoded in slices
        self._input_paused = False
        # Injected faults (faults.py): the emulator's rules; hold_output delays what this connection
        # writes (a latency fault), abort closes its socket without a close frame (a dropped connection).
        self.faults = faults if faults is not None else Faults()
        self.hold_output = hold_output
        self.abort = abort
        self.limits = limits
        self.slices = slices  # how large this connection's slices of long work are (the pump, the backlog)
        # The namespace already has limits.max_connections connections: this one is refused at its open.
        self.over_capacity = over_capacity
        self.validator = validator
        self.refusals = RefusalLog()  # this connection's refused put-tokens, logged at a bounded rate
        self.request_flush = request_flush
        self.call_later = call_later
        self.wall_clock = wall_clock
        self.peer = peer
        self.connection = Connection(
            max_frame_size=max_frame_size,
            idle_timeout_ms=idle_timeout_ms,
            channel_max=limits.channel_max,
            authenticate_plain=self._authenticate_plain,
        )
        self.management = ManagementHandler(broker, commit=self.commit_now)
        # What data_to_send returns, as the connection's own bound method: the server's flush calls it
        # once per write, one call instead of two.
        self.take_output: Callable[[], bytes | bytearray] = self.connection.data_to_send
        self.grants: list[Grant] = []
        self.plain_authenticated = False
        self.plain_key_name: str | None = None  # the SASL PLAIN user (a key name), for log lines
        self.plain_rights: frozenset[str] = frozenset()
        self.hostname = ""  # the host the client's open frame named
        self.cbs_reply_links: list[Link] = []
        self._cbs_request_link: Link | None = None  # the client's $cbs sender
        self.mgmt_reply_links: dict[str, Link] = {}
        self.receivers: set[EntityReceiverLink] = set()
        self.closed = False
        # Receivers the broker said have work, pumped by run_pending (the server reads the set first:
        # most flushes have none, and the call is saved).
        self.pump_pending: set[EntityReceiverLink] = set()
        # Sends handled but not yet settled: (link handler, delivery id, pre-settled, messages). They are
        # settled after the store's commit (settle_sends), which the server makes, or this gateway
        # through commit_window before receivers could take what they sent.
        self.sends: list[tuple[EntitySenderLink, int, bool, list[IncomingMessage]]] = []
        self.commit_window: Callable[[], BrokerError | None] = _nothing_to_commit
        # Whether a settlement of an entity can be kept, asked before it is applied (gateway/settling.py):
        # None, or what it is refused with. The server sets it (the store's ensure_room).
        self.settle_room: Callable[[str], BrokerError | None] = _room_to_settle
        # Backpressure: while the transport's buffer is above its high-water mark (write_paused) or
        # this connection's own unwritten output is, receivers take nothing from the broker; the ones
        # that stopped for that reason wait in ``blocked`` until there is room again.
        self.write_paused = False
        self.blocked: set[EntityReceiverLink] = set()
        self._auth_timer: Any = call_later(limits.auth_timeout_s, self._auth_deadline_passed)
        # When the earliest token this connection holds expires: its entity links are checked then
        # (_tokens_expired). A real-time timer, as token expiry is (the SDKs sign with the machine's clock).
        self._expiry_timer: Any = None
        self._expiry_due = 0.0
        self.transaction_timeout_s = transaction_timeout_s
        self._transactions: TransactionCoordinator | None = None
        self._transaction_timer: Any = None

    # ------------------------------------------------------------------ transactions
    @property
    def transactions(self) -> TransactionCoordinator:
        """This connection's transactions (made when the first coordinator link attaches)."""
        if self._transactions is None:
            self._transactions = TransactionCoordinator(self.broker, timeout_s=self.transaction_timeout_s)
        return self._transactions

    def arm_transaction_timeout(self) -> None:
        """Wake when the oldest open transaction times out, so its staged work is dropped then
        rather than at its discharge."""
        coordinator = self._transactions
        if coordinator is None or self._transaction_timer is not None:
            return
        due = coordinator.next_timeout()
        if due is not None:
            delay = max(0.0, due - time.monotonic()) + 0.01
            self._transaction_timer = self.call_later(delay, self._transaction_timeout)

    def _transaction_timeout(self) -> None:
        self._transaction_timer = None
        if self._transactions is not None and not self.closed:
            self._transactions.expire()
            self.arm_transaction_timeout()

    # ------------------------------------------------------------------ driving
    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        connection = self.connection
        if self._backlog:  # input read while earlier events still wait their turn: after them, in order
            self._backlog.extend(connection.receive_data(data))
            connection.in_slices = False
            return
        self._dispatch(connection.receive_data(data))
        # Deliveries before a flow-control violation are answered first, then the link or session ends
        # (after the events still waiting in slices, when there are any: _dispatch_backlog).
        if connection.violations and not self._backlog:
            self._answer_violations()

    def _answer_violations(self) -> None:
        connection = self.connection
        if connection.violations:
            if self.sends:  # stored and settled before the detach or end that refuses the rest
                self.settle_sends(self.commit_window())
            self._dispatch(connection.answer_violations())

    def connection_lost(self) -> None:
        self._dispatch(self.connection.connection_lost())
        self._close_all()

    # ------------------------------------------------------------------ backpressure
    def output_full(self) -> bool:
        """Whether receivers must stop taking deliveries: the transport asked us to pause, or what this
        connection produced and has not handed to the transport yet is above the high-water mark."""
        return self.write_paused or self.connection.pending_output >= self.limits.write_high_water

    def block(self, handler: EntityReceiverLink) -> None:
        """``handler`` stopped for backpressure: pump it again once there is room."""
        self.blocked.add(handler)

    def pause_writing(self) -> None:
        """The transport's write buffer went above its high-water mark."""
        self.write_paused = True

    def resume_writing(self) -> None:
        """The transport's write buffer drained below its low-water mark: the stopped receivers go on."""
        self.write_paused = False
        self.unblock()

    def unblock(self) -> None:
        """Output has room again (written to a transport that did not pause): pump the stopped receivers."""
        if self.blocked and not self.write_paused:
            self.pump_pending |= self.blocked
            self.blocked.clear()
            self.request_flush(self)

    def on_timer(self) -> None:
        self._dispatch(self.connection.handle_timer())

    def run_pending(self) -> None:
        """Deliver to receivers the broker said have work (called by the server before flushing)."""
        pending = self.pump_pending
        while pending:
            pending.pop().pump()

    def data_to_send(self) -> bytes | bytearray:
        """Bytes the server should write now (the connection's, handed over whole)."""
        return self.take_output()

    # ------------------------------------------------------------------ what the server asks
    # (the server knows the gateway, not the AMQP connection inside it)
    @property
    def connection_closed(self) -> bool:
        """The AMQP connection is closed: once its last frames are written, the socket can close."""
        return self.connection.closed

    def wants_heartbeats(self) -> bool | None:
        """Whether the peer's open announced an idle timeout, so frames are due before our own idle
        check; None while its open has not arrived (the server asks once per read until it has)."""
        connection = self.connection
        if connection.phase is not Phase.OPENED:
            return None
        return bool(connection.remote_idle_timeout_ms)

    def next_timer(self) -> float | None:
        """When :meth:`on_timer` next has work (``time.monotonic`` seconds), or None."""
        return self.connection.next_timer()

    def shut_down(self, description: str) -> None:
        """Close the connection with ``amqp:connection:forced`` (the emulator is stopping)."""
        if not self.connection.closed:
            self.connection.close("amqp:connection:forced", description)

    def _dispatch(self, events: list) -> None:
        connection = self.connection
        # A disposition over 100,000 deliveries, or a batch of 1,500 messages to decode
        if connection.in_slices or len(events) > self.slices.dispatch_events:
            connection.in_slices = False
            self._backlog.extend(events)
            self._dispatch_backlog()
            return
        for event in events:
            try:
                self._handle(event)
            except Exception:  # a bug in one handler must not take the whole server down
                log.exception("error handling %r", type(event).__name__)
                self.connection.close("amqp:internal-error", "the emulator failed to handle a frame")
        if self.pump_pending:
            if self.sends:  # what they sent is stored (or taken back) before any receiver can take it
                self.settle_sends(self.commit_window())
            self.run_pending()

    def _dispatch_backlog(self) -> None:
        """Handle the waiting events in slices of real time: after a slice the rest waits for the next
        loop iteration, with this connection's reading paused (its later input is queued behind them), so
        one frame that stands for 100,000 settlements holds no other connection for all of them."""
        backlog = self._backlog
        connection = self.connection
        slices = self.slices
        stop = time.perf_counter() + slices.dispatch_s
        while backlog or (connection.held_input and not self.closed):
            if not backlog:  # the frames that came after the range, now that it is expanded to its end
                backlog.extend(connection.receive_data(b""))
                connection.in_slices = False
                continue
            first = backlog[0]
            kind = type(first)
            if kind is ev.DeliveryRangeStateChanged:  # the next slice of the range, then the rest
                chunk = self.connection.expand_range(first, slices.dispatch_events)
                if first.done:
                    backlog.popleft()
            elif kind is ev.MessageReceived and _decoded_in_slices(first):
                # A batch's next slice of messages decoded; once all are, the batch goes to the broker in
                # one call (a slice of its own when this one is used up: the loop checks the time).
                chunk = []
                try:
                    if self._decode_batch_slice(first):
                        stop = 0.0  # decoded: its send (~15 ms for 1,500 messages) starts a slice of its own
                except Exception:  # a bug of ours must not take the whole server down
                    log.exception("error decoding a batch")
                    self.connection.close("amqp:internal-error", "the emulator failed to handle a frame")
            else:
                chunk = []
                while backlog and len(chunk) < slices.dispatch_events:
                    event = backlog[0]
                    kind = type(event)
                    if kind is ev.DeliveryRangeStateChanged or (kind is ev.MessageReceived
                                                                 and _decoded_in_slices(event)):
                        break  # next, in a slice of its own
                    chunk.append(backlog.popleft())
            for event in chunk:
                try:
                    self._handle(event)
                except Exception:  # a bug in one handler must not take the whole server down
                    log.exception("error handling %r", type(event).__name__)
                    self.connection.close("amqp:internal-error", "the emulator failed to handle a frame")
            if self.closed:
                backlog.clear()
            elif backlog and (time.perf_counter() >= stop or self.broker.commit_wanted()):
                self._after_events()
                if not self._input_paused:
                    self._input_paused = True
                    # a violation in the same input is answered after these events, not at the next flush
                    self.connection.defer_violations = True
                    if self.pause_input is not None:
                        self.pause_input(True)
                self.call_later(0, self._continue_backlog)
                return
        self._after_events()
        if self._input_paused:
            self._input_paused = False
            self.connection.defer_violations = False
            if self.pause_input is not None:
                self.pause_input(False)
        self._answer_violations()

    def _decode_batch_slice(self, event: ev.MessageReceived) -> bool:
        """Decode the next slice of the batch at the backlog's front, or, when it is decoded, hand it to
        its sender link whole (and take it off the backlog). True when this step finished the decoding."""
        decoder = self._decoding
        if decoder is None or decoder.payload is not event.payload:
            decoder = self._decoding = BatchDecoder(event.payload)
        if not decoder.done:
            return decoder.step(self.slices.batch_decode_items)  # the time is checked, then the next step or the send
        self._backlog.popleft()
        self._decoding = None
        handler = event.link.context
        if type(handler) is EntitySenderLink:  # still attached: the detach would come after it
            handler.on_message(event, None if decoder.failed else decoder.messages)
        return False

    def _continue_backlog(self) -> None:
        if self._backlog and not self.closed:
            self._dispatch_backlog()
        self.request_flush(self)  # commit, then write what the slice produced

    def _after_events(self) -> None:
        if self.pump_pending:
            if self.sends:  # what they sent is stored (or taken back) before any receiver can take it
                self.settle_sends(self.commit_window())
            self.run_pending()

    def commit_now(self) -> BrokerError | None:
        """Commit what this connection did so far, before answering a write that must be stored first
        (a $management schedule-message, a transaction's commit); its sends are settled with the outcome.
        None when written, else the error (QuotaExceeded, ServerBusy) the write is refused with."""
        failure = self.commit_window()
        if self.sends:
            self.settle_sends(failure)
        return failure

    def settle_sends(self, failure: BrokerError | None) -> None:
        """Settle the sends handled since the last commit: accepted once stored, or, when the store
        could not write them (``failure``: QuotaExceeded for a full disk, ServerBusy for another write
        error), taken back from the broker and rejected with that error. The connection and its links
        stay; the sender may try again."""
        sends = self.sends
        self.sends = []
        conn = self.connection
        if failure is None:
            for handler, delivery_id, settled, _ in sends:
                if not settled:
                    conn.settle_incoming(handler.link, delivery_id, Accepted())
            return
        broker = self.broker
        for handler, _, _, messages in sends:
            broker.withdraw(handler.path, messages)
        refusal = Rejected(error(failure.condition, failure.description))
        for handler, delivery_id, settled, _ in sends:
            if not settled:
                conn.settle_incoming(handler.link, delivery_id, refusal)

    def _handle(self, event: Any) -> None:
        kind = type(event)
        if kind is ev.MessageReceived:
            if event.link.context is not None:
                event.link.context.on_message(event)
        elif kind is ev.DeliveryStateChanged:
            if event.link.context is not None:
                event.link.context.on_disposition(event)
        elif kind is ev.LinkCreditChanged:
            ctx = event.link.context
            if ctx is not None:
                ctx.on_credit(event)
        elif kind is ev.LinkAttachRequested:
            self._on_attach(event.link)
        elif kind is ev.LinkDetached:
            ctx = event.link.context
            if ctx is not None:
                ctx.on_detach()
            event.link.context = None
        elif kind is ev.ConnectionOpened:
            self.hostname = event.hostname or ""
            if self.over_capacity:
                self.connection.close(
                    RESOURCE_LIMIT_EXCEEDED,
                    f"The maximum number of concurrent connections ({self.limits.max_connections}) on the "
                    "namespace has been reached.",
                )
            elif self.faults.active:
                refusal = self.fault(CONNECT)
                if refusal is not None and refusal.effect is not DROP:
                    self.connection.close(refusal.condition, refusal.description)
        elif kind is ev.ConnectionClosed:
            self._close_all()

    def _close_all(self) -> None:
        self._backlog.clear()
        self._decoding = None
        if self.closed:
            return
        self.closed = True
        self._cancel_auth_timer()
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        self.blocked.clear()
        if self._transactions is not None:
            self._transactions.rollback_all()  # the connection is gone: nothing it did not commit applies
        if self._transaction_timer is not None:
            self._transaction_timer.cancel()
            self._transaction_timer = None
        for handler in list(self.receivers):
            handler.on_detach()
        self.receivers.clear()

    def schedule_pump(self, handler: EntityReceiverLink) -> None:
        self.pump_pending.add(handler)
        self.request_flush(self)

    def pump_later(self, handler: EntityReceiverLink) -> None:
        """``handler`` used its slice: pump it again at the next loop iteration (not in this flush's
        ``run_pending``, which would go on without yielding)."""
        self.call_later(0, lambda: self.schedule_pump(handler))

    # ------------------------------------------------------------------ auth
    def _authenticate_plain(self, username: str, password: str) -> bool:
        rule = self.validator.namespace_rule(username)
        ok = rule is not None and password in rule.signing_keys()
        self.plain_authenticated = ok
        self.plain_key_name = username if ok else None
        self.plain_rights = rule.rights if ok and rule is not None else frozenset()
        if ok:
            self._cancel_auth_timer()
        return ok

    def add_grant(self, grant: Grant) -> None:
        """A put-token succeeded: the connection is authenticated (for the token's scope).

        The SDKs put a token again for every link before the last one expires, so a connection that
        lives for days would pile up grants: one per scope, key and rights is kept (the one that lasts
        longest) and expired ones are dropped, so the list is bounded by the scopes in use."""
        now = self.wall_clock()
        kept = [g for g in self.grants if g.expires_at > now]
        for i, old in enumerate(kept):
            if (old.scope, old.key_name, old.rights) == (grant.scope, grant.key_name, grant.rights):
                if grant.expires_at > old.expires_at:
                    kept[i] = grant
                break
        else:
            kept.append(grant)
        self.grants = kept
        self._cancel_auth_timer()
        self._arm_token_expiry()

    def _arm_token_expiry(self) -> None:
        """Wake when the earliest token held expires (a renewal that outlasts it leaves the timer to find
        nothing to do then, and re-arms it for the next one)."""
        if self.closed or not self.grants:
            return
        due = min(grant.expires_at for grant in self.grants)
        if self._expiry_timer is not None:
            if self._expiry_due <= due:
                return
            self._expiry_timer.cancel()
        self._expiry_due = due
        self._expiry_timer = self.call_later(max(0.0, due - self.wall_clock()) + 0.01, self._tokens_expired)

    def _tokens_expired(self) -> None:
        """A token expired: every entity link it authorized and no other token still does is detached.

        "AMQP 1.0 in Azure Service Bus", claims-based authorization: "When a token expires, Service Bus
        promptly drops all links on the connection to the respective entity." The service detaches them
        with amqp:link:detach-forced, "The link '...' is force detached. Code: RenewToken. Details:
        Unauthorized access. 'Listen' claim(s) are required ..." (as reported in azure-sdk-for-python
        issue 23487 and dapr components-contrib issue 809); the SDKs then put a new token and attach again.
        A connection authenticated with SASL PLAIN holds no token and is not concerned."""
        self._expiry_timer = None
        if self.closed or self.connection.closed:
            return
        now = self.wall_clock()
        self.grants = [grant for grant in self.grants if grant.expires_at > now]
        if not self.plain_authenticated:
            dropped = False
            for session in list(self.connection.sessions_by_channel.values()):
                for link in list(session.links_by_handle.values()):
                    dropped |= self._drop_if_unauthorized(link)
            if dropped:
                self.request_flush(self)
        self._arm_token_expiry()

    def _drop_if_unauthorized(self, link: Link) -> bool:
        """Detach an entity link whose right no unexpired token grants any longer; whether it did."""
        handler = link.context
        if isinstance(handler, EntityReceiverLink):
            right, paths = LISTEN, [handler.path]
        elif isinstance(handler, EntitySenderLink):
            right, paths = SEND, [handler.path] if handler.via is None else [handler.via, handler.path]
        else:
            return False
        for path in paths:
            if right not in self.rights_for(path):
                resource = _resource_uri(link.address, self.hostname, _auth_scope(path))
                self.connection.detach(
                    link, "amqp:link:detach-forced",
                    f"The link '{link.name}' is force detached. Code: RenewToken. Details: "
                    f"{claims_required(right, resource)}")
                handler.on_detach()
                return True
        return False

    # ------------------------------------------------------------------ faults
    def fault(self, operation: str, entity: str = "", *, session: bool = False) -> Refusal | None:
        """The injected fault for this operation now (call only while ``faults.active``): None to go on
        (no rule applied, or a latency one, which holds this connection's output and lets the operation
        proceed); a refusal to answer with, or one whose effect is DROP after the socket was dropped
        (then do nothing more)."""
        uri = f"sb://{self.hostname or 'localhost'}/{entity}" if entity else ""
        refusal = self.faults.check(operation, entity, uri, session=session)
        if refusal is None:
            return None
        if refusal.effect is LATENCY:
            if self.hold_output is not None:
                self.hold_output(refusal.rule.seconds)
            return None
        if refusal.effect is DROP:
            if self.abort is not None:
                self.abort()
            else:  # no socket to drop (a test of the gateway alone): end the connection at once
                self.connection.close("amqp:connection:forced", "The connection was dropped (injected fault).")
            self._close_all()
        return refusal

    def _cancel_auth_timer(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def _auth_deadline_passed(self) -> None:
        """Nothing valid arrived within limits.auth_timeout_s of connecting: close the connection."""
        self._auth_timer = None
        if self.closed or self.plain_authenticated or self.grants or self.connection.closed:
            return
        self.connection.close(
            UNAUTHORIZED_ACCESS,
            f"The connection was not authenticated within {self.limits.auth_timeout_s:g} seconds: put a valid "
            "token on $cbs (or use SASL PLAIN credentials) after connecting.",
        )
        self._close_all()
        self.request_flush(self)

    def is_authorized(self, path: str) -> bool:
        if self.plain_authenticated:
            return True
        now = self.wall_clock()
        return any(grant.covers(path, now) for grant in self.grants)

    def rights_for(self, path: str) -> frozenset[str]:
        """The rights the connection holds for ``path``: those of every unexpired token covering it
        (each link's put-token adds one), or of the SASL PLAIN key."""
        if self.plain_authenticated:
            return self.plain_rights
        now = self.wall_clock()
        rights: frozenset[str] = frozenset()
        for grant in self.grants:
            if grant.covers(path, now):
                rights |= grant.rights
        return rights

    def missing_claim(self, path: str, right: str, address: str | None) -> str | None:
        """None when the connection may do what needs ``right`` on ``path``; otherwise the
        description Service Bus refuses it with."""
        if right in self.rights_for(path):
            return None
        return claims_required(right, _resource_uri(address, self.hostname, _auth_scope(path)))

    def entity_exists(self, path: str) -> bool:
        try:
            self.broker.resolve(path)
        except BrokerError:
            return False
        return True

    def _log_missing(self, path: str, exc: BrokerError) -> None:
        """One line (bounded, as refused tokens are) naming an entity a link asked for that does not exist."""
        if exc.condition == "amqp:not-found":
            keys = sorted({grant.key_name for grant in self.grants} | (
                {self.plain_key_name} if self.plain_key_name else set())) or ["(none)"]
            self.refusals.warning("attach refused for key name %s: entity %r does not exist in this namespace "
                                  "(is it in the topology file?)", ", ".join(map(repr, keys)), path)

    # ------------------------------------------------------------------ attach
    def _cbs_link_open(self, link: Link) -> bool:
        """Whether a $cbs link of ``link``'s role is attached on this connection already (a detached
        link's context is None)."""
        if link.is_sender:
            return any(_attached(other) for other in self.cbs_reply_links)
        return self._cbs_request_link is not None and _attached(self._cbs_request_link)

    def _on_attach(self, link: Link) -> None:
        if self.connection.link_count > self.limits.max_links_per_connection:
            self.connection.reject_attach(
                link, RESOURCE_LIMIT_EXCEEDED,
                f"Cannot open more than {self.limits.max_links_per_connection} links on one connection; "
                "open another connection (another ServiceBusClient) for more.",
            )
            return
        address = link.address
        path = entity_path(address)
        lowered = path.lower()
        if lowered == "$cbs":
            if self._cbs_link_open(link):
                # Service Bus takes one $cbs sender and one receiver per connection and refuses another
                # with amqp:not-allowed; the Go SDK resets its connection on that (its
                # internal/TestAMQPLinksCBSLinkStillOpen: a claim negotiation left a $cbs link open).
                self.connection.reject_attach(
                    link, "amqp:not-allowed",
                    f"A $cbs {'receiver' if link.is_sender else 'sender'} link is already open on this "
                    "connection; only one $cbs link pair is allowed per connection.")
                return
            if link.is_sender:
                link.context = ReplyLink(self, link)
                self.cbs_reply_links = [*(other for other in self.cbs_reply_links if other.context is not None),
                                        link]
                self.connection.accept_attach(link)
            else:
                # Before authentication this is the only link a client may send on: its messages are
                # bounded by the size of a put-token request.
                link.context = CbsRequestLink(self, link)
                self._cbs_request_link = link
                self.connection.accept_attach(link, max_message_size=self.limits.max_cbs_message_bytes)
            if not link.is_sender:
                self.connection.grant_credit(link, SENDER_CREDIT)
            return
        if not link.is_sender and isinstance(link.target, Coordinator):
            # AMQP 1.0 4.2: the transaction controller attaches a sender to a coordinator target. It
            # needs no token of its own: every transactional transfer or settlement goes over an
            # entity link that needed one.
            # A declare or a discharge is a few dozen bytes: the link's max-message-size is small, so a
            # client that has not authenticated cannot make the emulator buffer a large delivery here.
            link.context = CoordinatorLink(self, link)
            self.transactions  # noqa: B018 - made now, so a declare finds it
            self.connection.accept_attach(link, target=Coordinator(Array((Symbol(LOCAL_TRANSACTIONS),), "symbol")),
                                          max_message_size=COORDINATOR_MAX_MESSAGE_BYTES)
            self.connection.grant_credit(link, SENDER_CREDIT)
            return
        if not self.is_authorized(path):
            self.connection.reject_attach(
                link, "amqp:unauthorized-access",
                f"Unauthorized access. A valid token for '{_auth_scope(path)}' is required (put-token on $cbs).",
            )
            return
        # A client's sender needs Send, its receiver Listen ("Shared Access Signature authentication
        # with Service Bus", rights); a $management link's operations are checked one by one.
        if not lowered.endswith("/$management"):
            missing = self.missing_claim(path, LISTEN if link.is_sender else SEND, address)
            if missing is not None:
                self.connection.reject_attach(link, "amqp:unauthorized-access", missing)
                return
        if lowered.endswith("/$management"):
            entity = path[: -len("/$management")]
            try:
                mgmt_ref = self.broker.resolve(entity)
            except BrokerError as exc:
                self._log_missing(entity, exc)
                self.connection.reject_attach(link, exc.condition, exc.description or str(exc))
                return
            if link.is_sender:
                link.context = ReplyLink(self, link)
                self.mgmt_reply_links[address or ""] = link
                target = link.target
                if target is not None and getattr(target, "address", None):
                    self.mgmt_reply_links[target.address] = link
                self.connection.accept_attach(link)
            else:
                # A request is bounded by the entity's message size, as a send is: the messages a
                # schedule-message carries must fit one message of the entity (the Java SDK encodes
                # them into a buffer of the link's max-message-size), and a larger request is
                # refused with amqp:link:message-size-exceeded while it streams.
                link.context = ManagementRequestLink(self, link, entity)
                self.connection.accept_attach(link, max_message_size=mgmt_ref.max_message_size)
            if not link.is_sender:
                self.connection.grant_credit(link, SENDER_CREDIT)
            return
        try:
            ref = self.broker.resolve(path)
        except BrokerError as exc:
            self._log_missing(path, exc)
            self.connection.reject_attach(link, exc.condition, exc.description or str(exc))
            return
        if link.is_sender:
            EntityReceiverLink.attach(self, link, path, ref)
        else:
            if not ref.can_send:
                self.connection.reject_attach(
                    link, "amqp:not-allowed", f"Cannot send to '{ref.path}': it is not a queue or a topic."
                )
                return
            via = None
            destination = (link.properties or {}).get(TRANSFER_DESTINATION)
            if destination is not None:
                # Send-via: the link targets the transfer entity; messages go on to the destination.
                via, path = path, entity_path(_str(destination))
                if not self.is_authorized(path):
                    self.connection.reject_attach(
                        link, "amqp:unauthorized-access",
                        f"Unauthorized access. A valid token for '{_auth_scope(path)}' is required "
                        "(put-token on $cbs).",
                    )
                    return
                try:
                    dest_ref = self.broker.resolve(path)
                except BrokerError as exc:
                    self.connection.reject_attach(link, exc.condition, exc.description or str(exc))
                    return
                if not dest_ref.can_send:
                    self.connection.reject_attach(
                        link, "amqp:not-allowed", f"Cannot send to '{dest_ref.path}': it is not a queue or a topic."
                    )
                    return
                ref = dest_ref
            link.context = EntitySenderLink(self, link, path, ref, via=via)
            self.connection.accept_attach(
                link,
                max_message_size=ref.max_message_size,
                properties={MAX_BATCH_SIZE: Long(ref.max_message_size)},
            )
            self.connection.grant_credit(link, SENDER_CREDIT)

    # ------------------------------------------------------------------ replies
    def send_reply(self, reply_to: str | None, links: list[Link] | None, payload: bytes) -> None:
        link = None
        if links is not None:
            link = next((candidate for candidate in reversed(links) if candidate.context is not None), None)
        elif reply_to is not None:
            link = self.mgmt_reply_links.get(reply_to)
        if link is None or link.context is None:
            log.warning("no reply link for %r; dropping the response", reply_to)
            return
        link.context.send(payload)


class LinkHandler:
    """The handler of one attached link (``Link.context``): what the gateway tells it about its link.
    Every method does nothing here; a kind of link overrides what it needs (a sending link of ours
    receives no messages, a request link needs no credit callbacks, and so on)."""

    def on_message(self, event: ev.MessageReceived) -> None:
        """A transfer arrived on the link (the client is the sender)."""

    def on_disposition(self, event: ev.DeliveryStateChanged) -> None:
        """The client settled or changed the state of one of our deliveries."""

    def on_credit(self, event: ev.LinkCreditChanged) -> None:
        """The client's flow changed the link's credit (or asked to drain it)."""

    def on_detach(self) -> None:
        """The link is gone (detached by either side, or the connection ended)."""


class ReplyLink(LinkHandler):
    """Our sending side of a request/response pair: replies wait for credit."""

    def __init__(self, gateway: Gateway, link: Link) -> None:
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

    def on_credit(self, event: Any) -> None:
        self._drain()
        if self.link.drain and not self.queue:  # (a drain its replies used up is answered already)
            self.gateway.connection.drain_complete(self.link)

    def on_disposition(self, event: Any) -> None:
        if not event.settled:
            self.gateway.connection.settle_outgoing(self.link, event.delivery_id, event.state)

    def on_detach(self) -> None:
        self.queue.clear()


class _RequestLink(LinkHandler):
    """Common part of the request side of $cbs and $management: accept, answer, top up credit."""

    def __init__(self, gateway: Gateway, link: Link) -> None:
        self.gateway = gateway
        self.link = link

    def on_message(self, event: Any) -> None:
        conn = self.gateway.connection
        if not event.settled:
            conn.settle_incoming(self.link, event.delivery_id, Accepted())
        if self.link.link_credit < SENDER_CREDIT // 2:
            conn.grant_credit(self.link, SENDER_CREDIT)
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

    def answer(self, request: Any) -> None:
        raise NotImplementedError

    def answer_error(self, request: Any, status: int, description: str, condition: str) -> None:
        raise NotImplementedError

    @staticmethod
    def response(request: Any, app_props: dict, body: Any) -> bytes:
        req_props = request.properties
        props = Properties(
            message_id=str(uuid.uuid4()),
            correlation_id=req_props.message_id if req_props else None,
            to=req_props.reply_to if req_props else None,
        )
        return encode_message(properties=props, application_properties=app_props, value=body)


class CbsRequestLink(_RequestLink):
    def answer(self, request: Any) -> None:
        if self.gateway.faults.active:
            audience = (request.application_properties or {}).get("name")
            refusal = self.gateway.fault(PUT_TOKEN, audience_entity(audience) if isinstance(audience, str) else "")
            if refusal is not None:
                if refusal.effect is not DROP:
                    self.answer_error(request, refusal.status_code, refusal.description, refusal.condition)
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

    def answer_error(self, request: Any, status: int, description: str, condition: str) -> None:
        payload = self.response(request, {"status-code": Int(status), "status-description": description}, None)
        self.gateway.send_reply(None, self.gateway.cbs_reply_links, payload)


class ManagementRequestLink(_RequestLink):
    def __init__(self, gateway: Gateway, link: Link, entity: str) -> None:
        super().__init__(gateway, link)
        self.entity = entity
        self._txn_id: bytes | None = None  # of the request being answered, when it is transactional

    def on_message(self, event: Any) -> None:
        # The Java SDK sends a request that belongs to a transaction with a transactional-state on
        # its transfer (ManagementChannel: update-disposition and schedule-message).
        state = event.state
        self._txn_id = bytes(state.txn_id or b"") if type(state) is TransactionalState else None
        try:
            super().on_message(event)
        finally:
            self._txn_id = None

    def answer(self, request: Any) -> None:
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
            refusal = gateway.fault(kind, self.entity, session=in_session)
            if refusal is not None:
                if refusal.effect is not DROP:
                    self._reply(request, MgmtReply(refusal.status_code, refusal.description, None, refusal.condition))
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

    def answer_error(self, request: Any, status: int, description: str, condition: str) -> None:
        self._reply(request, MgmtReply(status, description, None, condition))

    def _reply(self, request: Any, reply: MgmtReply) -> None:
        props = {"statusCode": Int(reply.status_code), "statusDescription": reply.description}
        if reply.error_condition:
            props["errorCondition"] = Symbol(reply.error_condition)
        payload = self.response(request, props, reply.body)
        reply_to = request.properties.reply_to if request.properties else None
        self.gateway.send_reply(str(reply_to) if reply_to is not None else None, None, payload)
        self.gateway.request_flush(self.gateway)


class EntitySenderLink(LinkHandler):
    """A client sending into a queue or topic: every accepted message is stored before the accept."""

    def __init__(self, gateway: Gateway, link: Link, path: str, ref: Any, via: str | None = None) -> None:
        self.gateway = gateway
        self.link = link
        self.path = path
        self.ref = ref
        self.via = via  # the transfer entity of a send-via link

    def on_message(self, event: Any, messages: list[IncomingMessage] | None = None) -> None:
        """``messages``: the batch's, when the gateway decoded them in slices (else decoded here)."""
        conn = self.gateway.connection
        state: Any
        if self.gateway.faults.active and self._faulted(event):
            return
        txn = event.state if type(event.state) is TransactionalState else None
        try:
            if messages is None:
                messages = incoming_messages(event.payload, event.message_format)
            if txn is None:
                self.gateway.broker.send(self.path, messages)
                # Settled once the store has written it (Gateway.settle_sends): accepted, or refused and
                # taken back if the write failed.
                self.gateway.sends.append((self, event.delivery_id, event.settled, messages))
                if self.link.link_credit < SENDER_CREDIT // 2:
                    conn.grant_credit(self.link, SENDER_CREDIT)
                return
            else:
                self.gateway.transactions.stage_send(bytes(txn.txn_id or b""), self.path, list(messages), self.via,
                                                     self.link.session)
                self.gateway.arm_transaction_timeout()
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
        if self.link.link_credit < SENDER_CREDIT // 2:
            conn.grant_credit(self.link, SENDER_CREDIT)

    def _faulted(self, event: Any) -> bool:
        """An injected send fault: the transfer is refused (``rejected`` with the condition, nothing
        stored) or the connection dropped. False when no rule applied."""
        refusal = self.gateway.fault(SEND_OPERATION, self.path)
        if refusal is None:
            return False
        if refusal.effect is not DROP:
            conn = self.gateway.connection
            state: Any = Rejected(error(refusal.condition, refusal.description))
            if type(event.state) is TransactionalState:
                state = TransactionalState(event.state.txn_id, state)
            if not event.settled:
                conn.settle_incoming(self.link, event.delivery_id, state)
            if self.link.link_credit < SENDER_CREDIT // 2:
                conn.grant_credit(self.link, SENDER_CREDIT)
        return True


class EntityReceiverLink(LinkHandler):
    """A client receiving from a queue, subscription or dead-letter queue (optionally a session)."""

    def __init__(self, gateway: Gateway, link: Link, path: str, ref: Any, mode: ReceiveMode) -> None:
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
    def attach(cls, gateway: Gateway, link: Link, path: str, ref: Any) -> None:
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
            self.gateway.request_flush(self.gateway)

    def _session_wait_expired(self) -> None:
        if not self.waiting_for_session or self.closed:
            return
        self.waiting_for_session = False
        self.gateway.connection.reject_attach(
            self.link, "com.microsoft:timeout", "No session is available within the requested timeout."
        )
        self._release()
        self.gateway.request_flush(self.gateway)

    # -- broker callbacks --------------------------------------------------------------
    def on_available(self) -> None:
        if self.closed:
            return
        if self.waiting_for_session:
            self._try_session()
            return
        self.gateway.schedule_pump(self)

    def pump(self) -> None:
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
                if (now >= stop or gateway.broker.commit_wanted()) and conn.can_send(link):
                    self.continued = True  # a drain completes once the pump has used the credit it can
                    gateway.pump_later(self)
                    return
        if link.drain and link.link_credit > 0 and conn.can_send(link):
            conn.drain_complete(link)
        # New messages wake this receiver only while it could take them; without credit (or session
        # window) the next flow pumps it (on_credit), so idle links cost a send nothing.
        self.receiver.set_waiting(conn.can_send(link))

    # -- AMQP events ----------------------------------------------------------------------
    def on_credit(self, event: Any) -> None:
        if self.gateway.faults.active and event.link.link_credit > 0:
            refusal = self.gateway.fault(RECEIVE, self.path, session=self.ref.requires_session)
            if refusal is not None:
                if refusal.effect is not DROP:
                    # Service Bus ends the receive link with the error; the SDK reopens it to retry.
                    self.gateway.connection.detach(self.link, refusal.condition, refusal.description)
                    self._release()
                return
        self.pump()
        if event.drain and self.link.drain and self.link.link_credit > 0 and not self.continued:
            self.gateway.connection.drain_complete(self.link)

    def on_disposition(self, event: Any) -> None:
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
            if self.gateway.faults.active and isinstance(state, (Accepted, Modified, Rejected)):
                refusal = self.gateway.fault(SETTLE, self.path, session=self.ref.requires_session)
                if refusal is not None:
                    if refusal.effect is DROP:
                        return
                    raise BrokerError(refusal.description, refusal.condition)  # the message stays locked
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
        self.gateway.request_flush(self.gateway)

    def _admit(self) -> None:
        """Refuse a settlement the store could not keep (its journal full and not foldable): ServerBusy,
        before anything changes, so the message stays locked by this receiver (gateway/settling.py)."""
        failure = self.gateway.settle_room(self.path)
        if failure is not None:
            raise refusal(failure)

    def _transactional_disposition(self, event: Any, state: Any) -> None:
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
        self.gateway.request_flush(self.gateway)

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

    def __init__(self, broker: BrokerAPI, receiver: Any, token: Any, outcome: Any) -> None:
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
        receiver.dead_letter(token, _str(reason), _str(description), props)


class CoordinatorLink:
    """The transaction controller's link (AMQP 1.0 4.2): each message is a declare or a discharge,
    answered in its disposition (``declared`` with the new id, ``accepted``, or ``rejected`` with a
    transaction error)."""

    def __init__(self, gateway: Gateway, link: Link) -> None:
        self.gateway = gateway
        self.link = link

    def on_message(self, event: Any) -> None:
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
        if self.link.link_credit < SENDER_CREDIT // 2:
            conn.grant_credit(self.link, SENDER_CREDIT)
        self.gateway.request_flush(self.gateway)

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
        broker = gateway.broker
        broker.begin_change()  # the store's savepoint: what the commit buffers is forgotten if refused
        try:
            applied = transactions.discharge(txn_id, False)
        except BaseException:
            broker.end_change(False)
            raise
        failure = gateway.commit_now() if applied.undo else None
        if failure is not None:
            applied.take_back()
            broker.end_change(False)
            raise failure
        broker.end_change(True)

    def on_disposition(self, event: Any) -> None:
        return None

    def on_credit(self, event: Any) -> None:
        return None

    def on_detach(self) -> None:
        # AMQP 1.0 4.4.1: closing the coordinator link rolls back the transactions it declared.
        if self.gateway._transactions is not None:
            self.gateway._transactions.rollback_all()


def _attached(link: Link) -> bool:
    """Neither end has detached the link nor ended its session."""
    return (link.context is not None and not link.session.ended
            and link.state.local is not EndpointState.CLOSED and link.state.remote is not EndpointState.CLOSED)


# The delivery tag of a receive-and-delete delivery: empty (AMQP 1.0 2.7.5 allows a zero-length tag).
_NO_TAG = b""


def _str(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


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

