"""The same queue behaviours through the async SDK (azure.servicebus.aio)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusMessageState, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusAuthenticationError


async def _receive_all(receiver, expected: int, wait: float = 5) -> list:
    out: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while len(out) < expected and loop.time() < deadline:
        out += await receiver.receive_messages(max_message_count=expected - len(out), max_wait_time=1)
    return out


async def test_async_send_receive_settle_and_dead_letter(sb_connection_string):
    async with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_sender("orders") as sender:
            batch = await sender.create_message_batch()
            for i in range(5):
                batch.add_message(ServiceBusMessage(f"a{i}"))
            await sender.send_messages(batch)
        async with client.get_queue_receiver("orders") as receiver:
            messages = await _receive_all(receiver, 5)
            assert [str(m) for m in messages] == [f"a{i}" for i in range(5)]
            await receiver.complete_message(messages[0])
            await receiver.abandon_message(messages[1])
            await receiver.defer_message(messages[2])
            await receiver.dead_letter_message(messages[3], reason="R", error_description="D")
            await receiver.complete_message(messages[4])
            (again,) = await _receive_all(receiver, 1)
            assert (str(again), again.delivery_count) == ("a1", 1)
            await receiver.complete_message(again)
            (deferred,) = await receiver.receive_deferred_messages([messages[2].sequence_number])
            await receiver.complete_message(deferred)
        async with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = await _receive_all(dlq, 1)
            assert (str(dead), dead.dead_letter_reason, dead.dead_letter_error_description) == ("a3", "R", "D")


async def test_async_schedule_and_peek(sb_connection_string):
    async with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_sender("short-lock") as sender:
            at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
            (seq,) = await sender.schedule_messages([ServiceBusMessage("s")], at)
        async with client.get_queue_receiver("short-lock") as receiver:
            (peeked,) = await receiver.peek_messages(max_message_count=5, sequence_number=1)
            if peeked.state == ServiceBusMessageState.SCHEDULED:  # the receiver's link may take longer than 1 s
                assert peeked.sequence_number == seq
            (message,) = await _receive_all(receiver, 1, wait=5)
            # active now, appended with a new sequence number ("Message sequencing and timestamps")
            assert message.sequence_number > seq
            await receiver.complete_message(message)


async def test_async_renew_lock_keeps_the_message_past_its_first_lock(sb_connection_string):
    async with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_sender("renew-lock") as sender:
            await sender.send_messages(ServiceBusMessage("r"))
        async with client.get_queue_receiver("renew-lock") as receiver:  # LockDuration 4 s
            (message,) = await _receive_all(receiver, 1, wait=5)
            first_until = message.locked_until_utc
            for _ in range(3):  # each renewal 1.5 s after the last, 2.5 s inside the lock
                await asyncio.sleep(1.5)
                await receiver.renew_message_lock(message)
            assert message.locked_until_utc > first_until
            assert dt.datetime.now(dt.UTC) > first_until  # past the original lock, inside the renewed one
            await receiver.complete_message(message)


async def test_async_errors_map_to_sdk_exceptions(sb_connection_string):
    async with ServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError):  # the put-token for a missing queue: 404
            async with client.get_queue_sender("missing") as sender:
                await sender.send_messages(ServiceBusMessage("x"))
        async with client.get_queue_sender("small") as sender:
            with pytest.raises(MessageSizeExceededError):
                await sender.send_messages(ServiceBusMessage(b"x" * 70_000))


async def test_async_receive_and_delete_many_concurrent_receivers(sb_connection_string):
    async with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_sender("orders") as sender:
            await sender.send_messages([ServiceBusMessage(f"c{i}") for i in range(60)])

        async def drain() -> list[str]:
            async with client.get_queue_receiver(
                "orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
            ) as receiver:
                got: list[str] = []
                for _ in range(4):
                    got += [str(m) for m in await receiver.receive_messages(max_message_count=20, max_wait_time=1)]
                return got

        results = await asyncio.gather(drain(), drain(), drain())
    everything = [body for part in results for body in part]
    assert sorted(everything) == sorted(f"c{i}" for i in range(60))  # each exactly once
