"""Drain, every case of AMQP 1.0 part 2, 2.6.7, over a raw socket against a running emulator.

The spec: a receiver that sets ``drain`` asks the sender to use up its link credit; a sender with
nothing (more) to send advances its delivery-count by the credit left, sets the credit to zero and
sends its flow state. Microsoft.Azure.Amqp (what the .NET SDK and so the Azure Functions host use)
completes a drain only when a flow from the sender arrives while it drains and leaves the credit at 0
(``ReceivingAmqpLink.OnReceiveFlow``); without that flow its ``DrainAsync`` waits out the operation
timeout (60 s) and throws. ``echo`` asks the partner for its flow state at once.

Each connection authenticates with SASL PLAIN (a PLAIN-authenticated connection needs no CBS token),
so every frame here is one the test wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    Attach,
    Begin,
    Flow,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import Symbol, UInt
from tests.unit.test_amqp_connection_peer import Frame

from .test_malformed_input import RawClient

PEEK_LOCK = (0, 1)  # snd-settle-mode unsettled, rcv-settle-mode second (PROTOCOL.md "Settle modes")


def _plain(emu: Emulator) -> bytes:
    return b"\x00" + emu.key_name.encode() + b"\x00" + emu.key.encode()


def _send(emu: Emulator, entity: str, count: int, session_id: str | None = None) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender(entity) as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}", session_id=session_id) for i in range(count)])


class Receiver:
    """One receiving link on channel 0, handle 0, and the frames the server sent on it."""

    def __init__(self, raw: RawClient, address: str, filters: dict | None = None) -> None:
        self.raw = raw
        self.delivery_count = 0  # ours, as the receiver: deliveries seen (serial numbers never wrap here)
        raw.frame(Begin(None, UInt(0), UInt(5000), UInt(5000)))
        assert isinstance(raw.read_frame().body, Begin)
        raw.frame(Attach("drain-receiver", UInt(0), ROLE_RECEIVER, UInt(PEEK_LOCK[0]), UInt(PEEK_LOCK[1]),
                         Source(address, filter=filters), Target("drain-client")))
        attach = raw.read_frame().body
        assert isinstance(attach, Attach) and attach.source is not None, attach
        assert attach.initial_delivery_count is not None
        self.delivery_count = int(attach.initial_delivery_count)
        self.attach = attach

    def flow(self, credit: int, *, drain: bool = False, echo: bool = False) -> None:
        self.raw.frame(Flow(UInt(0), UInt(5000), UInt(0), UInt(5000), handle=UInt(0),
                            delivery_count=UInt(self.delivery_count), link_credit=UInt(credit),
                            drain=drain, echo=echo))

    def until_flow(self) -> tuple[list[Transfer], Flow]:
        """Read frames up to the server's next link flow; the transfers that came before it."""
        transfers: list[Transfer] = []
        while True:
            frame: Frame = self.raw.read_frame()  # the socket's timeout bounds the wait
            body = frame.body
            if isinstance(body, Transfer):
                transfers.append(body)
                if not body.more:
                    self.delivery_count += 1
            elif isinstance(body, Flow) and body.handle is not None:
                return transfers, body


@pytest.fixture
def emu() -> Iterator[Emulator]:
    config = {"UserConfig": {"Namespaces": [{"Name": "drains", "Queues": [
        {"Name": "work", "Properties": {}},
        {"Name": "tenants", "Properties": {"RequiresSession": True}},
    ], "Topics": []}], "Logging": {"Type": "Console"}}}
    with Emulator(config=config, in_memory=True) as emulator:
        yield emulator


@pytest.fixture
def raw(emu: Emulator) -> Iterator[RawClient]:
    with RawClient(emu.port) as client:
        client.open("PLAIN", _plain(emu))
        yield client


def test_drain_with_credit_and_no_messages_uses_up_the_credit(raw: RawClient) -> None:
    receiver = Receiver(raw, "work")
    receiver.flow(5, drain=True)
    transfers, flow = receiver.until_flow()
    assert transfers == []
    assert flow.drain is True and flow.link_credit == 0
    assert flow.delivery_count == receiver.delivery_count + 5  # the credit is consumed by the count


