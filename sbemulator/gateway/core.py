"""One client connection: AMQP events in, broker calls, AMQP frames out.

The gateway's core: it owns the connection (sbemulator.amqp), its authentication (``$cbs`` grants,
SASL PLAIN, token expiry), its sends waiting for the store's commit, backpressure, injected faults and
transactions, and hands each link's events to the link's room: the handlers of request_links,
sender_link, receiver_link and coordinator_link, which see it through the GatewayContext seam
(context.py), and attach.py's routing table for new links. It holds no socket: the server feeds it
bytes and flushes what it produces, so the same object runs under asyncio or in a test.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from ..amqp import events as ev
from ..amqp.connection import Connection, Link, Phase
from ..amqp.performatives import Accepted, Rejected, error
from ..auth import LISTEN, SEND, Grant, SasValidator, claims_required
from ..broker.api import GatewayBroker
from ..broker.errors import BrokerError
from ..broker.transactions import DEFAULT_TIMEOUT_S, TransactionCoordinator
from ..model import IncomingMessage
from ..scheduling import DEFAULT_SLICES, Budget, InlineJobs, JobStarter, Slices
from .addresses import auth_scope, resource_uri
from .attach import route_attach
from .backlog import EventBacklog
from .cbs import RefusalLog
from .context import PumpedLink, refused
from .faults import CONNECT, DROP, LATENCY, Faults, Refusal
from .limits import DEFAULT_LIMITS, RESOURCE_LIMIT_EXCEEDED, UNAUTHORIZED_ACCESS, Limits
from .management import ManagementHandler
from .receiver_link import EntityReceiverLink
from .sender_link import EntitySenderLink

log = logging.getLogger("sbemulator")
# How large the receiver pump's, the event backlog's and batch decoding's slices are: the namespace's
# Slices (sbemulator/scheduling/slices.py), given to each Gateway like its Limits; the jobs that run them
# are the namespace's scheduler's (runtime/jobs.py JobDriver), given to each Gateway as ``jobs``.


def _nothing_to_commit() -> BrokerError | None:
    """A gateway without a server (tests drive it directly) has no store to commit."""
    return None


class Gateway:
    """Connects one AMQP connection to the broker."""

    def __init__(
        self,
        broker: GatewayBroker,
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
        jobs: JobStarter | None = None,
    ) -> None:
        # Over 80 lines: one attribute per fact the connection holds, each with the comment that says why
        # it is there; the per-message paths (sends, pumps, grants) read them directly off this object.
        self.broker = broker
        # Stops (True) and resumes (False) reading this connection's socket while events it sent wait
        # to be handled in slices (gateway/backlog.py): the scheduler's driver calls it.
        self.pause_input = pause_input
        # Long work of this connection (input in slices, a receiver's pump past its slice) is a job of the
        # namespace's scheduler; without a server (unit tests) each runs to its end at once.
        self.jobs: JobStarter = jobs if jobs is not None else InlineJobs(slices)
        self._backlog = EventBacklog(self)
        self._backlog_scheduled = False  # the backlog is a job of the scheduler now (its first slice ran)
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
        # Commit and write what this connection produced, at the end of this turn (GatewayContext): a
        # partial, not a method, as the receivers' settlement path calls it once per message.
        self.flush_soon: Callable[[], None] = functools.partial(request_flush, self)
        self.call_later = call_later
        self.wall_clock = wall_clock
        self.peer = peer
        self.connection = Connection(
            max_frame_size=max_frame_size,
            idle_timeout_ms=idle_timeout_ms,
            channel_max=limits.channel_max,
            authenticate_plain=self._authenticate_plain,
            slices=slices,
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
        self.cbs_request_link: Link | None = None  # the client's $cbs sender
        self.mgmt_reply_links: dict[str, Link] = {}
        self.receivers: set[PumpedLink] = set()
        self.closed = False
        # Receivers the broker said have work, pumped by run_pending (the server reads the set first:
        # most flushes have none, and the call is saved).
        self.pump_pending: set[PumpedLink] = set()
        # Sends handled but not yet settled: (link, entity, delivery id, pre-settled, messages). They are
        # settled after the store's commit (settle_sends), which the server makes, or this gateway
        # through commit_window before receivers could take what they sent.
        self.sends: list[tuple[Link, str, int, bool, list[IncomingMessage]]] = []
        self.commit_window: Callable[[], BrokerError | None] = _nothing_to_commit
        # Whether a settlement of an entity can be kept, asked before it is applied (gateway/settling.py):
        # None, or what it is refused with. The server sets it (the store's ensure_room).
        self.settle_room: Callable[[str], BrokerError | None] | None = None  # None: always room
        # Backpressure: while the transport's buffer is above its high-water mark (write_paused) or
        # this connection's own unwritten output is, receivers take nothing from the broker; the ones
        # that stopped for that reason wait in ``blocked`` until there is room again.
        self.write_paused = False
        self.blocked: set[PumpedLink] = set()
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
        events = connection.receive_data(data)
        backlog = self._backlog
        if backlog.events or connection.wants_slices:
            # Input that stands for much work (a disposition over a range of 100,000 deliveries, a batch
            # of 1,500 messages to decode), or read while earlier such input still waits its turn: in
            # slices, after what waits already, in order.
            backlog.events.extend(events)
            if not self._backlog_scheduled:
                self._start_backlog()
            return
        self._dispatch(events)
        # Deliveries before a flow-control violation are answered first, then the link or session ends
        # (after the events still waiting in slices, when there are any: backlog_handled).
        if connection.violations:
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

    def block(self, handler: PumpedLink) -> None:
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
        # handle_events' loop, inline: this runs once per read
        for event in events:
            try:
                self._handle(event)
            except Exception:  # a bug in one handler must not take the whole server down
                log.exception("error handling %r", type(event).__name__)
                self.connection.close("amqp:internal-error", "the emulator failed to handle a frame")
        if self.pump_pending:
            self.after_events()

    def handle_events(self, events: list) -> None:
        """Each event to the room it is for (BacklogOwner)."""
        for event in events:
            try:
                self._handle(event)
            except Exception:  # a bug in one handler must not take the whole server down
                log.exception("error handling %r", type(event).__name__)
                self.connection.close("amqp:internal-error", "the emulator failed to handle a frame")

    def _start_backlog(self) -> None:
        """The backlog's first slice now; the rest, if any, as a job of the scheduler, with this
        connection's reading paused until it is done."""
        backlog = self._backlog
        if backlog.step(Budget(self.slices.dispatch_s, slices=self.slices, commit_wanted=self.broker.commit_wanted)):
            return
        self._backlog_scheduled = True
        self.jobs.start(backlog, commit=False, pause=self.pause_input)

    def backlog_handled(self) -> None:
        """Every event of the backlog is handled (BacklogOwner): the connection is told, and violations
        in the same input are answered now, after the deliveries before them."""
        self._backlog_scheduled = False
        if self.sends:  # stored and settled before the detach or end that refuses the rest
            self.settle_sends(self.commit_window())
        self._dispatch(self.connection.events_handled())

    def after_events(self) -> None:
        """What a read's events and a slice of the backlog end with (BacklogOwner): sends settled, then the
        receivers they woke pumped."""
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
            for link, _, delivery_id, settled, _ in sends:
                if not settled:
                    conn.settle_incoming(link, delivery_id, Accepted())
            return
        broker = self.broker
        for _, path, _, _, messages in sends:
            broker.withdraw(path, messages)
        refusal = Rejected(error(failure.condition, failure.description))
        for link, _, delivery_id, settled, _ in sends:
            if not settled:
                conn.settle_incoming(link, delivery_id, refusal)

    def sent(self, link: Link, path: str, delivery_id: int, settled: bool, messages: list[IncomingMessage]) -> None:
        """A send handled (GatewayContext.sent): settled by settle_sends after the next commit."""
        self.sends.append((link, path, delivery_id, settled, messages))


    def _handle(self, event: Any) -> None:
        """One connection event to the room it is for: a link's own events to its handler
        (``Link.context``, a LinkHandler), an attach to the routing table (attach.py)."""
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
            route_attach(self, event.link)
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
                refused(self, CONNECT, "", lambda fault: self.connection.close(fault.condition, fault.description))
        elif kind is ev.ConnectionClosed:
            self._close_all()

    def _close_all(self) -> None:
        self._backlog.clear()
        self._backlog_scheduled = False
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

    def rollback_transactions(self) -> None:
        """Roll back every open transaction of this connection (its coordinator link detached)."""
        if self._transactions is not None:
            self._transactions.rollback_all()

    def schedule_pump(self, handler: PumpedLink) -> None:
        self.pump_pending.add(handler)
        self.request_flush(self)

    def pump_later(self, handler: PumpedLink) -> None:
        """``handler`` used its slice: the rest of its pump is a job of the scheduler (its slices in turn
        with other work, each followed by this connection's flush), not more of this flush's
        ``run_pending``, which would go on without yielding."""
        self.jobs.start(handler, commit=False)

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
                resource = resource_uri(link.address, self.hostname, auth_scope(path))
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
        return claims_required(right, resource_uri(address, self.hostname, auth_scope(path)))

    def entity_exists(self, path: str) -> bool:
        try:
            self.broker.resolve(path)
        except BrokerError:
            return False
        return True

    def log_missing(self, path: str, exc: BrokerError) -> None:
        """One line (bounded, as refused tokens are) naming an entity a link asked for that does not exist."""
        if exc.condition == "amqp:not-found":
            keys = sorted({grant.key_name for grant in self.grants} | (
                {self.plain_key_name} if self.plain_key_name else set())) or ["(none)"]
            self.refusals.warning("attach refused for key name %s: entity %r does not exist in this namespace "
                                  "(is it in the topology file?)", ", ".join(map(repr, keys)), path)

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
