"""Sans-I/O AMQP 1.0 connection: feed it bytes, get events; call methods, take bytes to send.

Covers the server side of the transport (spec part 2) and SASL (part 5): protocol header exchange,
SASL ANONYMOUS/PLAIN, open/begin/attach/flow/transfer/disposition/detach/end/close, session
windows, link credit and drain, multi-frame transfers both ways, max-frame-size negotiation and
idle timeouts. Like h11 for HTTP it never touches a socket, so every state transition is testable
with plain bytes.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from . import codec, hotframes
from .events import (
    ConnectionClosed,
    ConnectionOpened,
    DeliveryStateChanged,
    Event,
    LinkAttachRequested,
    LinkCreditChanged,
    LinkDetached,
    MessageReceived,
    SaslPlainAuthenticated,
    SessionBegun,
    SessionEnded,
)
from .framing import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_HEADER_SIZE,
    FRAME_SASL,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    build_frame,
)
from .performatives import (
    PERFORMATIVES,
    ROLE_RECEIVER,
    ROLE_SENDER,
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
    Rejected,
    SaslInit,
    SaslMechanisms,
    SaslOutcome,
    Transfer,
    error,
    from_described,
)
from .types import Array, Symbol, UByte, UInt, ULong, UShort

_ACCEPTED = Accepted()  # the state of every completion; it has no fields, so one instance serves all

# Error conditions (spec 2.8.15 - 2.8.18)
DECODE_ERROR = "amqp:decode-error"
FRAMING_ERROR = "amqp:connection:framing-error"
FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small"
INTERNAL_ERROR = "amqp:internal-error"
NOT_ALLOWED = "amqp:not-allowed"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
UNATTACHED_HANDLE = "amqp:session:unattached-handle"
HANDLE_IN_USE = "amqp:session:handle-in-use"
WINDOW_VIOLATION = "amqp:session:window-violation"
LINK_DETACH_FORCED = "amqp:link:detach-forced"
TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"

UINT_MAX = 0xFFFFFFFF
_LIST_CODES = frozenset((0x45, 0xC0, 0xD0))  # list0, list8, list32
_FRAME_BODIES = {cls.CODE: cls for cls in (*PERFORMATIVES, *SASL_FRAMES)}


class ProtocolError(Exception):
    """A peer broke the protocol; the connection is closed with ``condition``."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


class SessionError(Exception):
    """A peer broke a session rule; only that session is ended with ``condition``."""

    def __init__(self, session: Session, condition: str, description: str) -> None:
        super().__init__(description)
        self.session = session
        self.condition = condition
        self.description = description


class Link:
    """One attached link, seen from our side: ``is_sender`` means we send transfers on it."""

    __slots__ = (
        "attached",
        "context",
        "delivery_count",
        "detach_received",
        "detach_sent",
        "drain",
        "failure",
        "handle",
        "incoming",
        "is_sender",
        "link_credit",
        "max_message_size",
        "name",
        "properties",
        "rcv_settle_mode",
        "remote_attach",
        "remote_handle",
        "remote_max_message_size",
        "session",
        "snd_settle_mode",
        "source",
        "target",
        "unsettled",
    )

    def __init__(self, session: Session, attach: Any) -> None:
        self.session = session
        self.name: str = attach.name
        self.remote_handle: int = attach.handle
        self.handle: int = -1
        # The peer's role is in the attach; ours is the opposite.
        self.is_sender: bool = attach.role == ROLE_RECEIVER
        self.source = attach.source
        self.target = attach.target
        self.properties: dict = attach.properties or {}
        self.snd_settle_mode: int = attach.snd_settle_mode
        self.rcv_settle_mode: int = attach.rcv_settle_mode
        self.remote_max_message_size: int | None = attach.max_message_size
        # The largest delivery we take on this link (what our attach announced); None: the connection's.
        self.max_message_size: int | None = None
        # As a sender we start at delivery-count 0; as a receiver we track the peer's count.
        self.delivery_count: int = 0 if self.is_sender else (attach.initial_delivery_count or 0)
        self.link_credit: int = 0
        self.drain: bool = False
        self.attached = False
        self.detach_sent = False
        self.detach_received = False
        self.failure: tuple[str, str] | None = None  # a violation waiting for answer_violations()
        self.context: Any = None
        self.incoming: _IncomingDelivery | None = None
        self.unsettled: dict[int, Any] = {}
        self.remote_attach = attach

    @property
    def address(self) -> str | None:
        """The node address the peer means: the target when it sends, the source when it receives."""
        terminus = self.source if self.is_sender else self.target
        return getattr(terminus, "address", None) if terminus is not None else None

    def __repr__(self) -> str:
        role = "sender" if self.is_sender else "receiver"
        return f"<Link {self.name!r} {role} handle={self.handle} address={self.address!r}>"


