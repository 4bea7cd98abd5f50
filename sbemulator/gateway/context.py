"""What a link handler may use of its connection's gateway: the typed seam between the gateway's core
(gateway/core.py, one per connection) and its rooms, the handlers of each kind of link (request_links,
sender_link, receiver_link, coordinator_link). Handlers import this module, never the core, so a room
can be read, changed and tested against the seam alone.

Also here: the base every handler extends, the credit rule every link we receive on follows, and the
one point every handler's injected fault goes through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..amqp import events as ev
from ..amqp.connection import Connection, Link
from ..auth import Grant, SasValidator
from ..broker.api import GatewayBroker
from ..broker.errors import BrokerError
from ..broker.transactions import TransactionCoordinator
from ..model import IncomingMessage
from ..scheduling import Budget, Slices
from .cbs import RefusalLog
from .faults import DROP, Faults, Refusal
from .limits import Limits
from .management import ManagementHandler

SENDER_CREDIT = 1000  # per link, topped up once half is used; Service Bus grants about as much


def top_up(connection: Connection, link: Link) -> None:
    """The credit rule of every link the client sends on: back to SENDER_CREDIT once half is used."""
    if link.credit_wanted(SENDER_CREDIT):
        connection.grant_credit(link, SENDER_CREDIT)


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


class PumpedLink(Protocol):
    """A link the broker feeds (an entity receiver): pumped when it has work, released at the end; a job of
    the scheduler (``step``) while a pump goes on past its slice."""

    def pump(self, budget: Budget | None = None) -> None: ...

    def step(self, budget: Budget) -> bool: ...

    def on_detach(self) -> None: ...


class GatewayContext(Protocol):
    """The gateway as its link handlers see it (implemented by gateway.core.Gateway)."""

    connection: Connection
    broker: GatewayBroker
    faults: Faults
    validator: SasValidator
    limits: Limits
    slices: Slices
    refusals: RefusalLog
    management: ManagementHandler
    cbs_reply_links: list[Link]
    receivers: set[PumpedLink]
    # Whether a settlement of an entity can be kept, asked before it is applied (gateway/settling.py).
    settle_room: Callable[[str], BrokerError | None] | None  # None: the store always has room

    @property
    def transactions(self) -> TransactionCoordinator: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any: ...

    def wall_clock(self) -> float: ...

    def flush_soon(self) -> None:
        """Commit and write what this connection produced, at the end of this turn."""

    def fault(self, operation: str, entity: str = "", *, session: bool = False) -> Refusal | None: ...

    def sent(self, link: Link, path: str, delivery_id: int, settled: bool, messages: list[IncomingMessage]) -> None:
        """A send handled: settled once the store has written it (accepted, or refused and taken back)."""

    def commit_now(self) -> BrokerError | None: ...

    def arm_transaction_timeout(self) -> None: ...

    def rollback_transactions(self) -> None: ...

    def entity_exists(self, path: str) -> bool: ...

    def add_grant(self, grant: Grant) -> None: ...

    def missing_claim(self, path: str, right: str, address: str | None) -> str | None: ...

    def send_reply(self, reply_to: str | None, links: list[Link] | None, payload: bytes) -> None: ...

    def output_full(self) -> bool: ...

    def block(self, handler: PumpedLink) -> None: ...

    def schedule_pump(self, handler: PumpedLink) -> None: ...

    def pump_later(self, handler: PumpedLink) -> None: ...


def refused(gateway: GatewayContext, operation: str, entity: str, answer: Callable[[Refusal], None], *,
            session: bool = False) -> bool:
    """The one point every handler's injected fault (gateway/faults.py) goes through: True when a rule
    stops the operation, after ``answer`` told the client (a refusal) or nothing could be told (the
    connection was dropped); False to go on (no rule, or a latency rule that only holds the output).
    Call only while ``gateway.faults.active``."""
    refusal = gateway.fault(operation, entity, session=session)
    if refusal is None:
        return False
    if refusal.effect is not DROP:
        answer(refusal)
    return True
