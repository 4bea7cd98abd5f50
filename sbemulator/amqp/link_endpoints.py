"""Links of a sans-I/O AMQP 1.0 connection (spec part 2, 2.6.3-2.6.6, 2.7.3, 2.7.7): a peer's attach
announced to the application, which accepts it (with the termini and limits it chooses) or refuses it;
detaching from either side, and what a detached link leaves behind. ``Connection`` takes these methods
from ``LinkEndpoints``; the state each frame may arrive in is checked by the funnel before (states.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .endpoints import Link, Session
from .errors import DECODE_ERROR, FRAMING_ERROR, HANDLE_IN_USE, UNATTACHED_HANDLE, ProtocolError, SessionError
from .events import DeliveryRangeStateChanged, Event, LinkAttachRequested, LinkDetached
from .performatives import ROLE_RECEIVER, ROLE_SENDER, Attach, Detach, error
from .states import CLOSED, NO_LINK, Input
from .types import UByte, UInt, ULong

RECV_ATTACH, RECV_DETACH = Input.RECV_ATTACH, Input.RECV_DETACH
SEND_ATTACH, SEND_DETACH = Input.SEND_ATTACH, Input.SEND_DETACH


class LinkEndpoints:
    """The link part of ``Connection`` (a base class of it: one object, one set of attributes)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the connection (connection.py)
        _events: list[Event]
        _open_ranges: list[DeliveryRangeStateChanged]
        closed: bool

        def _enter_session(self, channel: int, input_: Input) -> Session | None: ...

        def _enter_link(self, session: Session, link: Link, input_: Input) -> bool: ...

        def _send_step(self, endpoint: Link | Session, input_: Input) -> bool: ...

        def _send(self, channel: int, body: Any) -> None: ...

        def _resolve_ranges(self) -> None: ...

    # ------------------------------------------------------------------ links
    def _on_attach(self, channel: int, attach: Attach) -> None:
        session = self._enter_session(channel, RECV_ATTACH)
        if session is None:
            return
        if attach.handle is None or attach.name is None or attach.role is None:
            raise SessionError(session, DECODE_ERROR, "attach without name, handle or role")
        existing = session.links_by_remote.get(attach.handle)
        if existing is not None:
            self._enter_link(session, existing, RECV_ATTACH)  # no transition: handle-in-use
            raise SessionError(session, HANDLE_IN_USE, f"handle {attach.handle} is already attached")
        if attach.handle > session.handle_max:
            # Spec 2.7.2: a handle outside the announced range closes the connection.
            raise ProtocolError(FRAMING_ERROR, f"handle {attach.handle} above handle-max {session.handle_max}")
        link = Link(session, attach, attach.name, attach.handle)
        link.state = NO_LINK.next[RECV_ATTACH]  # type: ignore[assignment]
        link.handle = session.allocate_handle()
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
        if link.session.ended or self.closed or not self._send_step(link, SEND_ATTACH):
            return  # the peer detached (or ended, or closed) before we answered
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
        elif not link.session.ended and not self.closed and self._send_step(link, SEND_ATTACH):
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
        if link.session.ended or self.closed or not self._send_step(link, SEND_DETACH):
            return
        err = error(condition, description, info) if condition else None
        self._send(link.session.channel, Detach(UInt(link.handle), True, err))
        if link.state.remote is CLOSED:
            self._forget_link(link)

    def _on_detach(self, channel: int, detach: Detach) -> None:
        session = self._enter_session(channel, RECV_DETACH)
        if session is None:
            return
        link = session.links_by_remote.get(detach.handle) if detach.handle is not None else None
        if link is None:
            raise SessionError(session, UNATTACHED_HANDLE, f"detach of unattached handle {detach.handle}")
        self._enter_link(session, link, RECV_DETACH)
        session.links_by_remote.pop(link.remote_handle, None)
        if self._send_step(link, SEND_DETACH):
            self._events.append(LinkDetached(link, bool(detach.closed), detach.error))
            self._send(session.channel, Detach(UInt(link.handle), True))
        self._forget_link(link)

    def _forget_link(self, link: Link) -> None:
        if self._open_ranges:
            self._resolve_ranges()
        session = link.session
        session.links_by_handle.pop(link.handle, None)
        if link.state.remote is CLOSED:
            session.links_by_remote.pop(link.remote_handle, None)
        unsettled, outgoing = link.unsettled, session.outgoing_unsettled
        if len(unsettled) == len(outgoing):
            # Every delivery unsettled on the session is this link's (the SDKs open a session per link):
            # one clear instead of a pop each (50,000 prefetched took ~10 ms).
            outgoing.clear()
        else:
            for delivery_id in unsettled:
                outgoing.pop(delivery_id, None)