def test_drain_with_fewer_messages_than_credit_sends_them_then_the_drained_flow(emu: Emulator, raw: RawClient) -> None:
    _send(emu, "work", 2)
    receiver = Receiver(raw, "work")
    before = receiver.delivery_count
    receiver.flow(5, drain=True)
    transfers, flow = receiver.until_flow()
    assert len(transfers) == 2
    assert flow.drain is True and flow.link_credit == 0 and flow.delivery_count == before + 5


def test_drain_whose_credit_the_deliveries_use_up_is_still_answered(emu: Emulator, raw: RawClient) -> None:
    """The case the .NET SDK met: messages enough for all the credit. Nothing is left to drain, but the
    receiver still waits for the flow that says so (spec 2.6.7: "send the flow state")."""
    _send(emu, "work", 5)
    receiver = Receiver(raw, "work")
    before = receiver.delivery_count
    receiver.flow(3, drain=True)
    transfers, flow = receiver.until_flow()
    assert len(transfers) == 3
    assert flow.drain is True and flow.link_credit == 0 and flow.delivery_count == before + 3


def test_drain_with_zero_credit_is_answered_at_once(emu: Emulator, raw: RawClient) -> None:
    _send(emu, "work", 1)  # even with a message waiting: no credit, no delivery
    receiver = Receiver(raw, "work")
    before = receiver.delivery_count
    receiver.flow(0, drain=True)
    transfers, flow = receiver.until_flow()
    assert transfers == []
    assert flow.drain is True and flow.link_credit == 0 and flow.delivery_count == before


def test_drain_while_a_delivery_is_unsettled(emu: Emulator, raw: RawClient) -> None:
    """A delivery in flight (sent, not settled) neither blocks the drain nor is counted again."""
    _send(emu, "work", 1)
    receiver = Receiver(raw, "work")
    receiver.flow(1)
    transfers, _ = _first_transfers(receiver, 1)
    assert len(transfers) == 1 and transfers[0].settled is not True
    receiver.flow(4, drain=True)  # more credit, drained, with the first delivery still unsettled
    more, flow = receiver.until_flow()
    assert more == []
    assert flow.drain is True and flow.link_credit == 0 and flow.delivery_count == receiver.delivery_count + 4


def test_drain_on_a_session_receiver(emu: Emulator, raw: RawClient) -> None:
    _send(emu, "tenants", 2, session_id="tenant-a")
    receiver = Receiver(raw, "tenants", filters={Symbol("com.microsoft:session-filter"): "tenant-a"})
    before = receiver.delivery_count
    receiver.flow(2, drain=True)  # credit used up by the session's two messages
    transfers, flow = receiver.until_flow()
    assert len(transfers) == 2 and flow.drain is True and flow.link_credit == 0
    assert flow.delivery_count == before + 2
    receiver.flow(3, drain=True)  # and again with nothing left in the session
    transfers, flow = receiver.until_flow()
    assert transfers == [] and flow.drain is True and flow.link_credit == 0
    assert flow.delivery_count == before + 5


def test_echo_gets_the_senders_flow_state(emu: Emulator, raw: RawClient) -> None:
    receiver = Receiver(raw, "work")
    before = receiver.delivery_count
    receiver.flow(7, echo=True)
    transfers, flow = receiver.until_flow()
    assert transfers == [] and flow.drain is False
    assert flow.link_credit == 7 and flow.delivery_count == before


def test_a_drained_link_delivers_again_on_new_credit(emu: Emulator, raw: RawClient) -> None:
    receiver = Receiver(raw, "work")
    receiver.flow(2, drain=True)
    _, flow = receiver.until_flow()
    assert flow.link_credit == 0 and flow.delivery_count is not None
    receiver.delivery_count = int(flow.delivery_count)  # the drain advanced it: the receiver follows
    _send(emu, "work", 1)
    receiver.flow(1)
    transfers, _ = _first_transfers(receiver, 1)
    assert len(transfers) == 1


def _first_transfers(receiver: Receiver, count: int) -> tuple[list[Transfer], None]:
    """Read frames until ``count`` whole deliveries arrived (flows in between are skipped)."""
    transfers: list[Transfer] = []
    while len([t for t in transfers if not t.more]) < count:
        body = receiver.raw.read_frame().body
        if isinstance(body, Transfer):
            transfers.append(body)
            if not body.more:
                receiver.delivery_count += 1
    return transfers, None
