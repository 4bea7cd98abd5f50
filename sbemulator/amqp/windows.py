"""Session windows and link credit (spec 2.5.6 and 2.6.7): objects that own their numbers.

Like h2's ``WindowManager``: a :class:`SessionWindow` (the window half of every ``Session``) and a
:class:`LinkCredit` (the credit half of every ``Link``) hold the flow-control numbers and are the only code
that changes them: the connection tells them what was sent and received and asks how much may go out
now, and a receiving link's credit says when it is due a top-up (``credit_wanted``). Base classes, not
members, so the per-transfer paths read their numbers directly off the session and the link. Every sum
is serial-number arithmetic where the spec says ids wrap (RFC 1982 over 32 bits). A session's windows
count transfer frames; a link's credit counts deliveries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .performatives import Begin, Flow

UINT_MAX = 0xFFFFFFFF


def serial_add(value: int, n: int) -> int:
    """``value + n`` as an AMQP sequence number (RFC 1982 serial arithmetic over 32 bits)."""
    return (value + n) & UINT_MAX


def serial_diff(a: int, b: int) -> int:
    """``a - b`` between two sequence numbers, across a wrap (RFC 1982: the nearer way round)."""
    d = (a - b) & UINT_MAX
    return d - 0x100000000 if d & 0x80000000 else d


class SessionWindow:
    """A session's transfer ids and windows (spec 2.5.6), the window half of ``endpoints.Session``."""

    def _open_window(self, begin: Begin, incoming_window: int) -> None:
        self.next_outgoing_id = 0
        self.next_incoming_id: int = begin.next_outgoing_id or 0
        # Transfer frames the peer may still send before our next session flow.
        self.incoming_window: int = incoming_window
        self.outgoing_window = UINT_MAX
        self.remote_incoming_window: int = begin.incoming_window or 0
        self.remote_outgoing_window: int = begin.outgoing_window or 0

    def peer_flow(self, flow: Flow) -> None:
        """The peer's flow: its next-outgoing-id and outgoing-window, and the incoming window it has left
        for us, counted from our next-outgoing-id (``next-incoming-id + incoming-window - next-outgoing-id``)."""
        if flow.next_outgoing_id is not None:
            self.next_incoming_id = flow.next_outgoing_id
        self.remote_outgoing_window = flow.outgoing_window or 0
        remote_next_incoming = flow.next_incoming_id if flow.next_incoming_id is not None else self.next_outgoing_id
        ahead = (remote_next_incoming - self.next_outgoing_id) & UINT_MAX  # serial_diff, inline: once a flow
        if ahead & 0x80000000:
            ahead -= 0x100000000
        self.remote_incoming_window = ahead + (flow.incoming_window or 0)

    def transfer_frame_received(self) -> bool:
        """One transfer frame arrived: False when it lies beyond our incoming window (a window violation),
        else it takes a transfer-id and a unit of the window (every frame does, also one we then drop)."""
        if self.incoming_window <= 0:
            return False
        self.next_incoming_id = (self.next_incoming_id + 1) & UINT_MAX
        self.incoming_window -= 1
        return True

    def widen(self, announced: int) -> bool:
        """Once half the incoming window we announced is used, give it back whole: True when it was (a
        session flow is then due)."""
        if self.incoming_window > announced // 2:
            return False
        self.incoming_window = announced
        return True

    def frames_sent(self, frames: int) -> None:
        """``frames`` transfer frames went out: each takes a transfer-id and a unit of the peer's window."""
        self.next_outgoing_id = (self.next_outgoing_id + frames) & UINT_MAX
        self.remote_incoming_window -= frames


class LinkCredit:
    """A link's delivery-count, credit and drain flag (spec 2.6.7), the credit half of ``endpoints.Link``."""

    __slots__ = ("delivery_count", "drain", "link_credit")

    def _open_credit(self, delivery_count: int) -> None:
        # As a sender we start at delivery-count 0; as a receiver we track the peer's count.
        self.delivery_count: int = delivery_count
        self.link_credit: int = 0
        self.drain: bool = False

    def sender_credit(self, flow: Flow) -> None:
        """A flow for a link we send on: credit is the receiver's delivery-count plus its credit, less ours."""
        peer_delivery_count = flow.delivery_count if flow.delivery_count is not None else 0
        seen = (peer_delivery_count - self.delivery_count) & UINT_MAX  # serial_diff, inline: once a flow
        if seen & 0x80000000:
            seen -= 0x100000000
        self.link_credit = max(0, seen + (flow.link_credit or 0))
        self.drain = bool(flow.drain)

    def deliveries_sent(self, deliveries: int) -> None:
        self.delivery_count = (self.delivery_count + deliveries) & UINT_MAX
        self.link_credit -= deliveries

    def delivery_received(self) -> bool:
        """The first frame of a delivery on a link we receive on: False without credit (a violation)."""
        if self.link_credit <= 0:
            return False
        self.link_credit -= 1
        self.delivery_count = (self.delivery_count + 1) & UINT_MAX
        return True

    def drained(self) -> None:
        """Drain with nothing left to send: the remaining credit is used up by advancing the delivery-count."""
        self.delivery_count = (self.delivery_count + self.link_credit) & UINT_MAX
        self.link_credit = 0
        self.drain = False

    def credit_wanted(self, target: int) -> bool:
        """The top-up rule of a link we receive on: its credit goes back to ``target`` once half is used
        (one flow per ``target // 2`` deliveries, never one per delivery)."""
        return self.link_credit < target // 2


__all__ = ["UINT_MAX", "LinkCredit", "SessionWindow", "serial_add", "serial_diff"]