class _IncomingDelivery:
    __slots__ = ("chunks", "delivery_id", "delivery_tag", "message_format", "refused", "settled", "size", "state")

    def __init__(self, transfer: Any) -> None:
        self.delivery_id = transfer.delivery_id
        self.delivery_tag = transfer.delivery_tag
        self.message_format = transfer.message_format or 0
        self.settled = bool(transfer.settled)
        self.state = transfer.state  # e.g. a transactional-state (spec 4.4.1)
        self.chunks: list[bytes] = []
        self.size = 0
        self.refused = False  # settled as rejected while it streamed: the rest of its frames is dropped


class Session:
    """One session: the channel pair, transfer windows and the links it carries."""

    def __init__(self, connection: Connection, remote_channel: int, channel: int, begin: Any) -> None:
        self.connection = connection
        self.remote_channel = remote_channel
        self.channel = channel
        self.next_outgoing_id = 0
        self.next_incoming_id: int = begin.next_outgoing_id or 0
        # Transfer frames the peer may still send before our next session flow (spec 2.5.6).
        self.incoming_window: int = connection.incoming_window
        self.outgoing_window = UINT_MAX
        self.remote_incoming_window: int = begin.incoming_window or 0
        self.remote_outgoing_window: int = begin.outgoing_window or 0
        self.handle_max: int = min(begin.handle_max if begin.handle_max is not None else UINT_MAX, 4095)
        self.links_by_remote: dict[int, Link] = {}
        self.links_by_handle: dict[int, Link] = {}
        self.outgoing_unsettled: dict[int, Link] = {}
        self.ended = False
        self.end_sent = False
        self.failure: tuple[str, str] | None = None  # a violation waiting for answer_violations()
        self.context: Any = None

    def _allocate_handle(self) -> int:
        handle = 0
        while handle in self.links_by_handle:
            handle += 1
        return handle


