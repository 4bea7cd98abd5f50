"""Events the connection state machine emits for the application layer (the broker glue).

The state machine answers everything it can on its own (headers, SASL, open, begin, end, close,
heartbeats); these events are what needs an application decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .endpoints import Link, Session
    from .performatives import Error


@dataclass(slots=True)
class ConnectionOpened:
    container_id: str | None  # mandatory in the spec, but not checked
    hostname: str | None
    properties: dict | None


@dataclass(slots=True)
class SessionBegun:
    session: Session


@dataclass(slots=True)
class LinkAttachRequested:
    """The peer attached a link; answer with ``Connection.accept_attach`` or ``reject_attach``."""

    link: Link


@dataclass(slots=True)
class MessageReceived:
    """A complete (reassembled) delivery arrived on one of our receiving links."""

    link: Link
    delivery_id: int
    delivery_tag: bytes
    message_format: int
    settled: bool
    payload: bytes
    state: Any = None  # the transfer's delivery state: a transactional-state for transactional work


@dataclass(slots=True)
class DeliveryStateChanged:
    """The peer settled or updated one of the deliveries we sent."""

    link: Link
    delivery_id: int
    state: Any
    settled: bool
    context: Any


@dataclass(frozen=True, slots=True, eq=False)
class DeliveryRangeStateChanged:
    """The peer settled or updated a range of more than ``Slices.range_events`` deliveries we sent with
    one disposition (a client can abandon 100,000 with one frame). Not expanded at once: the application
    takes ``DeliveryStateChanged`` events from it a slice at a time with ``Connection.expand_range``
    until ``Connection.range_done``, so one frame does not hold the event loop for all of them. The event
    stays what the peer sent; how far it is expanded is the connection's (``transfers.RangeCursor``).
    Compared by identity: two equal ranges are two dispositions."""

    session: Session
    first: int
    last: int
    settled: bool
    state: Any


@dataclass(slots=True)
class LinkCreditChanged:
    """A sending link of ours may send (credit or session window grew), or the peer asked to drain."""

    link: Link
    drain: bool


@dataclass(slots=True)
class LinkDetached:
    link: Link
    closed: bool
    error: Error | None


@dataclass(slots=True)
class SessionEnded:
    session: Session
    error: Error | None


@dataclass(slots=True)
class ConnectionClosed:
    """The connection is over: closed by the peer, by us, or by a protocol error."""

    error: Error | None
    by_peer: bool


@dataclass(slots=True)
class SaslPlainAuthenticated:
    username: str


Event = (
    ConnectionOpened | SessionBegun | LinkAttachRequested | MessageReceived | DeliveryStateChanged
    | DeliveryRangeStateChanged | LinkCreditChanged | LinkDetached | SessionEnded | ConnectionClosed
    | SaslPlainAuthenticated
)
