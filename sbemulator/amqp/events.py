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


@dataclass(slots=True)
class DeliveryRangeStateChanged:
    """The peer settled or updated a range of more than ``Connection.RANGE_EVENTS`` deliveries we sent
    with one disposition (a client can abandon 100,000 with one frame). Not expanded at once: the
    application takes ``DeliveryStateChanged`` events from it a slice at a time with
    ``Connection.expand_range``, so one frame does not hold the event loop for all of them."""

    session: Session
    first: int  # the next delivery id to expand
    last: int
    settled: bool
    state: Any
    # The rest of the range worked out at once (Connection._resolve_ranges), because a later frame
    # (a detach, an end, another disposition) was about to change which deliveries are unsettled: the
    # links, delivery ids and contexts of the deliveries it names, in three lists read from
    # ``resolved_next`` on. Three lists and not an event per delivery: 100,000 objects made at once are
    # scanned by the cyclic collector again and again (34-45 ms of it in that read and after it).
    resolved_links: list[Any] | None = None
    resolved_ids: list[int] | None = None
    resolved_contexts: list[Any] | None = None
    resolved_next: int = 0

    @property
    def done(self) -> bool:
        if self.first <= self.last:
            return False
        return self.resolved_ids is None or self.resolved_next >= len(self.resolved_ids)


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
