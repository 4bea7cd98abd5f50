"""Transfers and dispositions of a sans-I/O AMQP 1.0 connection (spec part 2, 2.6.12-2.7.6): deliveries
out (split into frames as the peer's max-frame-size requires) and in (reassembled, bounded by the
link's max-message-size), settlement both ways, and a disposition over a range of delivery ids turned
into events a slice at a time. Kept apart from the connection's endpoint life cycle (open, begin,
attach, flow, detach, end, close in connection.py) as Proton keeps its transport and endpoints apart;
``Connection`` takes these methods from ``TransferEndpoint``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from . import codec, hotframes, windows
from .endpoints import IncomingDelivery, Link, Session
from .errors import (
    DECODE_ERROR,
    MESSAGE_SIZE_EXCEEDED,
    RESOURCE_LIMIT_EXCEEDED,
    TRANSFER_LIMIT_EXCEEDED,
    UNATTACHED_HANDLE,
    WINDOW_VIOLATION,
    ProtocolError,
    SessionError,
)
from .events import DeliveryRangeStateChanged, DeliveryStateChanged, Event, MessageReceived
from .framing import FRAME_AMQP, FRAME_HEADER_SIZE, pack_frame_header, patch_frame_header
from .message import BATCH_MESSAGE_FORMAT
from .performatives import ROLE_RECEIVER, ROLE_SENDER, Accepted, Disposition, Rejected, Transfer, error
from .states import LINK_ATTACHED, SESSION_MAPPED, Input
from .types import UInt
from .windows import UINT_MAX

RECV_TRANSFER, RECV_DISPOSITION = Input.RECV_TRANSFER, Input.RECV_DISPOSITION
_ACCEPTED = Accepted()  # the state of every completion; it has no fields, so one instance serves all


class RangeCursor:
    """How far the application has expanded one ``DeliveryRangeStateChanged`` (the event itself stays as
    the peer sent it): the next delivery id, or, once the rest was worked out at once because a later
    frame (a detach, an end, another disposition) was about to change which deliveries are unsettled,
    the links, delivery ids and contexts of the deliveries it names, read from ``resolved_next`` on.
    Three lists and not an event per delivery: 100,000 objects made at once are scanned by the cyclic
    collector again and again (34-45 ms of it in that read and after it)."""

    __slots__ = ("next_id", "resolved_contexts", "resolved_ids", "resolved_links", "resolved_next")

    def __init__(self, next_id: int) -> None:
        self.next_id = next_id
        self.resolved_links: list[Link] | None = None
        self.resolved_ids: list[int] | None = None
        self.resolved_contexts: list[Any] | None = None
        self.resolved_next = 0


class TransferEndpoint:
    """The transfer and disposition half of ``Connection`` (a base class of it: one object, one set of
    attributes, no call between the halves that was not a method call before)."""

    if TYPE_CHECKING:  # what this half uses of the connection's other half (connection.py)
        DISPOSED_PER_READ: ClassVar[int]
        _range_events: int
        _batch_slice_bytes: int
        wants_slices: bool
        _ranges: dict[DeliveryRangeStateChanged, RangeCursor]
        _out: bytearray
        _events: list[Event]
        _disposed: int
        _open_ranges: list[DeliveryRangeStateChanged]
        _windows_used: bool
        closed: bool
        incoming_window: int
        max_message_size: int
        remote_max_frame_size: int
        sessions_by_channel: dict[int, Session]

        def _enter_session(self, channel: int, input_: Input) -> Session | None: ...

        def _enter_link(self, session: Session, link: Link, input_: Input) -> bool: ...

        def _violation(self, endpoint: Link | Session, condition: str, description: str) -> None: ...

        def _end_session_with_error(self, session: Session, condition: str, description: str) -> None: ...

        def _send_session_flow(self, session: Session) -> None: ...

        def drain_complete(self, link: Link) -> None: ...

        def _send(self, channel: int, body: Any) -> None: ...

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
        unsettled deliveries, the state check and the window arithmetic) is done once for all of them."""
        session = link.session
        if link.state is not LINK_ATTACHED or session.state is not SESSION_MAPPED or self.closed:
            raise RuntimeError(f"send_transfers on {link!r} in {link.state} of {session.state}")  # our bug
        out = self._out
        channel = session.channel
        limit = self.remote_max_frame_size - FRAME_HEADER_SIZE - 8  # 8: slack for 'more' in a split delivery
        handle = link.handle
        session_unsettled = session.outgoing_unsettled
        link_unsettled = link.unsettled
        pack_header = pack_frame_header
        transfer = hotframes.transfer
        first_id = next_id = session.next_outgoing_id
        for tag, payload, context in deliveries:
            delivery_id = next_id & UINT_MAX  # a serial number: past the last id the next is 0 (spec 2.8.9)
            performative = transfer(handle, delivery_id, tag, message_format, settled)
            size = len(performative) + len(payload)
            if size <= limit:
                out += pack_header(FRAME_HEADER_SIZE + size, 2, FRAME_AMQP, channel)
                out += performative
                out += payload
                next_id += 1
            else:
                next_id += self._write_split_delivery(link, delivery_id, tag, payload, settled, message_format)
            if not settled:
                session_unsettled[delivery_id] = link
                link_unsettled[delivery_id] = context
        session.frames_sent(next_id - first_id)
        link.deliveries_sent(len(deliveries))
        if link.drain and link.link_credit == 0:
            self.drain_complete(link)  # the deliveries used up a draining link's credit: tell the peer

    def _write_split_delivery(self, link: Link, delivery_id: int, tag: bytes, payload: bytes, settled: bool,
                              message_format: int) -> int:
        """The frames of a delivery larger than one frame, all but the last with 'more'; how many."""
        channel = link.session.channel
        more = Transfer(UInt(link.handle), UInt(delivery_id), tag, UInt(message_format), settled, True)
        head = bytearray(FRAME_HEADER_SIZE)
        codec.encode_into(head, more)
        room = self.remote_max_frame_size - len(head)
        offset = 0
        frames = 1
        while len(payload) - offset > room:
            frame = bytearray(head)
            frame += payload[offset : offset + room]
            patch_frame_header(frame, channel)
            self._out += frame
            offset += room
            frames += 1
        last = bytearray(FRAME_HEADER_SIZE)
        codec.encode_into(last, Transfer(UInt(link.handle), UInt(delivery_id), tag, UInt(message_format), settled,
                                         False))
        last += payload[offset:]
        patch_frame_header(last, channel)
        self._out += last
        return frames

    def _on_transfer(self, channel: int, transfer: Transfer, payload: bytes) -> None:
        session = self._enter_session(channel, RECV_TRANSFER)
        if session is None:
            return
        handle = transfer.handle
        link = session.links_by_remote.get(handle) if handle is not None else None
        if link is None or link.is_sender:
            self._end_session_with_error(
                session, UNATTACHED_HANDLE, f"transfer on unattached handle {transfer.handle}"
            )
            return
        if not session.transfer_frame_received():
            # Spec 2.5.6: the peer must not send a transfer frame once our incoming window is used up.
            self._violation(
                session, WINDOW_VIOLATION,
                f"transfer frame beyond the session incoming-window of {self.incoming_window} frames",
            )
            return
        self._windows_used = True
        if not self._enter_link(session, link, RECV_TRANSFER) or link.failure is not None:
            return  # in flight when we detached: the peer learns from our detach (spec 2.6.5)
        delivery = link.incoming
        if delivery is None:
            if transfer.delivery_id is None:
                raise ProtocolError(DECODE_ERROR, "first transfer of a delivery has no delivery-id")
            if not link.delivery_received():
                # Spec 2.6.7: with no link-credit left it is illegal to send; the link is detached.
                self._violation(link, TRANSFER_LIMIT_EXCEEDED,
                                "transfer sent without link-credit: wait for a flow that grants credit")
                return
            delivery = link.incoming = IncomingDelivery(transfer, transfer.delivery_id)
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
        if delivery.message_format == BATCH_MESSAGE_FORMAT and len(body) > self._batch_slice_bytes:
            self.wants_slices = True  # an SDK batch of many small messages: decoded in slices (the gateway)
        self._events.append(
            MessageReceived(
                link, delivery.delivery_id, bytes(delivery.delivery_tag or b""), delivery.message_format,
                delivery.settled, body, delivery.state,
            )
        )

    def _refuse_oversized(self, link: Link, delivery: IncomingDelivery, limit: int) -> None:
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
        announced = self.incoming_window
        for session in self.sessions_by_channel.values():
            if session.state is SESSION_MAPPED and session.failure is None and session.widen(announced):
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

    def _on_disposition(self, channel: int, disposition: Disposition) -> None:
        session = self._enter_session(channel, RECV_DISPOSITION)
        if session is None:
            return
        if disposition.role != ROLE_RECEIVER:
            return  # the peer settles deliveries it sent; we already settled ours at once
        first = disposition.first
        last = disposition.last if disposition.last is not None else first
        if first is None or last is None or not 0 <= windows.serial_diff(last, first) <= 100_000:
            raise SessionError(session, DECODE_ERROR, "disposition range is invalid")
        settled = bool(disposition.settled)
        if last < first:  # the range wraps (delivery ids are serial numbers): its two parts, in order
            self._peer_disposed(session, first, UINT_MAX, settled, disposition.state)
            first = 0
        self._peer_disposed(session, first, last, settled, disposition.state)

    def _peer_disposed(self, session: Session, first: int, last: int, settled: bool, state: Any) -> None:
        """The peer gave deliveries ``first``..``last`` we sent a state: an event for each we know, or
        for a long range one event the application expands in slices (``expand_range``)."""
        if last != first:  # one delivery per disposition (the SDKs') adds one event per frame at most
            self._disposed += last - first + 1
            if self._disposed > self.DISPOSED_PER_READ:
                self._too_many_disposed()
        if self._open_ranges:
            self._resolve_ranges()  # an earlier range first: dispositions apply in the order they came
        if last - first >= self._range_events:
            self.wants_slices = True
            event = DeliveryRangeStateChanged(session, first, last, settled, state)
            self._ranges[event] = RangeCursor(first)
            self._open_ranges.append(event)
            self._events.append(event)
            return
        unsettled = session.outgoing_unsettled
        # The loop of _expand_ids, inline: this runs once per message an SDK settles.
        for delivery_id in range(first, last + 1):
            link = unsettled.get(delivery_id)
            if link is None:
                continue
            context = link.unsettled.get(delivery_id)
            if settled:
                unsettled.pop(delivery_id, None)
                link.unsettled.pop(delivery_id, None)
            self._events.append(DeliveryStateChanged(link, delivery_id, state, settled, context))

    def _too_many_disposed(self) -> None:
        raise ProtocolError(RESOURCE_LIMIT_EXCEEDED, f"The dispositions of one read named more than "
                            f"{self.DISPOSED_PER_READ:,} deliveries (those that do not settle name "
                            "them again every time).")

    def expand_range(self, event: DeliveryRangeStateChanged, count: int) -> list[DeliveryStateChanged]:
        """The events of the next ``count`` delivery ids of ``event`` (its cursor then starts after them):
        what the disposition meant for each delivery still unsettled when its slice is handled."""
        cursor = self._ranges.get(event)
        if cursor is None:
            return []  # expanded to its end already
        ids, links, contexts = cursor.resolved_ids, cursor.resolved_links, cursor.resolved_contexts
        if ids is not None and links is not None and contexts is not None:
            start = cursor.resolved_next
            stop = min(start + count, len(ids))
            cursor.resolved_next = stop
            if stop >= len(ids):
                del self._ranges[event]
            state, settled = event.state, event.settled
            return [DeliveryStateChanged(link, delivery_id, state, settled, context) for link, delivery_id, context
                    in zip(links[start:stop], ids[start:stop], contexts[start:stop], strict=True)]
        last = min(event.last, cursor.next_id + count - 1)
        out = self._expand_ids(event, cursor, last)
        if cursor.next_id > event.last:
            self._open_ranges.remove(event)
            del self._ranges[event]
        return out

    def range_done(self, event: DeliveryRangeStateChanged) -> bool:
        """Whether ``event`` is expanded to its end (``expand_range`` has nothing more of it)."""
        return event not in self._ranges

    def range_resolved(self, event: DeliveryRangeStateChanged) -> list[int] | None:
        """The delivery ids the rest of ``event`` was worked out to at once (``_resolve_ranges``), or None
        while it is expanded a slice at a time."""
        cursor = self._ranges.get(event)
        return None if cursor is None else cursor.resolved_ids

    def _expand_ids(self, event: DeliveryRangeStateChanged, cursor: RangeCursor,
                      last: int) -> list[DeliveryStateChanged]:
        settled, state = event.settled, event.state
        unsettled = event.session.outgoing_unsettled
        out: list[DeliveryStateChanged] = []
        for delivery_id in range(cursor.next_id, last + 1):
            link = unsettled.get(delivery_id)
            if link is None:
                continue
            context = link.unsettled.get(delivery_id)
            if settled:
                unsettled.pop(delivery_id, None)
                link.unsettled.pop(delivery_id, None)
            out.append(DeliveryStateChanged(link, delivery_id, state, settled, context))
        cursor.next_id = last + 1
        return out

    def _resolve_ranges(self) -> None:
        """Work out the rest of every range not expanded yet, now: a frame is about to change which
        deliveries are unsettled (a detach or end forgets a link's, a disposition settles some), and a
        range means the deliveries it named when it arrived."""
        for event in self._open_ranges:
            cursor = self._ranges[event]
            unsettled = event.session.outgoing_unsettled
            links: list[Link] = []
            ids: list[int] = []
            contexts: list[Any] = []
            if event.settled:  # the pops are the lookups: what the range settles leaves the maps now
                for delivery_id in range(cursor.next_id, event.last + 1):
                    link = unsettled.pop(delivery_id, None)
                    if link is not None:
                        links.append(link)
                        ids.append(delivery_id)
                        contexts.append(link.unsettled.pop(delivery_id, None))
            else:
                for delivery_id in range(cursor.next_id, event.last + 1):
                    link = unsettled.get(delivery_id)
                    if link is not None:
                        links.append(link)
                        ids.append(delivery_id)
                        contexts.append(link.unsettled.get(delivery_id))
            cursor.next_id = event.last + 1
            cursor.resolved_links, cursor.resolved_ids, cursor.resolved_contexts = links, ids, contexts
            if not ids:
                del self._ranges[event]
        self._open_ranges.clear()
