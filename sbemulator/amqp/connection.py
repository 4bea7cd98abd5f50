"""Sans-I/O AMQP 1.0 connection: feed it bytes, get events; call methods, take bytes to send.

Covers the server side of the transport (spec part 2) and SASL (part 5): protocol header exchange,
SASL (MSSBCBS, ANONYMOUS and EXTERNAL authorized by CBS tokens later; PLAIN with the key),
open/begin/attach/flow/transfer/disposition/detach/end/close, session windows, link credit and
drain, multi-frame transfers both ways, max-frame-size negotiation and idle timeouts. Like h11 for
HTTP it never touches a socket, so every state transition is testable with plain bytes.

How it is put together: ``framing.FrameReader`` cuts the input into frames; every frame then passes
one funnel, the transition tables of ``states`` (the connection's, then the session's of its channel,
then the link's of its handle), before its handler runs: also the dispositions that ``hotframes``
decodes without the generic codec. ``Connection`` is one object made of four parts, each in a module
of its own: this one (the byte interface, the funnel, SASL, open, begin, end, close), ``link_endpoints``
(attach and detach), ``flow_control`` (flows, credit, drain) and ``transfers`` (transfers both ways,
dispositions, ranges). The window and credit arithmetic is in ``windows``. A peer's
mistake is a ``ProtocolError`` or ``SessionError`` with the condition the specification names; any
other exception while handling input is a bug of ours, logged with its traceback and answered with
``amqp:internal-error``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from ..scheduling import DEFAULT_SLICES, Slices
from . import codec, hotframes
from .endpoints import Link, Session
from .errors import (
    CONNECTION_FORCED,
    DECODE_ERROR,
    FRAME_SIZE_TOO_SMALL,
    FRAMING_ERROR,
    INTERNAL_ERROR,
    NOT_ALLOWED,
    RESOURCE_LIMIT_EXCEEDED,
    ProtocolError,
    SessionError,
)
from .events import (
    ConnectionClosed,
    ConnectionOpened,
    DeliveryRangeStateChanged,
    Event,
    LinkDetached,
    SaslPlainAuthenticated,
    SessionBegun,
    SessionEnded,
)
from .flow_control import FlowControl
from .framing import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_SASL,
    MIN_MAX_FRAME_SIZE,
    PROTOCOL_HEADER,
    SASL_HEADER,
    FrameReader,
    build_frame,
)
from .link_endpoints import LinkEndpoints
from .performatives import (
    PERFORMATIVES,
    SASL_FRAMES,
    Accepted,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    End,
    Error,
    Flow,
    Open,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
    error,
    from_described,
)
from .states import (
    CLOSED,
    CONNECTION_OPENED,
    CONNECTION_START,
    DISCARD,
    NO_SESSION,
    Input,
    State,
    refusal,
)
from .transfers import RangeCursor, TransferEndpoint
from .types import Array, Symbol, UByte, UInt, UShort
from .windows import UINT_MAX

log = logging.getLogger("sbemulator.amqp")

_ACCEPTED = Accepted()  # the state of every completion; it has no fields, so one instance serves all

_LIST_CODES = frozenset((0x45, 0xC0, 0xD0))  # list0, list8, list32
_FRAME_BODIES = {cls.CODE: cls for cls in (*PERFORMATIVES, *SASL_FRAMES)}

RECV_OPEN, RECV_BEGIN, RECV_ATTACH, RECV_FLOW = Input.RECV_OPEN, Input.RECV_BEGIN, Input.RECV_ATTACH, Input.RECV_FLOW
RECV_TRANSFER, RECV_DISPOSITION, RECV_DETACH = Input.RECV_TRANSFER, Input.RECV_DISPOSITION, Input.RECV_DETACH
RECV_END, RECV_CLOSE = Input.RECV_END, Input.RECV_CLOSE
SEND_OPEN, SEND_BEGIN, SEND_ATTACH = Input.SEND_OPEN, Input.SEND_BEGIN, Input.SEND_ATTACH
SEND_DETACH, SEND_END, SEND_CLOSE = Input.SEND_DETACH, Input.SEND_END, Input.SEND_CLOSE


class Phase(IntEnum):
    """The connection's life cycle (spec 2.2 and 5.1): which protocol header or frame is due before its
    open, then open (its state pair, ``Connection.state``, governs the frames), then over. Every fact of
    the life cycle is the phase or the pair: ``Connection.closed`` is the phase's (set with it, in one
    place), and whether our close frame went out is the pair's local end."""

    HEADER = 0  # the first protocol header (SASL, or AMQP when SASL is not required)
    SASL = 1  # sasl-mechanisms sent, sasl-init due
    AMQP_HEADER = 2  # sasl-outcome sent, the AMQP protocol header due
    OPEN = 3  # headers exchanged, the open frame due
    OPENED = 4  # the connection's state pair (``Connection.state``) governs from here on
    CLOSED = 5  # over for us (closed either way, refused at its header or SASL, or lost): nothing more is read


