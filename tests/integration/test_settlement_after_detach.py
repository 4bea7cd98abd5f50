"""Peek-locked messages outlive the receive link that took them, as on Service Bus.

azure-servicebus's live tests (tests/test_queues.py and async_tests/test_queues_async.py,
test_queue_message_settle_through_mgmt_link_due_to_broken_receiver_link) receive a message, detach
the receiver's link underneath it, and complete the message: the SDK falls back to the `$management`
link (update-disposition by lock token) and Service Bus accepts it, because the lock lives on until it
expires or is renewed. Likewise a receiver closed with messages unsettled leaves them locked until
their locks lapse; then they return with the delivery counted (docs/emulator.md, "Where the docs are
terse", gives the evidence).
"""

from __future__ import annotations

import asyncio
import copy

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY, queue, receive


@pytest.fixture
def emu():
    config = copy.deepcopy(STANDARD_TOPOLOGY)
    config["UserConfig"]["Namespaces"][0]["Queues"].append(queue("lapse-once", LockDuration="PT2S",
                                                                 MaxDeliveryCount=1))
    with Emulator(config=config, in_memory=True) as emulator:
        yield emulator


def _peek_bodies(client: ServiceBusClient, name: str, sub_queue=None) -> list[str]:
    with client.get_queue_receiver(name, sub_queue=sub_queue) as receiver:
        return [str(m) for m in receiver.peek_messages(max_message_count=10)]


@pytest.mark.parametrize("settle", ["complete", "abandon", "defer", "dead_letter"])
def test_a_message_is_settled_over_management_after_its_receive_link_detached(emu: Emulator, settle: str) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("held"))
        with client.get_queue_receiver("orders") as receiver:
            [message] = receive(receiver, 1)
            receiver._handler._link.detach()  # the SDK's own test: the receive link goes away underneath
            getattr(receiver, f"{settle}_message")(message)
        if settle == "complete":
            assert _peek_bodies(client, "orders") == []
        elif settle == "abandon":
            with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as again:
                [back] = receive(again, 1)
                assert (str(back), back.delivery_count) == ("held", 1)
        elif settle == "defer":
            with client.get_queue_receiver("orders") as again:
                [deferred] = again.peek_messages(max_message_count=1)
                assert deferred.state.name == "DEFERRED"
        else:
            assert _peek_bodies(client, "orders", ServiceBusSubQueue.DEAD_LETTER) == ["held"]


def test_async_settlement_after_the_link_detached(emu: Emulator) -> None:
    async def scenario() -> None:
        async with AsyncServiceBusClient.from_connection_string(emu.connection_string) as client:
            async with client.get_queue_sender("orders") as sender:
                await sender.send_messages(ServiceBusMessage("async held"))
            async with client.get_queue_receiver("orders") as receiver:
                [message] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver._handler._link.detach()
                await receiver.complete_message(message)
            async with client.get_queue_receiver("orders") as receiver:
                assert await receiver.peek_messages(max_message_count=5) == []

    asyncio.run(scenario())


def test_a_closed_receivers_unsettled_message_stays_locked_and_its_token_settles_it(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("left locked"))
        with client.get_queue_receiver("orders") as first:
            [message] = receive(first, 1)
            token = message.lock_token
        # the lock outlived the receiver: another receiver renews it and settles it by its token
        with client.get_queue_receiver("orders") as second:
            assert second.receive_messages(max_message_count=1, max_wait_time=1) == []  # still locked
            second._renew_locks(str(token))
            second._settle_message_via_mgmt_link("completed", [token])
        assert _peek_bodies(client, "orders") == []


def test_a_closed_receivers_unsettled_message_returns_counted_when_its_lock_lapses(emu: Emulator) -> None:
    """The lock lapses as any lock does: the delivery counts, so with MaxDeliveryCount 1 the message is
    dead-lettered (closing no longer returns it at once like an abandon)."""
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("lapse-once") as sender:
            sender.send_messages(ServiceBusMessage("once"))
        with client.get_queue_receiver("lapse-once") as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["once"]
        with client.get_queue_receiver("lapse-once", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = receive(dlq, 1, wait=15)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
