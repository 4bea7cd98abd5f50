"""Where an attach goes: a table from what the client's link names (its address, its role, a coordinator
target) to the room that takes it, in the order Service Bus decides: the link limit, then ``$cbs`` (no
token needed), a transaction coordinator, and, for a token's holder, an entity's ``$management``, a
receiver or a sender. Each route accepts the attach with the settings its room needs, or refuses it with
the error Service Bus gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..amqp.connection import Link
from ..amqp.states import EndpointState
from ..amqp.transactions import LOCAL_TRANSACTIONS, Coordinator
from ..amqp.types import Array, Long, Symbol
from ..auth import LISTEN, SEND
from ..broker.entity import EntityRef
from ..broker.errors import BrokerError
from .addresses import auth_scope, entity_path, text_or_none
from .context import SENDER_CREDIT, GatewayContext
from .coordinator_link import CoordinatorLink
from .limits import COORDINATOR_MAX_MESSAGE_BYTES, RESOURCE_LIMIT_EXCEEDED
from .receiver_link import EntityReceiverLink
from .request_links import CbsRequestLink, ManagementRequestLink, ReplyLink
from .sender_link import EntitySenderLink

MAX_BATCH_SIZE = Symbol("com.microsoft:max-message-batch-size")
# A send-via link (Service Bus "Transfers and send via"): the target is the transfer entity, the
# final destination is this link property.
TRANSFER_DESTINATION = Symbol("com.microsoft:transfer-destination-address")
MANAGEMENT_SUFFIX = "/$management"


class AttachContext(GatewayContext, Protocol):
    """What routing an attach needs of the gateway beyond what its handlers use."""

    cbs_request_link: Link | None  # the client's $cbs sender
    mgmt_reply_links: dict[str, Link]

    def is_authorized(self, path: str) -> bool: ...

    def log_missing(self, path: str, exc: BrokerError) -> None: ...


def route_attach(gateway: AttachContext, link: Link) -> None:
    """Give ``link`` (attached by the client) to the room its address and role name, or refuse it."""
    connection = gateway.connection
    if connection.link_count > gateway.limits.max_links_per_connection:
        connection.reject_attach(
            link, RESOURCE_LIMIT_EXCEEDED,
            f"Cannot open more than {gateway.limits.max_links_per_connection} links on one connection; "
            "open another connection (another ServiceBusClient) for more.",
        )
        return
    path = entity_path(link.address)
    lowered = path.lower()
    for matches, route in ROUTES:
        if matches(link, lowered):
            route(gateway, link, path)
            return


def _attached(link: Link) -> bool:
    """Neither end has detached the link nor ended its session."""
    return (link.context is not None and not link.session.ended
            and link.state.local is not EndpointState.CLOSED and link.state.remote is not EndpointState.CLOSED)


def _attach_cbs(gateway: AttachContext, link: Link, path: str) -> None:
    connection = gateway.connection
    open_already = (any(_attached(other) for other in gateway.cbs_reply_links) if link.is_sender
                    else gateway.cbs_request_link is not None and _attached(gateway.cbs_request_link))
    if open_already:
        # Service Bus takes one $cbs sender and one receiver per connection and refuses another
        # with amqp:not-allowed; the Go SDK resets its connection on that (its
        # internal/TestAMQPLinksCBSLinkStillOpen: a claim negotiation left a $cbs link open).
        connection.reject_attach(
            link, "amqp:not-allowed",
            f"A $cbs {'receiver' if link.is_sender else 'sender'} link is already open on this "
            "connection; only one $cbs link pair is allowed per connection.")
        return
    if link.is_sender:
        link.context = ReplyLink(gateway, link)
        gateway.cbs_reply_links = [*(other for other in gateway.cbs_reply_links if other.context is not None), link]
        connection.accept_attach(link)
        return
    # Before authentication this is the only link a client may send on: its messages are bounded by the
    # size of a put-token request.
    link.context = CbsRequestLink(gateway, link)
    gateway.cbs_request_link = link
    connection.accept_attach(link, max_message_size=gateway.limits.max_cbs_message_bytes)
    connection.grant_credit(link, SENDER_CREDIT)


def _attach_coordinator(gateway: AttachContext, link: Link, path: str) -> None:
    # AMQP 1.0 4.2: the transaction controller attaches a sender to a coordinator target. It needs no
    # token of its own: every transactional transfer or settlement goes over an entity link that needed
    # one. A declare or a discharge is a few dozen bytes: the link's max-message-size is small, so a
    # client that has not authenticated cannot make the emulator buffer a large delivery here.
    link.context = CoordinatorLink(gateway, link)
    gateway.transactions  # noqa: B018 - made now, so a declare finds it
    gateway.connection.accept_attach(link, target=Coordinator(Array((Symbol(LOCAL_TRANSACTIONS),), "symbol")),
                                     max_message_size=COORDINATOR_MAX_MESSAGE_BYTES)
    gateway.connection.grant_credit(link, SENDER_CREDIT)


def _token_covers(gateway: AttachContext, link: Link, path: str) -> bool:
    """Whether a token (or the SASL PLAIN key) covers ``path``; else the attach is refused."""
    if gateway.is_authorized(path):
        return True
    gateway.connection.reject_attach(
        link, "amqp:unauthorized-access",
        f"Unauthorized access. A valid token for '{auth_scope(path)}' is required (put-token on $cbs).",
    )
    return False


def _resolved(gateway: AttachContext, link: Link, path: str, *, log: bool = True) -> EntityRef | None:
    """The entity ``path`` names, or None after refusing the attach with the broker's error (and, with
    ``log``, a line naming the entity that does not exist)."""
    try:
        return gateway.broker.resolve(path)
    except BrokerError as exc:
        if log:
            gateway.log_missing(path, exc)
        gateway.connection.reject_attach(link, exc.condition, exc.description or str(exc))
        return None


def _attach_management(gateway: AttachContext, link: Link, path: str) -> None:
    # A $management link's operations are checked one by one (ManagementRequestLink), not its attach.
    if not _token_covers(gateway, link, path):
        return
    entity = path[: -len(MANAGEMENT_SUFFIX)]
    ref = _resolved(gateway, link, entity)
    if ref is None:
        return
    connection = gateway.connection
    if link.is_sender:
        link.context = ReplyLink(gateway, link)
        gateway.mgmt_reply_links[link.address or ""] = link
        target = link.target
        if target is not None and getattr(target, "address", None):
            gateway.mgmt_reply_links[target.address] = link
        connection.accept_attach(link)
        return
    # A request is bounded by the entity's message size, as a send is: the messages a schedule-message
    # carries must fit one message of the entity (the Java SDK encodes them into a buffer of the link's
    # max-message-size), and a larger request is refused with amqp:link:message-size-exceeded while it
    # streams.
    link.context = ManagementRequestLink(gateway, link, entity)
    connection.accept_attach(link, max_message_size=ref.max_message_size)
    connection.grant_credit(link, SENDER_CREDIT)


def _claim_held(gateway: AttachContext, link: Link, path: str, right: str) -> bool:
    """A client's sender needs Send, its receiver Listen ("Shared Access Signature authentication with
    Service Bus", rights); else the attach is refused with the claims Service Bus names."""
    missing = gateway.missing_claim(path, right, link.address)
    if missing is None:
        return True
    gateway.connection.reject_attach(link, "amqp:unauthorized-access", missing)
    return False