# Every performative a peer may send after open: the input it is to the state tables.
_INPUTS: dict[type, Input] = {
    Open: RECV_OPEN, Begin: RECV_BEGIN, Attach: RECV_ATTACH, Flow: RECV_FLOW, Transfer: RECV_TRANSFER,
    Disposition: RECV_DISPOSITION, Detach: RECV_DETACH, End: RECV_END, Close: RECV_CLOSE,
}


# What Service Bus offers in sasl-server-mechanisms, in its order (seen in client traces against the
# service: [MSSBCBS, PLAIN, ANONYMOUS, EXTERNAL]). The .NET SDK (Azure.Messaging.ServiceBus,
# AmqpConnectionScope.CbsSaslHandlerName) registers exactly one handler, an anonymous one named MSSBCBS,
# and Microsoft.Azure.Amqp gives up when the server does not offer it (Sasl/SaslNegotiator.cs).
SERVICE_BUS_SASL_MECHANISMS = ("MSSBCBS", "PLAIN", "ANONYMOUS", "EXTERNAL")
# Mechanisms that authenticate nobody at the SASL layer: the client puts CBS tokens on $cbs afterwards.
# EXTERNAL would name the TLS client certificate; the emulator asks for none, so it is anonymous too.
TOKEN_MECHANISMS = frozenset({"MSSBCBS", "ANONYMOUS", "EXTERNAL"})


