"""Sessions and links as the connection sees them: their state pairs and their flow-control numbers.

Records; what may happen to them is in ``states`` (the transition tables), their windows and credit are
their halves from ``windows`` (which own those numbers), and what drives them is in ``connection``. Kept apart so that
``events`` (what the application sees) can name them without importing the connection.
"""

from __future__ import annotations

from typing import Any

from ..tracked import TrackedDict
from .performatives import RCV_FIRST, ROLE_RECEIVER, SND_MIXED, Attach, Begin, Transfer
from .states import ACTIVE, CLOSED, NO_LINK, NO_SESSION, State
from .windows import UINT_MAX, LinkCredit, SessionWindow


class Link(LinkCredit):
    """One attached link, seen from our side: ``is_sender`` means we send transfers on it. Its credit
    (delivery-count, link-credit, drain) is its ``LinkCredit`` half (windows.py)."""

    __slots__ = (
        "context",
        "failure",
        "handle",
        "incoming",
        "is_sender",
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
        "state",
        "target",
        "unsettled",
    )

    def __init__(self, session: Session, attach: Attach, name: str, remote_handle: int) -> None:
        """``name`` and ``remote_handle`` are the attach's, once checked present (they are mandatory)."""
        self.session = session
        self.state: State = NO_LINK
        self.name = name
        self.remote_handle = remote_handle
        self.handle: int = -1
        # The peer's role is in the attach; ours is the opposite.
        self.is_sender: bool = attach.role == ROLE_RECEIVER
        self.source = attach.source
        self.target = attach.target
        self.properties: dict = attach.properties or {}
        # A decoded attach has its defaults for null fields (Composite.from_list); these are its modes.
        self.snd_settle_mode: int = SND_MIXED if attach.snd_settle_mode is None else attach.snd_settle_mode
        self.rcv_settle_mode: int = RCV_FIRST if attach.rcv_settle_mode is None else attach.rcv_settle_mode
        self.remote_max_message_size: int | None = attach.max_message_size
        # The largest delivery we take on this link (what our attach announced); None: the connection's.
        self.max_message_size: int | None = None
        self._open_credit(0 if self.is_sender else (attach.initial_delivery_count or 0))
        self.failure: tuple[str, str] | None = None  # a violation waiting for answer_violations()
        self.context: Any = None
        self.incoming: IncomingDelivery | None = None
        self.unsettled: dict[int, Any] = TrackedDict()  # tracked.py: never young again once frozen
        self.remote_attach = attach

    @property
    def attached(self) -> bool:
        """We have sent our attach (and not yet our detach)."""
        return self.state.local is ACTIVE

    @property
    def detach_sent(self) -> bool:
        return self.state.local is CLOSED

    @property
    def detach_received(self) -> bool:
        return self.state.remote is CLOSED

    @property
    def address(self) -> str | None:
        """The node address the peer means: the target when it sends, the source when it receives."""
        terminus = self.source if self.is_sender else self.target
        return getattr(terminus, "address", None) if terminus is not None else None

    def __repr__(self) -> str:
        role = "sender" if self.is_sender else "receiver"
        return f"<Link {self.name!r} {role} handle={self.handle} address={self.address!r}>"


class IncomingDelivery:
    """A delivery the peer is sending us, while its frames arrive."""

    __slots__ = ("chunks", "delivery_id", "delivery_tag", "message_format", "refused", "settled", "size", "state")

    def __init__(self, transfer: Transfer, delivery_id: int) -> None:
        self.delivery_id = delivery_id  # the first transfer's, checked present
        self.delivery_tag = transfer.delivery_tag
        self.message_format = transfer.message_format or 0
        self.settled = bool(transfer.settled)
        self.state = transfer.state  # e.g. a transactional-state (spec 4.4.1)
        self.chunks: list[bytes] = []
        self.size = 0
        self.refused = False  # settled as rejected while it streamed: the rest of its frames is dropped


class Session(SessionWindow):
    """One session: the channel pair, the links it carries, and its transfer ids and windows (its
    ``SessionWindow`` half, windows.py)."""

    def __init__(self, remote_channel: int, channel: int, begin: Begin, incoming_window: int) -> None:
        self.state: State = NO_SESSION
        self.remote_channel = remote_channel
        self.channel = channel
        self._open_window(begin, incoming_window)
        self.handle_max: int = min(begin.handle_max if begin.handle_max is not None else UINT_MAX, 4095)
        self.links_by_remote: dict[int, Link] = {}
        self.links_by_handle: dict[int, Link] = {}
        self.outgoing_unsettled: dict[int, Link] = TrackedDict()  # as Link.unsettled
        self.ended = False  # the application was told it ended (SessionEnded); nothing more is sent on it
        self.failure: tuple[str, str] | None = None  # a violation waiting for answer_violations()
        self.context: Any = None

    @property
    def end_sent(self) -> bool:
        return self.state.local is CLOSED

    def allocate_handle(self) -> int:
        handle = 0
        while handle in self.links_by_handle:
            handle += 1
        return handle