class Connection:
    """Server side of one AMQP connection."""

    def __init__(
        self,
        *,
        container_id: str = "sbemulator",
        max_frame_size: int = 1024 * 1024,
        channel_max: int = 4095,
        idle_timeout_ms: int | None = 240_000,
        sasl_mechanisms: tuple[str, ...] = ("ANONYMOUS", "PLAIN"),
        authenticate_plain: Callable[[str, str], bool] | None = None,
        require_sasl: bool = True,
        max_message_size: int = 64 * 1024 * 1024,
        incoming_window: int = 2048,
        clock: Callable[[], float] = time.monotonic,
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

        self._in = bytearray()
        self._out = bytearray()
        self._events: list[Event] = []
        self._state = "expect-header"  # -> sasl -> expect-amqp-header -> expect-open -> opened -> closed
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE
        self.remote_idle_timeout_ms: int | None = None
        self.remote_container_id: str | None = None
        self.remote_properties: dict | None = None
        self.sessions_by_remote: dict[int, Session] = {}
        self.sessions_by_channel: dict[int, Session] = {}
        # Sessions we ended with an error (remote channel -> our channel): DISCARDING until the peer's end.
        self._discarding: dict[int, int] = {}
        # Links and sessions the peer broke a flow-control rule on, answered by answer_violations().
        self._violations: list[Link | Session] = []
        self._windows_used = False  # a transfer arrived since the windows were last checked
        self.closed = False
        self.close_sent = False
        self.sasl_username: str | None = None
        now = clock()
        self._last_received = now
        self._last_sent = now

    # ------------------------------------------------------------------ byte interface
    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the socket; returns the events they caused (in order)."""
        if self.closed:
            return []
        self._last_received = self.clock()
        self._in += data
        try:
            self._process_input()
            if self._windows_used:  # only transfers use up an incoming window
                self._windows_used = False
                self._widen_incoming_windows()
        except ProtocolError as exc:
            self._fail(exc.condition, exc.description)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            # A field of the wrong type (a string handle, a list as delivery-id...): the frame decoded
            # but does not make sense; refuse it like undecodable input instead of failing the caller.
            self._fail(DECODE_ERROR, f"malformed frame: {exc}")
        events, self._events = self._events, []
        return events

    @property
    def has_violations(self) -> bool:
        """Whether :meth:`answer_violations` has something to answer."""
        return bool(self._violations)

    def answer_violations(self) -> list[Event]:
        """Detach the links and end the sessions on which the last read broke a flow-control rule.

        Call it once the events of ``receive_data`` have been handled: the deliveries that arrived
        before the violation are then settled before the detach or end that refuses the rest, so the
        peer learns exactly which of its messages were taken. ``data_to_send`` calls it too, for a
        caller that does not (the events are then returned by the next ``receive_data``).
        """
        if not self._violations:
            return []
        violations, self._violations = self._violations, []
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
            self._violations.append(endpoint)

    def data_to_send(self) -> bytes | bytearray:
        """Bytes the server should write now (empties the buffer; the caller owns what it gets)."""
        if self._violations:
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
        self.closed = True
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        self._events.append(ConnectionClosed(error("amqp:connection:forced", "connection lost"), True))
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
        if self.remote_idle_timeout_ms and self._state == "opened":
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
            and self._state == "opened"
            and now - self._last_sent >= self.remote_idle_timeout_ms / 2000.0
        ):
            self._out += build_frame(0)
            self._last_sent = now
        events, self._events = self._events, []
        return events

    # ------------------------------------------------------------------ input processing
    def _process_input(self) -> None:
        buf = self._in
        while not self.closed:
            opened = self._state == "opened"
            if not opened and self._state in ("expect-header", "expect-amqp-header"):
                if len(buf) < 8:
                    return
                header = bytes(buf[:8])
                del buf[:8]
                self._on_protocol_header(header)
                continue
            if len(buf) < FRAME_HEADER_SIZE:
                return
            size, doff, frame_type, channel = _read_frame_header(buf)
            if size < FRAME_HEADER_SIZE or doff < 2 or doff * 4 > size:
                raise ProtocolError(FRAMING_ERROR, f"invalid frame header (size={size}, doff={doff})")
            if not opened and size > MIN_MAX_FRAME_SIZE:
                # Spec 2.4.1: until the open frames have been exchanged the largest frame is
                # MIN-MAX-FRAME-SIZE (the open itself, and SASL frames before it, included).
                raise ProtocolError(
                    FRAMING_ERROR,
                    f"frame of {size} bytes sent before the open exchange completed; "
                    f"the limit until then is {MIN_MAX_FRAME_SIZE} bytes",
                )
            if size > self.max_frame_size:
                raise ProtocolError(
                    FRAMING_ERROR,
                    f"frame of {size} bytes exceeds the negotiated max-frame-size {self.max_frame_size}",
                )
            if len(buf) < size:
                return
            frame = bytes(buf[doff * 4 : size])
            del buf[:size]
            if (
                opened
                and frame_type == FRAME_AMQP
                and len(frame) > 3
                and frame[2] == 0x15  # a disposition (00 53 15): one per settled message
                and frame[0] == 0x00
                and frame[1] == 0x53
                and not self._discarding
                and not self._violations
            ):
                delivery_id = hotframes.sdk_complete_id(frame)
                if delivery_id is not None:  # the SDK's complete of one delivery: one per message
                    self._on_sdk_complete(channel, delivery_id)
                    continue
                disposition = hotframes.parse_disposition(frame)
                if disposition is not None:  # the other shapes the SDKs send; the rest goes the long way
                    try:
                        self._on_disposition(channel, disposition)
                    except SessionError as exc:
                        self._end_session_with_error(exc.session, exc.condition, exc.description)
                    continue
            self._on_frame(frame_type, channel, frame)

    def _on_protocol_header(self, header: bytes) -> None:
        if self._state == "expect-header":
            if header == SASL_HEADER:
                self._out += SASL_HEADER
                mechanisms = Array(tuple(Symbol(m) for m in self.sasl_mechanisms), "symbol")
                self._out += build_frame(0, SaslMechanisms(mechanisms), frame_type=FRAME_SASL)
                self._state = "sasl"
                return
            if header == AMQP_HEADER and not self.require_sasl:
                self._out += AMQP_HEADER
                self._state = "expect-open"
                return
        elif self._state == "expect-amqp-header" and header == AMQP_HEADER:
            self._out += AMQP_HEADER
            self._state = "expect-open"
            return
        # Spec 2.2: answer with the header we do support, then close the socket.
        self._out += SASL_HEADER if self._state == "expect-header" else AMQP_HEADER
        self.closed = True
        self._events.append(
            ConnectionClosed(error(DECODE_ERROR, f"unsupported protocol header {header!r}"), False)
        )

    def _decode_body(self, frame: bytes) -> Any:
        try:
            # Nearly every body is a performative described by a small ulong code: decode its field
            # list straight into the performative's class instead of through a Described value.
            # (Dispositions in the SDKs' shapes never get here: _process_input reads them itself.)
            if len(frame) > 3 and frame[0] == 0x00 and frame[1] == 0x53 and frame[3] in _LIST_CODES:
                cls = _FRAME_BODIES.get(frame[2])
                if cls is not None:
                    values, offset = codec.decode(frame, 3)
                    return cls.from_list(values), offset
            value, offset = codec.decode(frame)
        except codec.DecodeError as exc:
            raise ProtocolError(DECODE_ERROR, f"cannot decode frame body: {exc}") from None
        body = from_described(value)
        return body, offset

    def _on_frame(self, frame_type: int, channel: int, frame: bytes) -> None:
        if not frame:
            return  # heartbeat
        body, offset = self._decode_body(frame)
        if self._state == "sasl":
            if frame_type != FRAME_SASL or not isinstance(body, SaslInit):
                raise ProtocolError(DECODE_ERROR, f"expected sasl-init, got {type(body).__name__}")
            self._on_sasl_init(body)
            return
        if frame_type != FRAME_AMQP:
            raise ProtocolError(FRAMING_ERROR, f"unexpected frame type {frame_type}")
        if self._state == "expect-open":
            if not isinstance(body, Open):
                raise ProtocolError(NOT_ALLOWED, f"expected open, got {type(body).__name__}")
            self._on_open(body)
            return
        handler = self._HANDLERS.get(type(body))
        if handler is None:
            raise ProtocolError(DECODE_ERROR, f"unknown or misplaced performative {body!r:.200}")
        if channel in self._discarding and type(body) is not Close:
            # Spec 2.5.5 DISCARDING: drop the peer's frames on that channel until its end arrives.
            if type(body) is End:
                del self._discarding[channel]
            return
        if self._violations and type(body) is not End and type(body) is not Close:
            session = self.sessions_by_remote.get(channel)
            if session is not None and session.failure is not None:
                return  # the session is about to be ended with an error: the rest is discarded
        if type(body) is Transfer:
            self._on_transfer(channel, body, frame[offset:])
        else:
            try:
                handler(self, channel, body)
            except SessionError as exc:
                self._end_session_with_error(exc.session, exc.condition, exc.description)

    # ------------------------------------------------------------------ SASL
    def _on_sasl_init(self, init: Any) -> None:
        mechanism = str(init.mechanism or "")
        ok = False
        if mechanism not in self.sasl_mechanisms:
            ok = False
        elif mechanism == "ANONYMOUS":
            ok = True
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
            self._state = "expect-amqp-header"
        else:
            self.closed = True
            self._events.append(ConnectionClosed(error("amqp:unauthorized-access", "SASL failed"), False))

    # ------------------------------------------------------------------ connection
    def _on_open(self, open_: Any) -> None:
        remote_max = open_.max_frame_size if open_.max_frame_size is not None else UINT_MAX
        if remote_max < MIN_MAX_FRAME_SIZE:
            self._state = "opened"
            self._send_open()
            raise ProtocolError(
                FRAME_SIZE_TOO_SMALL, f"max-frame-size {remote_max} is below the minimum {MIN_MAX_FRAME_SIZE}"
            )
        self.remote_max_frame_size = min(remote_max, UINT_MAX)
        self.remote_idle_timeout_ms = open_.idle_time_out or None
        self.remote_container_id = open_.container_id
        self.remote_properties = open_.properties
        self._state = "opened"
        self._send_open()
        self._events.append(ConnectionOpened(open_.container_id, open_.hostname, open_.properties))

    def _send_open(self) -> None:
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

    def _on_second_open(self, channel: int, open_: Any) -> None:
        raise ProtocolError(NOT_ALLOWED, "open received twice")

    def _on_close(self, channel: int, close: Any) -> None:
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        if not self.close_sent:
            self._send(0, Close())
            self.close_sent = True
        self.closed = True
        self._events.append(ConnectionClosed(close.error, True))

    def close(self, condition: str | None = None, description: str | None = None) -> None:
        """Close the connection (with an error when ``condition`` is given)."""
        if self.closed or self.close_sent:
            return
        err = error(condition, description) if condition else None
        for session in list(self.sessions_by_channel.values()):
            self._drop_session(session, None)
        if self._state in ("opened", "expect-open"):
            if self._state == "expect-open":
                self._send_open()
            self._send(0, Close(err))
        self.close_sent = True
        self.closed = True
        self._events.append(ConnectionClosed(err, False))

    def _fail(self, condition: str, description: str) -> None:
        self.close(condition, description)

    # ------------------------------------------------------------------ sessions
    def _on_begin(self, channel: int, begin: Any) -> None:
        if begin.remote_channel is not None:
            raise ProtocolError(NOT_ALLOWED, "server does not initiate sessions")
        if channel in self.sessions_by_remote or channel > self.channel_max:
            raise ProtocolError(FRAMING_ERROR, f"channel {channel} already in use or above channel-max")
        local = 0
        reserved = self._discarding.values()
        while local in self.sessions_by_channel or local in reserved:
            local += 1
        session = Session(self, channel, local, begin)
        self.sessions_by_remote[channel] = session
        self.sessions_by_channel[local] = session
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

    def _session(self, channel: int) -> Session:
        session = self.sessions_by_remote.get(channel)
        if session is None:
            raise ProtocolError(NOT_ALLOWED, f"no session on channel {channel}")
        return session

    def _on_end(self, channel: int, end: Any) -> None:
        session = self._session(channel)
        self._drop_session(session, end.error)
        if not session.end_sent:
            self._send(session.channel, End())
            session.end_sent = True

    def _drop_session(self, session: Session, err: Any) -> None:
        if session.ended:
            return
        session.ended = True
        for link in list(session.links_by_handle.values()):
            self._events.append(LinkDetached(link, True, None))
        session.links_by_handle.clear()
        session.links_by_remote.clear()
        self.sessions_by_remote.pop(session.remote_channel, None)
        self.sessions_by_channel.pop(session.channel, None)
        self._events.append(SessionEnded(session, err))

    def _end_session_with_error(self, session: Session, condition: str, description: str) -> None:
        self._drop_session(session, None)
        if not session.end_sent:
            self._send(session.channel, End(error(condition, description)))
            session.end_sent = True
            self._discarding[session.remote_channel] = session.channel

    # ------------------------------------------------------------------ links
    def _on_attach(self, channel: int, attach: Any) -> None:
        session = self._session(channel)
        if attach.handle is None or attach.name is None or attach.role is None:
            raise SessionError(session, DECODE_ERROR, "attach without name, handle or role")
        if attach.handle in session.links_by_remote:
            raise SessionError(session, HANDLE_IN_USE, f"handle {attach.handle} is already attached")
        if attach.handle > session.handle_max:
            # Spec 2.7.2: a handle outside the announced range closes the connection.
            raise ProtocolError(FRAMING_ERROR, f"handle {attach.handle} above handle-max {session.handle_max}")
        link = Link(session, attach)
        link.handle = session._allocate_handle()
        session.links_by_remote[attach.handle] = link
        session.links_by_handle[link.handle] = link
        self._events.append(LinkAttachRequested(link))

    def accept_attach(
        self,
        link: Link,
        *,
        source: Any = None,
        target: Any = None,
        properties: dict | None = None,
        max_message_size: int | None = None,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
    ) -> None:
        """Answer the peer's attach; source/target default to what the peer sent. ``max_message_size``
        is announced to the peer and enforced on what it sends: a delivery that grows past it is refused
        while it streams, before the rest of it is buffered."""
        link.attached = True
        link.max_message_size = max_message_size
        if source is not None:
            link.source = source
        if target is not None:
            link.target = target
        self._send(
            link.session.channel,
            Attach(
                link.name,
                UInt(link.handle),
                ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
                UByte(link.snd_settle_mode if snd_settle_mode is None else snd_settle_mode),
                UByte(link.rcv_settle_mode if rcv_settle_mode is None else rcv_settle_mode),
                link.source,
                link.target,
                None,
                None,
                UInt(link.delivery_count) if link.is_sender else None,
                ULong(max_message_size) if max_message_size is not None else None,
                None,
                None,
                properties,
            ),
        )

    def reject_attach(self, link: Link, condition: str, description: str, *, keep_termini: bool = False,
                      **attach_kwargs: Any) -> None:
        """Refuse a link as spec 2.6.3 says: an attach with a null terminus on our side, then a detach
        carrying the error (``keep_termini`` answers with both termini, for links that were open)."""
        if keep_termini:
            self.accept_attach(link, **attach_kwargs)
        else:
            link.attached = True
            self._send(
                link.session.channel,
                Attach(
                    link.name, UInt(link.handle), ROLE_SENDER if link.is_sender else ROLE_RECEIVER,
                    UByte(link.snd_settle_mode), UByte(link.rcv_settle_mode),
                    None if link.is_sender else link.source,
                    link.target if link.is_sender else None,
                    None, None, UInt(0) if link.is_sender else None,
                ),
            )
        self.detach(link, condition, description)

    def detach(self, link: Link, condition: str | None = None, description: str | None = None,
               info: dict | None = None) -> None:
        """Detach (close) one link, with an error when ``condition`` is given."""
        if link.detach_sent or link.session.ended:
            return
        link.detach_sent = True
        err = error(condition, description, info) if condition else None
        self._send(link.session.channel, Detach(UInt(link.handle), True, err))
        if link.detach_received:
            self._forget_link(link)

    def _on_detach(self, channel: int, detach: Any) -> None:
        session = self._session(channel)
        link = session.links_by_remote.get(detach.handle)
        if link is None:
            raise SessionError(session, UNATTACHED_HANDLE, f"detach of unattached handle {detach.handle}")
        link.detach_received = True
        session.links_by_remote.pop(detach.handle, None)
        if not link.detach_sent:
            self._events.append(LinkDetached(link, bool(detach.closed), detach.error))
            link.detach_sent = True
            self._send(session.channel, Detach(UInt(link.handle), True))
        self._forget_link(link)

    def _forget_link(self, link: Link) -> None:
        session = link.session
        session.links_by_handle.pop(link.handle, None)
        if link.detach_received:
            session.links_by_remote.pop(link.remote_handle, None)
        for delivery_id in list(link.unsettled):
            session.outgoing_unsettled.pop(delivery_id, None)

    # ------------------------------------------------------------------ flow control
    def _on_flow(self, channel: int, flow: Any) -> None:
        session = self._session(channel)
        if flow.next_outgoing_id is not None:
            session.next_incoming_id = flow.next_outgoing_id
        session.remote_outgoing_window = flow.outgoing_window or 0
        remote_next_incoming = (
            flow.next_incoming_id if flow.next_incoming_id is not None else session.next_outgoing_id
        )
        session.remote_incoming_window = remote_next_incoming + (flow.incoming_window or 0) - (
            session.next_outgoing_id
        )
        if flow.handle is None:
            for link in session.links_by_handle.values():
                if link.is_sender and link.attached and link.link_credit > 0:
                    self._events.append(LinkCreditChanged(link, False))
            if flow.echo:
                self._send_session_flow(session)
            return
        link = session.links_by_remote.get(flow.handle)
        if link is None:
            raise SessionError(session, UNATTACHED_HANDLE, f"flow for unattached handle {flow.handle}")
        if link.is_sender:
            peer_delivery_count = flow.delivery_count if flow.delivery_count is not None else 0
            credit = flow.link_credit or 0
            link.link_credit = max(0, peer_delivery_count + credit - link.delivery_count)
            link.drain = bool(flow.drain)
            self._events.append(LinkCreditChanged(link, link.drain))
            if flow.echo:
                self._send_link_flow(link)
        elif flow.echo:
            self._send_link_flow(link)

    def _send_session_flow(self, session: Session) -> None:
        self._send(
            session.channel,
            Flow(
                UInt(session.next_incoming_id),
                UInt(session.incoming_window),
                UInt(session.next_outgoing_id),
                UInt(session.outgoing_window),
            ),
        )

    def _send_link_flow(self, link: Link, drain: bool = False, echo: bool = False) -> None:
        session = link.session
        self._send(
            session.channel,
            Flow(
                UInt(session.next_incoming_id),
                UInt(session.incoming_window),
                UInt(session.next_outgoing_id),
                UInt(session.outgoing_window),
                UInt(link.handle),
                UInt(link.delivery_count),
                UInt(link.link_credit),
                None,
                drain,
                echo,
            ),
        )

    def grant_credit(self, link: Link, credit: int) -> None:
        """Give a peer sender ``credit`` transfers (our receiving link)."""
        if link.detach_sent or link.session.ended:
            return
        link.link_credit = credit
        self._send_link_flow(link)

    def drain_complete(self, link: Link) -> None:
        """Nothing left to send: consume the remaining credit and tell the peer (spec 2.6.7)."""
        if link.detach_sent or link.session.ended:
            return
        link.delivery_count = (link.delivery_count + link.link_credit) & UINT_MAX
        link.link_credit = 0
        link.drain = False
        self._send_link_flow(link, drain=True)

    def can_send(self, link: Link) -> bool:
        return (
            link.attached
            and not link.detach_sent
            and not link.session.ended
            and link.link_credit > 0
            and link.session.remote_incoming_window > 0
            and not self.closed
        )

    # ------------------------------------------------------------------ transfers
    def send_transfer(
        self,
        link: Link,
        delivery_tag: bytes,
        payload: bytes,
        *,
        settled: bool,
        message_format: int = 0,
        context: Any = None,
    ) -> int:
        """Send one delivery (split into frames as the peer's max-frame-size requires); its delivery id."""
        delivery_id = link.session.next_outgoing_id
        self.send_transfers(link, [(delivery_tag, payload, context)], settled=settled, message_format=message_format)
        return delivery_id

    def send_transfers(self, link: Link, deliveries: list[tuple[bytes, bytes, Any]], *, settled: bool,
                       message_format: int = 0) -> None:
        """Send each ``(delivery tag, payload, context)`` in turn. The broker hands deliveries over in
        batches of up to a hundred: what they share (session, channel, frame limit, the dictionaries of
        unsettled deliveries) is looked up once for all of them."""
        session = link.session
        out = self._out
        channel = session.channel
        limit = self.remote_max_frame_size - FRAME_HEADER_SIZE - 8  # 8: slack for 'more' in a split delivery
        handle = link.handle
        session_unsettled = session.outgoing_unsettled
        link_unsettled = link.unsettled
        pack_header = _frame_header.pack
        transfer = hotframes.transfer
        for tag, payload, context in deliveries:
            delivery_id = session.next_outgoing_id
            performative = transfer(handle, delivery_id, tag, message_format, settled)
            size = len(performative) + len(payload)
            if size <= limit:
                out += pack_header(FRAME_HEADER_SIZE + size, 2, FRAME_AMQP, channel)
                out += performative
                out += payload
            else:
                self._write_split_delivery(link, delivery_id, tag, payload, settled, message_format)
            session.next_outgoing_id += 1
            session.remote_incoming_window -= 1
            link.delivery_count = (link.delivery_count + 1) & UINT_MAX
            link.link_credit -= 1
            if not settled:
                session_unsettled[delivery_id] = link
                link_unsettled[delivery_id] = context

    def _write_split_delivery(self, link: Link, delivery_id: int, tag: bytes, payload: bytes, settled: bool,
                              message_format: int) -> None:
        """The frames of a delivery larger than one frame, all but the last with 'more'; each frame but
        the last takes a transfer id and a unit of the peer's window here (the caller counts the last)."""
        session = link.session
        more = Transfer(UInt(link.handle), UInt(delivery_id), tag, UInt(message_format), settled, True)
        head = bytearray(FRAME_HEADER_SIZE)
        codec.encode_into(head, more)
        room = self.remote_max_frame_size - len(head)
        offset = 0
        while len(payload) - offset > room:
            frame = bytearray(head)
            frame += payload[offset : offset + room]
            _patch_header(frame, session.channel)
            self._out += frame
            offset += room
            session.next_outgoing_id += 1
            session.remote_incoming_window -= 1
        last = bytearray(FRAME_HEADER_SIZE)
        codec.encode_into(last, Transfer(UInt(link.handle), UInt(delivery_id), tag, UInt(message_format), settled,
                                         False))
        last += payload[offset:]
        _patch_header(last, session.channel)
        self._out += last

    def _on_transfer(self, channel: int, transfer: Any, payload: bytes) -> None:
        session = self._session(channel)
        link = session.links_by_remote.get(transfer.handle)
        if link is None or link.is_sender:
            self._end_session_with_error(
                session, UNATTACHED_HANDLE, f"transfer on unattached handle {transfer.handle}"
            )
            return
        if session.incoming_window <= 0:
            # Spec 2.5.6: the peer must not send a transfer frame once our incoming window is used up.
            self._violation(
                session, WINDOW_VIOLATION,
                f"transfer frame beyond the session incoming-window of {self.incoming_window} frames",
            )
            return
        # Every transfer frame takes a session transfer-id, even one we then drop (spec 2.5.6).
        session.next_incoming_id += 1
        session.incoming_window -= 1
        self._windows_used = True
        if link.detach_sent or link.failure is not None:
            return  # in flight when we detached: the peer learns from our detach (spec 2.6.5)
        delivery = link.incoming
        if delivery is None:
            if transfer.delivery_id is None:
                raise ProtocolError(DECODE_ERROR, "first transfer of a delivery has no delivery-id")
            if link.link_credit <= 0:
                # Spec 2.6.7: with no link-credit left it is illegal to send; the link is detached.
                self._violation(link, TRANSFER_LIMIT_EXCEEDED,
                                "transfer sent without link-credit: wait for a flow that grants credit")
                return
            delivery = link.incoming = _IncomingDelivery(transfer)
            link.link_credit -= 1
            link.delivery_count = (link.delivery_count + 1) & UINT_MAX
        if transfer.aborted:
            link.incoming = None
            return
        if delivery.refused:
            if not transfer.more:
                link.incoming = None
            return
        if payload:
            delivery.chunks.append(payload)
            delivery.size += len(payload)
            limit = link.max_message_size or self.max_message_size
            if delivery.size > limit + (limit >> 4):
                self._refuse_oversized(link, delivery, limit)
                if not transfer.more:
                    link.incoming = None
                return
        if transfer.settled:
            delivery.settled = True
        if transfer.state is not None:
            delivery.state = transfer.state
        if transfer.more:
            return
        link.incoming = None
        body = delivery.chunks[0] if len(delivery.chunks) == 1 else b"".join(delivery.chunks)
        self._events.append(
            MessageReceived(
                link, delivery.delivery_id, bytes(delivery.delivery_tag or b""), delivery.message_format,
                delivery.settled, body, delivery.state,
            )
        )

    def _refuse_oversized(self, link: Link, delivery: _IncomingDelivery, limit: int) -> None:
        """The delivery grew past the link's max-message-size: settle it as rejected now, in Service
        Bus's words (the SDKs raise MessageSizeExceededError), and drop the rest of it as it arrives
        instead of buffering it (spec 2.6.12: a receiver may settle before the last frame).

        It is refused once it is a sixteenth above the limit, not at the limit: azure-servicebus fills a
        ServiceBusMessageBatch up to the max-message-size by its own count, and the transfer it sends
        is a few bytes larger (262,149 bytes for a full 262,144-byte batch), which Service Bus accepts.
        Each message of a delivery below that is checked exactly by the broker."""
        delivery.refused = True
        delivery.chunks = []
        if delivery.settled:
            return  # sent pre-settled: there is no outcome to tell
        description = (f"The received message (delivery-id:{delivery.delivery_id}, size:{delivery.size} bytes) "
                       f"exceeds the limit ({limit} bytes) currently allowed on the link.")
        self.settle_incoming(link, delivery.delivery_id, Rejected(error(MESSAGE_SIZE_EXCEEDED, description)))

    def _widen_incoming_windows(self) -> None:
        """After a read: give back the window of every session that has used half of it."""
        if self.closed:
            return
        for session in self.sessions_by_channel.values():
            if session.incoming_window <= self.incoming_window // 2 and session.failure is None:
                session.incoming_window = self.incoming_window
                self._send_session_flow(session)

    # ------------------------------------------------------------------ dispositions
    def settle_incoming(self, link: Link, delivery_id: int, state: Any, last: int | None = None) -> None:
        """Settle deliveries the peer sent us (``delivery_id``..``last``) with ``state``."""
        if link.session.ended or self.closed:
            return
        self._out += hotframes.frame(
            link.session.channel, hotframes.disposition(ROLE_RECEIVER, delivery_id, last, True, state)
        )

    def settle_outgoing(self, link: Link, delivery_id: int, state: Any) -> None:
        """Settle (our side of) a delivery we sent, echoing the outcome the peer chose."""
        session = link.session
        session.outgoing_unsettled.pop(delivery_id, None)
        link.unsettled.pop(delivery_id, None)
        if session.ended or self.closed:
            return
        if type(state) is Accepted:
            self._out += hotframes.accepted_echo_frame(session.channel, delivery_id)
        else:
            self._out += hotframes.frame(
                session.channel, hotframes.disposition(ROLE_SENDER, delivery_id, None, True, state)
            )

    def _on_sdk_complete(self, channel: int, delivery_id: int) -> None:
        """:meth:`_on_disposition` of the SDK's complete: one delivery, unsettled, accepted."""
        self._peer_disposed(self._session(channel), delivery_id, delivery_id, False, _ACCEPTED)

    def _on_disposition(self, channel: int, disposition: Any) -> None:
        session = self._session(channel)
        if disposition.role != ROLE_RECEIVER:
            return  # the peer settles deliveries it sent; we already settled ours at once
        first = disposition.first
        last = disposition.last if disposition.last is not None else first
        if first is None or last - first > 100_000:
            raise SessionError(session, DECODE_ERROR, "disposition range is invalid")
        self._peer_disposed(session, first, last, bool(disposition.settled), disposition.state)

    def _peer_disposed(self, session: Session, first: int, last: int, settled: bool, state: Any) -> None:
        """The peer gave deliveries ``first``..``last`` we sent a state: an event for each we know."""
        unsettled = session.outgoing_unsettled
        for delivery_id in range(first, last + 1):
            link = unsettled.get(delivery_id)
            if link is None:
                continue
            context = link.unsettled.get(delivery_id)
            if settled:
                unsettled.pop(delivery_id, None)
                link.unsettled.pop(delivery_id, None)
            self._events.append(DeliveryStateChanged(link, delivery_id, state, settled, context))

    # ------------------------------------------------------------------ output
    def _send(self, channel: int, body: Any) -> None:
        self._out += build_frame(channel, body)

    _HANDLERS: dict[type, Callable[[Connection, int, Any], None]] = {}


_frame_header = struct.Struct(">IBBH")
_read_frame_header = _frame_header.unpack_from  # framing.parse_frame_header without the call around it


def _patch_header(frame: bytearray, channel: int) -> None:
    size = len(frame)
    frame[0:8] = bytes(
        ((size >> 24) & 0xFF, (size >> 16) & 0xFF, (size >> 8) & 0xFF, size & 0xFF, 2, FRAME_AMQP,
         (channel >> 8) & 0xFF, channel & 0xFF)
    )


Connection._HANDLERS = {
    Begin: Connection._on_begin,
    Attach: Connection._on_attach,
    Flow: Connection._on_flow,
    Transfer: Connection._on_transfer,  # dispatched with its payload in _on_frame
    Disposition: Connection._on_disposition,
    Detach: Connection._on_detach,
    End: Connection._on_end,
    Close: Connection._on_close,
    Open: Connection._on_second_open,
}

__all__ = ["Connection", "Error", "Link", "ProtocolError", "Session"]
