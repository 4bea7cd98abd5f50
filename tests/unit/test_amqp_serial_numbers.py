"""Transfer ids, delivery ids and delivery counts are RFC 1982 serial numbers that wrap at 2**32 (AMQP 1.0
part 2, 2.5.6 "sequence-no" and 2.6.7: "delivery-count ... serial number arithmetic"; 2.8.9 sequence-no).
A long-lived session passes 4,294,967,295 and goes on at 0: the windows, the credit and a disposition
over a range that wraps must mean the same as anywhere else."""

from __future__ import annotations

from typing import Any

from sbemulator.amqp import events as ev
from sbemulator.amqp import windows
from sbemulator.amqp.performatives import ROLE_RECEIVER, Accepted, Begin, Disposition, Flow, Transfer
from sbemulator.amqp.types import UInt

from .test_amqp_connection_peer import Peer

NEAR_END = 0xFFFFFFFE


def test_serial_sums_and_differences_wrap_at_32_bits() -> None:
    assert windows.serial_add(0xFFFFFFFF, 1) == 0
    assert windows.serial_add(NEAR_END, 5) == 3
    assert windows.serial_diff(3, NEAR_END) == 5
    assert windows.serial_diff(NEAR_END, 3) == -5
    assert windows.serial_diff(7, 7) == 0


def _sender_near_the_end(peer: Peer, credit: int) -> Any:
    """Our sending link on a session whose transfer ids and the link's delivery count are two short of
    wrapping, with ``credit`` from the peer (its flow counts from the same ids)."""
    peer.open()
    peer.begin()
    link = peer.attach(handle=1, client_sends=False, rcv_settle_mode=1)
    peer.conn.accept_attach(link)
    peer.output()
    link.session.next_outgoing_id = NEAR_END
    link.delivery_count = NEAR_END
    peer.frame(Flow(UInt(NEAR_END), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(NEAR_END), UInt(credit)))
    return link


def test_deliveries_past_the_last_id_go_on_at_zero_within_the_window_and_credit() -> None:
    peer = Peer()
    link = _sender_near_the_end(peer, credit=3)
    assert link.link_credit == 3 and link.session.remote_incoming_window == 5000
    ids = [peer.conn.send_transfer(link, bytes([i]) * 16, b"m", settled=False, context=i) for i in range(3)]
    assert ids == [NEAR_END, 0xFFFFFFFF, 0]
    assert [f.body.delivery_id for f in peer.frames() if isinstance(f.body, Transfer)] == ids
    assert link.session.next_outgoing_id == 1 and link.delivery_count == 1
    assert link.link_credit == 0 and link.session.remote_incoming_window == 4997
    # The peer tops the credit up to 2 more, counting from its delivery-count 1 (past the wrap).
    peer.frame(Flow(UInt(1), UInt(5000), UInt(0), UInt(5000), UInt(1), UInt(1), UInt(2)))
    assert link.link_credit == 2 and link.session.remote_incoming_window == 5000


def test_a_disposition_whose_range_wraps_settles_every_delivery_it_names() -> None:
    peer = Peer()
    link = _sender_near_the_end(peer, credit=3)
    for i in range(3):
        peer.conn.send_transfer(link, bytes([i]) * 16, b"m", settled=False, context=i)
    peer.output()
    events = peer.frame(Disposition(ROLE_RECEIVER, UInt(NEAR_END), UInt(0), True, Accepted()))
    assert [(e.delivery_id, e.context) for e in events if isinstance(e, ev.DeliveryStateChanged)] == [
        (NEAR_END, 0), (0xFFFFFFFF, 1), (0, 2)]
    assert link.unsettled == {} and link.session.outgoing_unsettled == {}


def test_transfer_ids_the_peer_sends_past_the_last_go_on_at_zero() -> None:
    peer = Peer()
    peer.open()
    peer.frame(Begin(None, UInt(0xFFFFFFFF), UInt(5000), UInt(5000)))  # its first transfer-id: the last one
    peer.output()
    link = peer.attach(handle=0, client_sends=True)
    peer.conn.accept_attach(link)
    peer.conn.grant_credit(link, 5)
    peer.output()
    for i in range(2):
        peer.frame(Transfer(UInt(0), UInt(i), bytes([i]) * 4, UInt(0), True), payload=b"\x00Sw\xa1\x01x")
    assert link.session.next_incoming_id == 1
    peer.conn.grant_credit(link, 5)  # a flow carries the session's next-incoming-id, in range for a uint
    assert [f.body.next_incoming_id for f in peer.frames() if isinstance(f.body, Flow)] == [1]