class Connection(LinkEndpoints, TransferEndpoint, FlowControl):
    """Server side of one AMQP connection."""

    # The delivery ids the dispositions of one read may name together (each becomes an event, or one of
    # a range's, that the application holds until it has handled them): two and a half of the largest
    # disposition taken. A peer naming more (thousands of dispositions over the same unsettled range,
    # which stay unsettled when not settled, each one an event per delivery) is closed with
    # amqp:resource-limit-exceeded instead of growing the emulator's memory without bound.
    DISPOSED_PER_READ = 250_000

    def __init__(
        self,
        *,
        container_id: str = "sbemulator",
        max_frame_size: int = 1024 * 1024,
        channel_max: int = 4095,
        idle_timeout_ms: int | None = 240_000,
        sasl_mechanisms: tuple[str, ...] = SERVICE_BUS_SASL_MECHANISMS,
        authenticate_plain: Callable[[str, str], bool] | None = None,
        require_sasl: bool = True,
        max_message_size: int = 64 * 1024 * 1024,
        incoming_window: int = 2048,
        clock: Callable[[], float] = time.monotonic,
        slices: Slices = DEFAULT_SLICES,
    ) -> None:
        self.container_id = container_id
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.idle_timeout_ms = idle_timeout_ms
        self.sasl_mechanisms = sasl_mechanisms
        self.authenticate_plain = authenticate_plain
        self.require_sasl = require_sasl
        self.max_message_size = max_message_size
        # Our session incoming-window, in transfer frames. It is widened again once half of it is used,
        # but only after all the input of one read has been handled: a flow we produce while handling a
        # read cannot have reached the peer before it wrote the rest of that read, so it is no excuse for
        # frames beyond the window we had announced.
        self.incoming_window = incoming_window
        self.clock = clock

        self._reader = FrameReader(max_frame_size)
        self._out = bytearray()
        self._events: list[Event] = []
        self._disposed = 0  # delivery ids the dispositions of the current read named (DISPOSED_PER_READ)
        # Input in slices (h11's "paused"): whether the events of the reads since the last ``events_handled``
        # stand for so much work that the application handles them in slices (its reading paused
        # meanwhile). The connection derives it, nobody else sets it (a plain attribute, read once per
        # read by the application, rather than a property: a call saved per read). Set when a read's
        # events stand for much work (a DeliveryRangeStateChanged, a batch transfer of more than
        # Slices.batch_slice_bytes, more events than Slices.dispatch_events); it lasts until the application
        # says it has handled them all (``events_handled``), and meanwhile a flow-control violation in the
        # same input waits for them (``data_to_send`` does not answer it).
        self.wants_slices = False
        self._range_events = slices.range_events  # a disposition over more delivery ids: one range event
        self._batch_slice_bytes = slices.batch_slice_bytes
        self._many_events = slices.dispatch_events
        self._hold_bytes = slices.hold_bytes  # frames held behind an open range at most
        # Every range event not expanded to its end, with how far it is (transfers.RangeCursor); the ones
        # expanded from the delivery ids still (not worked out whole yet), in the order they came.
        self._ranges: dict[DeliveryRangeStateChanged, RangeCursor] = {}
        self._open_ranges: list[DeliveryRangeStateChanged] = []
        # Frames that came after a range disposition not expanded yet, handled once it is (``held_input``;
        # the application feeds ``receive_data(b"")`` then). Why: a detach or another disposition there
        # would change which deliveries are unsettled, so the range had to be worked out whole first, in
        # one go (46-150 ms for 100,000 deliveries, docs/benchmarks.md). Bounded by Slices.hold_bytes, past
        # which the frames are handled at once and the range is worked out whole after all.
        self._held: list[tuple[int, int, bytes]] = []
        self._held_bytes = 0
        self.phase = Phase.HEADER
        self.state: State = CONNECTION_START  # the open/close pair (states.CONNECTION_TRANSITIONS)
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_idle_timeout_ms: int | None = None
        self.remote_container_id: str | None = None
        self.remote_properties: dict | None = None
        # Every session whose channel is in use: ACTIVE on both ends, or ended by us and DISCARDING
        # until the peer's end arrives (it then leaves both maps and its channels are free again).
        self.sessions_by_remote: dict[int, Session] = {}
        self.sessions_by_channel: dict[int, Session] = {}
        # Links and sessions the peer broke a flow-control rule on, answered by answer_violations()
        # (a plain list, read once per input by the gateway: non-empty means there is something to answer).
        self.violations: list[Link | Session] = []
        self._windows_used = False  # a transfer arrived since the windows were last checked
        # The connection is over for us (Phase.CLOSED): nothing more is read or produced. Only _set_phase
        # writes it: an attribute read once per delivery, kept equal to the phase rather than derived.
        self.closed = False
        self.sasl_username: str | None = None
        now = clock()
        self._last_received = now
        self._last_sent = now

    # ------------------------------------------------------------------ byte interface
    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """Feed bytes from the socket; returns the events they caused (in order)."""
        if self.closed:
            return []
        self._last_received = self.clock()
        if not self._held:  # frames held behind a range belong to the read they came in
            self._disposed = 0
        try:
            self._process_input(data)
            if self._windows_used:  # only transfers use up an incoming window
                self._windows_used = False
                self._widen_incoming_windows()
        except ProtocolError as exc:
            self._fail(exc.condition, exc.description)
        except Exception:
            # The peer's input was checked on the way in (frame headers, decoding, field types, the
            # state tables): what fails here is a bug of ours, and the peer must not be told otherwise.
            log.exception("internal error while handling AMQP input from %s", self.remote_container_id)
            self._fail(INTERNAL_ERROR, "The emulator failed to handle a frame; see its log.")
        events, self._events = self._events, []
        if len(events) > self._many_events:
            self.wants_slices = True
        return events

    def events_handled(self) -> list[Event]:
        """The application has handled every event it was given: violations wait no longer; answered now
        (the events of their detach or end are returned)."""
        self.wants_slices = False
        return self.answer_violations()

    def answer_violations(self) -> list[Event]:
        """Detach the links and end the sessions on which the last read broke a flow-control rule.

        Call it once the events of ``receive_data`` have been handled: the deliveries that arrived
        before the violation are then settled before the detach or end that refuses the rest, so the
        peer learns exactly which of its messages were taken. ``data_to_send`` calls it too, for a
        caller that does not (the events are then returned by the next ``receive_data``).
        """
        if not self.violations:
            return []
        violations, self.violations = self.violations, []
        for endpoint in violations:
            condition, description = endpoint.failure or (INTERNAL_ERROR, "")
            if isinstance(endpoint, Session):
                if not endpoint.ended and not self.closed:
                    self._end_session_with_error(endpoint, condition, description)
            else:
                self.detach(endpoint, condition, description)
        events, self._events = self._events, []
        return events

    def _violation(self, endpoint: Link | Session, condition: str, description: str) -> None:
        if endpoint.failure is None:
            endpoint.failure = (condition, description)
            self.violations.append(endpoint)

    def data_to_send(self) -> bytes | bytearray:
        """Bytes the server should write now (empties the buffer; the caller owns what it gets).
        While the application still handles, in slices, events that came before a violation
        (``wants_slices``), the violation waits for ``events_handled``."""
        if self.violations and not self.wants_slices:
            self._events += self.answer_violations()
        out = self._out
        if not out:
            return b""
        self._out = bytearray()  # handed over whole: no copy of what may be a hundred deliveries
        self._last_sent = self.clock()
        return out

    def connection_lost(self) -> list[Event]:
        """The socket went away without a close frame: report every link and session as gone."""
        if self.closed:
            return []
        self._set_phase(Phase.CLOSED)
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        self._events.append(ConnectionClosed(error(CONNECTION_FORCED, "connection lost"), True))
        events, self._events = self._events, []
        return events

    @property
    def pending_output(self) -> int:
        """Bytes produced and not yet taken by :meth:`data_to_send` (what backpressure looks at)."""
        return len(self._out)

    @property
    def link_count(self) -> int:
        """Links attached (or being attached) on all sessions of this connection."""
        return sum(len(session.links_by_handle) for session in self.sessions_by_channel.values())

    @property
    def wants_close(self) -> bool:
        """True once the connection is over and the transport should close after flushing."""
        return self.closed

    # ------------------------------------------------------------------ timers
    def next_timer(self) -> float | None:
        """When ``handle_timer`` next needs to run (monotonic clock), or None."""
        deadlines = []
        if self.idle_timeout_ms:
            deadlines.append(self._last_received + self.idle_timeout_ms / 1000.0)
        if self.remote_idle_timeout_ms and self.state is CONNECTION_OPENED:
            deadlines.append(self._last_sent + self.remote_idle_timeout_ms / 2000.0)
        return min(deadlines) if deadlines else None

    def handle_timer(self) -> list[Event]:
        """Send heartbeats the peer needs and enforce our own idle timeout."""
        if self.closed:
            return []
        now = self.clock()
        if self.idle_timeout_ms and now - self._last_received > self.idle_timeout_ms / 1000.0:
            self._fail(RESOURCE_LIMIT_EXCEEDED, "local-idle-timeout expired")
        elif (
            self.remote_idle_timeout_ms
            and self.state is CONNECTION_OPENED
            and now - self._last_sent >= self.remote_idle_timeout_ms / 2000.0
        ):
            self._out += build_frame(0)
            self._last_sent = now
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ the funnel
    @property
    def held_input(self) -> bool:
        """Frames wait behind a range disposition that is expanded to its end now: feed ``b""``. Never once
        the connection is closed: nothing more is read then, so ``b""`` would return nothing, forever."""
        return bool(self._held) and not self._open_ranges and not self.closed

    def _hold(self, frames: list[tuple[int, int, bytes]]) -> bool:
        """Keep ``frames`` (after those held already) until the open ranges are expanded; False when that
        would hold more than Slices.hold_bytes with what the reader buffers (the caller handles them now)."""
        size = self._held_bytes + sum(len(frame) for _type, _channel, frame in frames)
        if size + self._reader.buffered > self._hold_bytes:
            return False
        self._held += frames
        self._held_bytes = size
        return True

    def _process_input(self, data: bytes | bytearray | memoryview) -> None:
        reader = self._reader
        cut_due = False
        if self._held:  # what waited behind a range comes first; new bytes wait in the reader after it
            if data:
                reader.feed(data)
            frames, self._held, self._held_bytes = self._held, [], 0
            cut_due = True
        else:
            frames = reader.cut(data)
        while True:
            if self._open_ranges and frames and self._hold(frames):
                return
            for item in frames:
                frame_type, channel, frame = item
                if self.closed:
                    return
                if frame_type == PROTOCOL_HEADER:
                    self._on_protocol_header(frame)
                    continue
                if (
                    frame_type == FRAME_AMQP
                    and len(frame) > 3
                    and frame[2] == 0x15  # a disposition (00 53 15): one per settled message
                    and frame[0] == 0x00
                    and frame[1] == 0x53
                    and self.state is CONNECTION_OPENED
                ):
                    # The dispositions the SDKs send, decoded without the generic codec; they pass the same
                    # session check as every other frame before their handler runs.
                    try:
                        delivery_id = hotframes.sdk_complete_id(frame)
                        if delivery_id is not None:  # the SDK's complete of one delivery: one per message
                            session = self._enter_session(channel, RECV_DISPOSITION)  # every frame's check
                            if session is not None:
                                self._peer_disposed(session, delivery_id, delivery_id, False, _ACCEPTED)
                            continue
                        disposition = hotframes.parse_disposition(frame)
                        if disposition is not None:  # the other shapes the SDKs send; the rest goes the long way
                            self._dispatch(channel, disposition, b"")
                            if self._open_ranges and self._hold_rest(frames, item):
                                return
                            continue
                    except SessionError as exc:
                        self._end_session_with_error(exc.session, exc.condition, exc.description)
                        continue
                self._on_frame(frame_type, channel, frame)
                if self._open_ranges and self._hold_rest(frames, item):
                    return
            if self.closed or not (cut_due or reader.more):
                return
            cut_due = False
            frames = reader.cut()

    def _hold_rest(self, frames: list[tuple[int, int, bytes]], item: tuple[int, int, bytes]) -> bool:
        """``item`` just opened a range: the frames after it wait (True), unless there are none or they
        are too many. What the reader has not cut yet stays there, behind them."""
        rest = frames[next(i for i, other in enumerate(frames) if other is item) + 1:]
        return bool(rest) and self._hold(rest)

    def _on_frame(self, frame_type: int, channel: int, frame: bytes) -> None:
        if not frame:
            return  # heartbeat
        body, offset = self._decode_body(frame)
        if self.phase is Phase.SASL:
            if frame_type != FRAME_SASL or not isinstance(body, SaslInit):
                raise ProtocolError(DECODE_ERROR, f"expected sasl-init, got {type(body).__name__}")
            self._on_sasl_init(body)
            return
        if frame_type != FRAME_AMQP:
            raise ProtocolError(FRAMING_ERROR, f"unexpected frame type {frame_type}")
        if type(body) not in _INPUTS:
            raise ProtocolError(DECODE_ERROR, f"unknown or misplaced performative {body!r:.200}")
        try:
            self._dispatch(channel, body, frame[offset:])
        except SessionError as exc:
            self._end_session_with_error(exc.session, exc.condition, exc.description)

    def _dispatch(self, channel: int, body: Any, payload: bytes) -> None:
        """The connection's state check, then the session's (inside the handlers, through
        :meth:`_enter_session`), then the handler."""
        input_ = _INPUTS[type(body)]
        nxt = self.state.next[input_]
        if nxt is None:
            _scope, condition = refusal("connection", input_)
            if self.state is CONNECTION_START:
                raise ProtocolError(condition, f"expected open, got {type(body).__name__}")
            raise ProtocolError(condition, f"{type(body).__name__.lower()} not allowed now ({self.state})")
        if nxt is DISCARD:
            return
        if input_ is RECV_TRANSFER:
            self._on_transfer(channel, body, payload)
        else:
            _HANDLERS[input_](self, channel, body)

    def _enter_session(self, channel: int, input_: Input) -> Session | None:
        """The session ``input_`` arrived for on ``channel``, past its state check: None when the frame
        is to be dropped (the session is DISCARDING, or about to end for a flow-control violation)."""
        session = self.sessions_by_remote.get(channel)
        state = NO_SESSION if session is None else session.state
        nxt = state.next[input_]
        if nxt is None or session is None:
            scope, condition = refusal("session", input_)
            description = (f"no session on channel {channel}" if session is None
                           else f"{input_.name[5:].lower()} on channel {channel} not allowed ({state})")
            if scope == "connection" or session is None:
                raise ProtocolError(condition, description)
            raise SessionError(session, condition, description)
        if nxt is DISCARD:
            return None
        if session.failure is not None and input_ is not RECV_END:
            return None  # the session is about to be ended with an error: the rest is discarded
        session.state = nxt
        return session

    def _enter_link(self, session: Session, link: Link, input_: Input) -> bool:
        """The link's state check for a frame on its handle: False when the frame is to be dropped."""
        nxt = link.state.next[input_]
        if nxt is None:
            _scope, condition = refusal("link", input_)
            raise SessionError(session, condition,
                               f"{input_.name[5:].lower()} on handle {link.remote_handle} not allowed ({link.state})")
        if nxt is DISCARD:
            return False
        link.state = nxt
        return True

    def _send_step(self, endpoint: Link | Session, input_: Input) -> bool:
        """Move ``endpoint`` for a frame we are about to send; False (send nothing) where its state has
        no such transition: the endpoint is already closed on our side, or the peer's end came first."""
        nxt = endpoint.state.next[input_]
        if nxt is None or nxt is DISCARD:
            return False
        endpoint.state = nxt
        return True

    def _on_protocol_header(self, header: bytes) -> None:
        if self.phase is Phase.HEADER:
            if header == SASL_HEADER:
                self._out += SASL_HEADER
                mechanisms = Array(tuple(Symbol(m) for m in self.sasl_mechanisms), "symbol")
                self._out += build_frame(0, SaslMechanisms(mechanisms), frame_type=FRAME_SASL)
                self._set_phase(Phase.SASL)
                return
            if header == AMQP_HEADER and not self.require_sasl:
                self._out += AMQP_HEADER
                self._set_phase(Phase.OPEN)
                return
        elif self.phase is Phase.AMQP_HEADER and header == AMQP_HEADER:
            self._out += AMQP_HEADER
            self._set_phase(Phase.OPEN)
            return
        # Spec 2.2: answer with the header we do support, then close the socket.
        self._out += SASL_HEADER if self.phase is Phase.HEADER else AMQP_HEADER
        self._set_phase(Phase.CLOSED)
        self._events.append(
            ConnectionClosed(error(DECODE_ERROR, f"unsupported protocol header {header!r}"), False)
        )

    def _set_phase(self, phase: Phase) -> None:
        self.phase = phase
        self.closed = phase is Phase.CLOSED
        reader = self._reader
        reader.expect_header = phase is Phase.HEADER or phase is Phase.AMQP_HEADER
        reader.opened = phase is Phase.OPENED

    def _decode_body(self, frame: bytes) -> Any:
        try:
            # Nearly every body is a performative described by a small ulong code: decode its field
            # list straight into the performative's class instead of through a Described value.
            if len(frame) > 3 and frame[0] == 0x00 and frame[1] == 0x53 and frame[3] in _LIST_CODES:
                cls = _FRAME_BODIES.get(frame[2])
                if cls is not None:
                    values, offset = codec.decode(frame, 3)
                    return cls.from_list(values), offset
            value, offset = codec.decode(frame)
            body = from_described(value)
        except codec.DecodeError as exc:  # also a field of the wrong type (performatives.field_types)
            raise ProtocolError(DECODE_ERROR, f"cannot decode frame body: {exc}") from None
        return body, offset

    # ------------------------------------------------------------------ SASL
    def _on_sasl_init(self, init: SaslInit) -> None:
        mechanism = str(init.mechanism or "")
        ok = False
        if mechanism not in self.sasl_mechanisms:
            ok = False
        elif mechanism in TOKEN_MECHANISMS:
            ok = True  # nobody is named here: the connection is authorized by CBS tokens afterwards
        elif mechanism == "PLAIN":
            response = bytes(init.initial_response or b"")
            parts = response.split(b"\x00")
            if len(parts) == 3:
                username = parts[1].decode("utf-8", "replace")
                password = parts[2].decode("utf-8", "replace")
                ok = self.authenticate_plain(username, password) if self.authenticate_plain else True
                if ok:
                    self.sasl_username = username
                    self._events.append(SaslPlainAuthenticated(username))
        code = 0 if ok else 1
        self._out += build_frame(0, SaslOutcome(UByte(code)), frame_type=FRAME_SASL)
        if ok:
            self._set_phase(Phase.AMQP_HEADER)
        else:
            self._set_phase(Phase.CLOSED)
            self._events.append(ConnectionClosed(error("amqp:unauthorized-access", "SASL failed"), False))

    # ------------------------------------------------------------------ connection
    def _on_open(self, channel: int, open_: Open) -> None:
        self.state = self.state.next[RECV_OPEN]  # type: ignore[assignment]  # checked by _dispatch
        self._set_phase(Phase.OPENED)
        remote_max = open_.max_frame_size if open_.max_frame_size is not None else UINT_MAX
        if remote_max < MIN_MAX_FRAME_SIZE:
            self._send_open()
            raise ProtocolError(
                FRAME_SIZE_TOO_SMALL, f"max-frame-size {remote_max} is below the minimum {MIN_MAX_FRAME_SIZE}"
            )
        self.remote_max_frame_size = min(remote_max, UINT_MAX)
        self.remote_idle_timeout_ms = open_.idle_time_out or None
        self.remote_container_id = open_.container_id
        self.remote_properties = open_.properties
        self._send_open()
        self._events.append(ConnectionOpened(open_.container_id, open_.hostname, open_.properties))

    def _send_open(self) -> None:
        if not self._send_step(self, SEND_OPEN):  # type: ignore[arg-type]
            return
        self._send(
            0,
            Open(
                self.container_id,
                None,
                UInt(self.max_frame_size),
                UShort(self.channel_max),
                UInt(self.idle_timeout_ms) if self.idle_timeout_ms else None,
            ),
        )

    def _on_close(self, channel: int, close: Close) -> None:
        self.state = self.state.next[RECV_CLOSE]  # type: ignore[assignment]  # checked by _dispatch
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        if self._send_step(self, SEND_CLOSE):  # type: ignore[arg-type]
            self._send(0, Close())
        self._set_phase(Phase.CLOSED)
        self._events.append(ConnectionClosed(close.error, True))

    def close(self, condition: str | None = None, description: str | None = None) -> None:
        """Close the connection (with an error when ``condition`` is given)."""
        if self.closed:
            return
        err = error(condition, description) if condition else None
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        if self.phase is Phase.OPEN:
            self._send_open()  # spec 2.4.1: an open precedes the close, also before the peer's open
        if (self.phase is Phase.OPEN or self.phase is Phase.OPENED) and self._send_step(
                self, SEND_CLOSE):  # type: ignore[arg-type]
            self._send(0, Close(err))
        self._set_phase(Phase.CLOSED)
        self._events.append(ConnectionClosed(err, False))

    def _fail(self, condition: str, description: str) -> None:
        self.close(condition, description)

    # ------------------------------------------------------------------ sessions
    def _on_begin(self, channel: int, begin: Begin) -> None:
        if begin.remote_channel is not None:
            raise ProtocolError(NOT_ALLOWED, "server does not initiate sessions")
        if channel in self.sessions_by_remote and self._enter_session(channel, RECV_BEGIN) is None:
            return  # a begin on a channel that is DISCARDING: dropped like the rest
        if channel > self.channel_max:
            raise ProtocolError(FRAMING_ERROR, f"channel {channel} already in use or above channel-max")
        local = 0
        while local in self.sessions_by_channel:
            local += 1
        session = Session(channel, local, begin, self.incoming_window)
        session.state = NO_SESSION.next[RECV_BEGIN]  # type: ignore[assignment]
        self.sessions_by_remote[channel] = session
        self.sessions_by_channel[local] = session
        self._send_step(session, SEND_BEGIN)
        self._send(
            local,
            Begin(
                UShort(channel),
                UInt(session.next_outgoing_id),
                UInt(session.incoming_window),
                UInt(session.outgoing_window),
                UInt(session.handle_max),
            ),
        )
        self._events.append(SessionBegun(session))

    def _on_end(self, channel: int, end: End) -> None:
        session = self._enter_session(channel, RECV_END)
        if session is None:
            return
        self._drop_session(session, end.error)
        if self._send_step(session, SEND_END):
            self._send(session.channel, End())
        self._unmap_session(session)

    def _drop_session(self, session: Session, err: Any) -> None:
        """Tell the application the session and its links are over (once); its channels stay in use
        until both ends have ended."""
        if session.ended:
            return
        session.ended = True
        if self._open_ranges:
            self._resolve_ranges()
        for link in list(session.links_by_handle.values()):
            self._events.append(LinkDetached(link, True, None))
        session.links_by_handle.clear()
        session.links_by_remote.clear()
        session.outgoing_unsettled.clear()
        self._events.append(SessionEnded(session, err))

    def _unmap_session(self, session: Session) -> None:
        if session.state.local is CLOSED and session.state.remote is CLOSED:
            self.sessions_by_remote.pop(session.remote_channel, None)
            self.sessions_by_channel.pop(session.channel, None)

    def _end_session_with_error(self, session: Session, condition: str, description: str) -> None:
        self._drop_session(session, None)
        if self._send_step(session, SEND_END):  # from ACTIVE: DISCARDING until the peer's end (spec 2.5.5)
            self._send(session.channel, End(error(condition, description)))
        self._unmap_session(session)

    # ------------------------------------------------------------------ output
    def _send(self, channel: int, body: Any) -> None:
        self._out += build_frame(channel, body)


_HANDLERS: dict[Input, Callable[[Connection, int, Any], None]] = {
    RECV_OPEN: Connection._on_open,
    RECV_BEGIN: Connection._on_begin,
    RECV_ATTACH: Connection._on_attach,
    RECV_FLOW: Connection._on_flow,
    RECV_DISPOSITION: Connection._on_disposition,
    RECV_DETACH: Connection._on_detach,
    RECV_END: Connection._on_end,
    RECV_CLOSE: Connection._on_close,
}  # RECV_TRANSFER is dispatched with its payload in _dispatch

__all__ = ["Connection", "Error", "Link", "ProtocolError", "Session", "SessionError"]
