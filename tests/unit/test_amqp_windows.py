"""Session windows and link credit as objects that own their numbers (sbemulator/amqp/windows.py; AMQP 1.0
part 2.5.6 session flow control, 2.6.7 link flow control; ids are serial numbers, 2.8.9 / RFC 1982)."""

from __future__ import annotations

from sbemulator.amqp.performatives import Begin, Flow
from sbemulator.amqp.types import UInt
from sbemulator.amqp.windows import UINT_MAX, LinkCredit, SessionWindow


def _window(incoming: int = 10, peer_incoming: int = 5, peer_next_outgoing: int = 0) -> SessionWindow:
    window = SessionWindow()
    window._open_window(Begin(None, UInt(peer_next_outgoing), UInt(peer_incoming), UInt(100)), incoming)
    return window


def _credit(delivery_count: int = 0) -> LinkCredit:
    class Credit(LinkCredit):
        __slots__ = ()

    credit = Credit()
    credit._open_credit(delivery_count)
    return credit


def test_our_incoming_window_is_given_back_whole_once_half_of_it_is_used_and_not_before() -> None:
    window = _window(incoming=10, peer_next_outgoing=UINT_MAX - 1)
    for _ in range(4):
        assert window.transfer_frame_received()
    assert not window.widen(10)  # 6 of 10 left: more than half
    assert window.transfer_frame_received()
    assert window.next_incoming_id == 3  # five frames on from 2**32 - 2: wrapped
    assert window.widen(10) and window.incoming_window == 10


def test_a_frame_beyond_our_incoming_window_is_refused_and_takes_nothing() -> None:
    window = _window(incoming=1)
    assert window.transfer_frame_received()
    before = window.next_incoming_id
    assert not window.transfer_frame_received()  # a window violation for the connection to answer
    assert window.next_incoming_id == before and window.incoming_window == 0


def test_the_peers_window_is_counted_from_our_next_outgoing_id_across_a_wrap() -> None:
    window = _window(peer_incoming=5)
    window.frames_sent(3)
    assert window.remote_incoming_window == 2
    window.next_outgoing_id = UINT_MAX  # about to wrap
    window.peer_flow(Flow(UInt(UINT_MAX - 1), UInt(8), UInt(0), UInt(100)))
    assert window.remote_incoming_window == 7  # next-incoming-id one behind ours: 8 - 1
    window.frames_sent(2)
    assert window.next_outgoing_id == 1 and window.remote_incoming_window == 5


def test_a_receiving_links_credit_wants_a_top_up_once_half_is_used() -> None:
    credit = _credit()
    credit.link_credit = 1000
    for _ in range(500):
        assert credit.delivery_received()
    assert not credit.credit_wanted(1000)  # 500 left: exactly half
    assert credit.delivery_received() and credit.credit_wanted(1000)
    credit.link_credit = 0
    assert not credit.delivery_received()  # no credit: a transfer-limit violation, nothing counted


def test_a_sending_links_credit_follows_the_receivers_delivery_count_across_a_wrap_and_drains() -> None:
    credit = _credit(delivery_count=UINT_MAX - 1)
    credit.sender_credit(Flow(UInt(0), UInt(100), UInt(0), UInt(100), UInt(0), UInt(UINT_MAX - 1), UInt(10)))
    assert credit.link_credit == 10 and not credit.drain
    credit.deliveries_sent(4)
    assert credit.delivery_count == 2 and credit.link_credit == 6
    # the receiver has seen two of the four (its count 2**32 - 2 + 2 = 0) and grants 5 from there, draining
    credit.sender_credit(Flow(UInt(0), UInt(100), UInt(0), UInt(100), UInt(0), UInt(0), UInt(5), None, True))
    assert credit.link_credit == 3 and credit.drain
    credit.drained()
    assert credit.link_credit == 0 and credit.delivery_count == 5 and not credit.drain
