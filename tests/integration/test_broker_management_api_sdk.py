"""The broker's management API (what the web console calls) seen from the real SDK over a socket:
a message sent through the API arrives as a client's would; dead-lettered messages resubmitted through
the API come back as new messages; the dead-letter queue pages through peek."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import Properties
from sbemulator.gateway.deliveries import incoming_messages
from tests.fixtures.emulator import queue, receive, topology


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=topology(queues=[queue("orders")]), in_memory=True) as emulator:
        yield emulator


def test_message_sent_through_the_api_arrives_like_a_clients(emu: Emulator) -> None:
    payload = encode_message(properties=Properties(message_id="m1", content_type="text/plain"),
                             application_properties={"k": "v"}, data=b"hello")
    emu.call(emu.broker.send, "orders", incoming_messages(payload, 0))
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            (m,) = receive(r, 1)
    assert (str(m), m.message_id, m.content_type, m.application_properties) == ("hello", "m1", "text/plain",
                                                                                 {b"k": b"v"})


def test_dead_letters_page_through_peek_and_resubmit_as_new_messages(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        with client.get_queue_receiver("orders") as receiver:
            for m in receive(receiver, 5):
                receiver.dead_letter_message(m, reason="Bad", error_description="try later")
        dlq = "orders/$DeadLetterQueue"
        first = emu.call(emu.broker.peek, dlq, 0, 2)
        second = emu.call(emu.broker.peek, dlq, first[-1].sequence_number + 1, 2)
        third = emu.call(emu.broker.peek, dlq, second[-1].sequence_number + 1, 2)
        assert [len(first), len(second), len(third)] == [2, 2, 1]
        old_numbers = [m.sequence_number for m in first + second + third]
        counts = emu.call(lambda: emu.broker.entity_view("orders").counts)
        assert (counts.active, counts.dead_letter) == (0, 5)

        resubmitted = emu.call(emu.broker.resubmit_dead_lettered, "orders", old_numbers[:2])
        new_numbers = resubmitted.sequence_numbers
        assert len(new_numbers) == 2 and resubmitted.skipped_locked == ()
        assert min(new_numbers) > max(old_numbers)
        with client.get_queue_receiver("orders") as receiver:
            again = receive(receiver, 2)
            assert sorted(str(m) for m in again) == ["m0", "m1"]
            assert sorted(m.sequence_number for m in again) == sorted(new_numbers)
            assert [(m.delivery_count, m.dead_letter_reason) for m in again] == [(0, None), (0, None)]
            for m in again:
                receiver.complete_message(m)
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead:
            assert sorted(str(m) for m in dead.peek_messages(max_message_count=10)) == ["m2", "m3", "m4"]
        assert emu.call(emu.broker.purge, dlq) == 3
