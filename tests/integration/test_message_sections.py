"""What a delivery carries besides the body, as the SDKs' own live tests expect it of Service Bus.

- Delivery annotations: azure-servicebus's tests/test_queues.py (test_queue_by_queue_client_conn_str_
  receive_handler_peeklock and its neighbours) assert ``message.lock_token ==
  message.message.delivery_annotations.get(b"x-opt-lock-token") == UUID(bytes_le=delivery_tag)`` for
  every peek-locked message.
- The header: durable, priority and first-acquirer arrive as the sender set them (absent stays absent);
  the broker sets the delivery count (and the TTL where the entity imposes one).
- Decimal application properties come back equal: Service Bus re-encodes them in the layout of its .NET
  decimal encoder, which is what the SDKs' decimal128 decoders read.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from decimal import Decimal

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageHeader

from sbemulator import Emulator
from tests.fixtures.emulator import receive

LOCK_TOKEN = b"x-opt-lock-token"


def _legacy(message):
    """The SDK's compatibility view (``message.message``), deprecated but still what its tests read."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return message.message


def test_every_peek_locked_delivery_carries_its_lock_token_as_a_delivery_annotation(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        with client.get_queue_receiver("orders") as receiver:
            got = receive(receiver, 3)
            assert len(got) == 3
            for message in got:
                legacy = _legacy(message)
                assert legacy.delivery_tag is not None
                assert message.lock_token == legacy.delivery_annotations.get(LOCK_TOKEN)
                assert message.lock_token == uuid.UUID(bytes_le=legacy.delivery_tag)
                assert legacy.annotations[b"x-opt-sequence-number"] == message.sequence_number
                assert legacy.header.delivery_count == 0
                receiver.complete_message(message)


def test_a_receive_and_delete_delivery_carries_no_lock_token(emulator: Emulator) -> None:
    """Nor a delivery tag: azure-servicebus's tests/test_message.py
    test_message_backcompat_receive_and_delete_databody asserts ``incoming_message.message.delivery_tag is
    None`` (the SDK's compatibility view turns an empty tag into None) and an empty delivery-annotations
    map; the message's lock_token is None."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("gone on delivery"))
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            [message] = receive(receiver, 1)
            assert LOCK_TOKEN not in (message.raw_amqp_message.delivery_annotations or {})
            legacy = _legacy(message)
            assert legacy.delivery_tag is None
            assert legacy.delivery_annotations == {}
            assert message.lock_token is None


def test_async_peek_lock_delivery_annotations(emulator: Emulator) -> None:
    async def scenario() -> None:
        async with AsyncServiceBusClient.from_connection_string(emulator.connection_string) as client:
            async with client.get_queue_sender("orders") as sender:
                await sender.send_messages(ServiceBusMessage("async"))
            async with client.get_queue_receiver("orders") as receiver:
                [message] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                annotations = message.raw_amqp_message.delivery_annotations
                assert annotations is not None and annotations[LOCK_TOKEN] == message.lock_token
                await receiver.complete_message(message)

    asyncio.run(scenario())


def test_header_fields_arrive_as_the_sender_set_them(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(AmqpAnnotatedMessage(
                data_body=b"with header", header=AmqpMessageHeader(durable=False, priority=7, first_acquirer=True)))
            sender.send_messages(AmqpAnnotatedMessage(data_body=b"durable", header=AmqpMessageHeader(durable=True)))
            sender.send_messages(ServiceBusMessage("plain"))
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            got = {str(m): m.raw_amqp_message.header for m in receive(receiver, 3)}
    with_header = got["with header"]
    assert (with_header.durable, with_header.priority, with_header.first_acquirer) == (False, 7, True)
    assert with_header.delivery_count == 0
    assert got["durable"].durable is True and got["durable"].priority is None
    # a message sent without them has none: the emulator no longer writes durable=true of its own
    assert (got["plain"].durable, got["plain"].priority, got["plain"].first_acquirer) == (None, None, None)


def test_header_fields_survive_an_abandon_and_dead_lettering(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(AmqpAnnotatedMessage(data_body=b"x", header=AmqpMessageHeader(priority=3)))
        with client.get_queue_receiver("orders") as receiver:
            [first] = receive(receiver, 1)
            receiver.abandon_message(first)
            [again] = receive(receiver, 1)
            assert (again.raw_amqp_message.header.priority, again.raw_amqp_message.header.delivery_count) == (3, 1)
            receiver.dead_letter_message(again, reason="test")
        with client.get_queue_receiver("orders", sub_queue="deadletter",
                                       receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            [dead] = receive(receiver, 1)
            assert dead.raw_amqp_message.header.priority == 3


def test_decimal_application_properties_come_back_equal(emulator: Emulator) -> None:
    values = {"price": Decimal("1.2345"), "debt": Decimal("-42.5"), "count": Decimal("123456789"),
              "whole": Decimal("7"), "tiny": Decimal("0.0000000001")}
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("priced", application_properties=dict(values)))  # type: ignore[arg-type]  # Decimal: the SDK's encoder takes it, its hints do not say so
        with client.get_queue_receiver("orders") as receiver:
            [message] = receive(receiver, 1)
            props = {k.decode() if isinstance(k, bytes) else k: v
                     for k, v in (message.application_properties or {}).items()}
            assert props == values
            receiver.complete_message(message)
            # peeked and dead-lettered copies carry the same encoding
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("peeked", application_properties={"price": Decimal("19.99")}))  # type: ignore[dict-item]  # as above
        with client.get_queue_receiver("orders") as receiver:
            [peeked] = receiver.peek_messages(max_message_count=1)
            assert (peeked.application_properties or {})[b"price"] == Decimal("19.99")