def _attach_receiver(gateway: AttachContext, link: Link, path: str) -> None:
    if not _token_covers(gateway, link, path) or not _claim_held(gateway, link, path, LISTEN):
        return
    ref = _resolved(gateway, link, path)
    if ref is not None:
        EntityReceiverLink.attach(gateway, link, path, ref)


def _send_target(gateway: AttachContext, link: Link, path: str, *, log: bool = True) -> EntityRef | None:
    """The queue or topic a sender may send to at ``path``, or None after refusing the attach."""
    ref = _resolved(gateway, link, path, log=log)
    if ref is not None and not ref.can_send:
        gateway.connection.reject_attach(
            link, "amqp:not-allowed", f"Cannot send to '{ref.path}': it is not a queue or a topic.")
        return None
    return ref


def _attach_sender(gateway: AttachContext, link: Link, path: str) -> None:
    connection = gateway.connection
    if not _token_covers(gateway, link, path) or not _claim_held(gateway, link, path, SEND):
        return
    ref = _send_target(gateway, link, path)
    if ref is None:
        return
    via = None
    destination = (link.properties or {}).get(TRANSFER_DESTINATION)
    if destination is not None:
        # Send-via: the link targets the transfer entity; messages go on to the destination.
        via, path = path, entity_path(text_or_none(destination))
        if not _token_covers(gateway, link, path):
            return
        ref = _send_target(gateway, link, path, log=False)
        if ref is None:
            return
    link.context = EntitySenderLink(gateway, link, path, ref, via=via)
    connection.accept_attach(link, max_message_size=ref.max_message_size,
                             properties={MAX_BATCH_SIZE: Long(ref.max_message_size)})
    connection.grant_credit(link, SENDER_CREDIT)


Route = Callable[[AttachContext, Link, str], None]

# In order, the first that matches takes the attach. ``link.is_sender`` is our role: a client's receiver
# attaches with us as the sender.
ROUTES: tuple[tuple[Callable[[Link, str], bool], Route], ...] = (
    (lambda link, lowered: lowered == "$cbs", _attach_cbs),
    (lambda link, lowered: not link.is_sender and isinstance(link.target, Coordinator), _attach_coordinator),
    (lambda link, lowered: lowered.endswith(MANAGEMENT_SUFFIX), _attach_management),
    (lambda link, lowered: link.is_sender, _attach_receiver),
    (lambda link, lowered: True, _attach_sender),
)
