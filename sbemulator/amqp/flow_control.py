"""Flow control of a sans-I/O AMQP 1.0 connection (spec part 2, 2.5.6 session windows and 2.6.7 link
credit): the peer's flows read, ours written, credit granted and drains completed. The arithmetic of
the windows and the credit is ``windows``; this is where frames meet it. ``Connection`` takes these
methods from ``FlowControl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .endpoints import Link, Session
from .errors import UNATTACHED_HANDLE, SessionError
from .events import Event, LinkCreditChanged
from .performatives import Flow
from .states import CLOSED, LINK_ATTACHED, Input
from .types import UInt

RECV_FLOW = Input.RECV_FLOW


class FlowControl:
    """The flow-control part of ``Connection`` (a base class of it: one object, one set of attributes)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the connection (connection.py)
        _events: list[Event]
        closed: bool

        def _enter_session(self, channel: int, input_: Input) -> Session | None: ...

        def _enter_link(self, session: Session, link: Link, input_: Input) -> bool: ...

        def _send(self, channel: int, body: Any) -> None: ...

    # ------------------------------------------------------------------ flow control
    def _on_flow(self, channel: int, flow: Flow) -> None:
        session = self._enter_session(channel, RECV_FLOW)
        if session is None:
            return
        session.peer_flow(flow)
        if flow.handle is None:
            for link in session.links_by_handle.values():
                if link.is_sender and link.state is LINK_ATTACHED and link.link_credit > 0:
                    self._events.append(LinkCreditChanged(link, False))
            if flow.echo:
                self._send_session_flow(session)
            return
        target = session.links_by_remote.get(flow.handle)
        if target is None:
            raise SessionError(session, UNATTACHED_HANDLE, f"flow for unattached handle {flow.handle}")
        if not self._enter_link(session, target, RECV_FLOW):
            return
        if target.is_sender:
            target.sender_credit(flow)
            if target.drain and target.link_credit == 0:
                # A drain with no credit left (spec 2.6.7): there is nothing to use up, so it is complete
                # now, and the sender says so. Microsoft.Azure.Amqp's drain ends only on a flow from the
                # sender that leaves its credit at 0 (ReceivingAmqpLink.OnReceiveFlow).
                self.drain_complete(target)
            self._events.append(LinkCreditChanged(target, target.drain))
        if flow.echo:
            self._send_link_flow(target)

    def _send_session_flow(self, session: Session) -> None:
        self._send(session.channel, Flow(*_session_window(session)))

    def _send_link_flow(self, link: Link, drain: bool = False, echo: bool = False) -> None:
        session = link.session
        self._send(session.channel, Flow(*_session_window(session), UInt(link.handle), UInt(link.delivery_count),
                                         UInt(link.link_credit), None, drain, echo))

    def grant_credit(self, link: Link, credit: int) -> None:
        """Give a peer sender ``credit`` transfers (our receiving link)."""
        if link.state.local is CLOSED or link.session.ended:
            return
        link.link_credit = credit
        self._send_link_flow(link)

    def drain_complete(self, link: Link) -> None:
        """Nothing left to send: consume the remaining credit and tell the peer (spec 2.6.7)."""
        if link.state.local is CLOSED or link.session.ended:
            return
        link.drained()
        self._send_link_flow(link, drain=True)

    def can_send(self, link: Link) -> bool:
        return (
            link.state is LINK_ATTACHED
            and not link.session.ended
            and link.link_credit > 0 and link.session.remote_incoming_window > 0  # credit and window
            and not self.closed
        )


def _session_window(session: Session) -> tuple[UInt, UInt, UInt, UInt]:
    """The session's part of every flow we send: next-incoming-id, incoming-window, next-outgoing-id,
    outgoing-window."""
    return (UInt(session.next_incoming_id), UInt(session.incoming_window), UInt(session.next_outgoing_id),
            UInt(session.outgoing_window))
