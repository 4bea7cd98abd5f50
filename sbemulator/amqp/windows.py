"""Session windows and link credit (spec 2.5.6 and 2.6.7): all the flow-control arithmetic in one place.

Like h2's ``windows.py``: the connection asks this module how much it may send and what a flow means,
and tells it what was sent and received; the sums (serial numbers wrap at 2**32) are written once. A
session's windows count transfer frames; a link's credit counts deliveries.
"""

from __future__ import annotations

from typing import Any

UINT_MAX = 0xFFFFFFFF


def serial_add(value: int, n: int) -> int:
    """``value + n`` as an AMQP sequence number (RFC 1982 serial arithmetic over 32 bits)."""
    return (value + n) & UINT_MAX


def serial_diff(a: int, b: int) -> int:
    """``a - b`` between two sequence numbers, across a wrap (RFC 1982: the nearer way round)."""
    d = (a - b) & UINT_MAX
    return d - 0x100000000 if d & 0x80000000 else d


# ------------------------------------------------------------------ session windows (spec 2.5.6)
def peer_flow(session: Any, flow: Any) -> None:
    """The peer's flow: its next-outgoing-id and outgoing-window, and the incoming window it has left
    for us, counted from our next-outgoing-id (``next-incoming-id + incoming-window - next-outgoing-id``)."""
    if flow.next_outgoing_id is not None:
        session.next_incoming_id = flow.next_outgoing_id
    session.remote_outgoing_window = flow.outgoing_window or 0
    remote_next_incoming = flow.next_incoming_id if flow.next_incoming_id is not None else session.next_outgoing_id
    ahead = (remote_next_incoming - session.next_outgoing_id) & UINT_MAX  # serial_diff, inline: once a flow
    if ahead & 0x80000000:
        ahead -= 0x100000000
    session.remote_incoming_window = ahead + (flow.incoming_window or 0)


def transfer_frame_received(session: Any) -> bool:
    """One transfer frame arrived: False when it lies beyond our incoming window (a window violation),
    else it takes a transfer-id and a unit of the window (every frame does, also one we then drop)."""
    if session.incoming_window <= 0:
        return False
    session.next_incoming_id = (session.next_incoming_id + 1) & UINT_MAX
    session.incoming_window -= 1
    return True


def wants_widening(session: Any, announced: int) -> bool:
    """Half the incoming window we announced is used: time for a flow that gives it back."""
    return session.incoming_window <= announced // 2


def widen(session: Any, announced: int) -> None:
    session.incoming_window = announced


def frames_sent(session: Any, frames: int) -> None:
    """``frames`` transfer frames went out: each takes a transfer-id and a unit of the peer's window."""
    session.next_outgoing_id = (session.next_outgoing_id + frames) & UINT_MAX
    session.remote_incoming_window -= frames


# ------------------------------------------------------------------ link credit (spec 2.6.7)
def sender_credit(link: Any, flow: Any) -> None:
    """A flow for a link we send on: credit is the receiver's delivery-count plus its credit, less ours."""
    peer_delivery_count = flow.delivery_count if flow.delivery_count is not None else 0
    seen = (peer_delivery_count - link.delivery_count) & UINT_MAX  # serial_diff, inline: once a flow
    if seen & 0x80000000:
        seen -= 0x100000000
    link.link_credit = max(0, seen + (flow.link_credit or 0))
    link.drain = bool(flow.drain)


def deliveries_sent(link: Any, deliveries: int) -> None:
    link.delivery_count = serial_add(link.delivery_count, deliveries)
    link.link_credit -= deliveries


def delivery_received(link: Any) -> bool:
    """The first frame of a delivery on a link we receive on: False without credit (a violation)."""
    if link.link_credit <= 0:
        return False
    link.link_credit -= 1
    link.delivery_count = serial_add(link.delivery_count, 1)
    return True


def drained(link: Any) -> None:
    """Drain with nothing left to send: the remaining credit is used up by advancing the delivery-count."""
    link.delivery_count = serial_add(link.delivery_count, link.link_credit)
    link.link_credit = 0
    link.drain = False


def can_send(link: Any, session: Any) -> bool:
    """Credit on the link and room in the peer's session window."""
    return link.link_credit > 0 and session.remote_incoming_window > 0


def take_size(link: Any, session: Any, most: int) -> int:
    """How many deliveries may go out now (each at least one frame): credit, window and ``most``."""
    return min(link.link_credit, session.remote_incoming_window, most)
