"""No low quotas: 100 concurrent SDK connections and 1,000 entities (the official emulator allows
10 connections and 50 entities)."""

from __future__ import annotations

import asyncio

import pytest
from azure.servicebus import ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology

pytestmark = pytest.mark.slow


async def test_one_hundred_concurrent_connections(sb_connection_string):
    clients = [ServiceBusClient.from_connection_string(sb_connection_string) for _ in range(100)]
    senders = [c.get_queue_sender("orders") for c in clients]
    try:
        await asyncio.gather(*(s.__aenter__() for s in senders))  # 100 open connections at once
        await asyncio.gather(*(s.send_messages(ServiceBusMessage(f"from-{i}")) for i, s in enumerate(senders)))
    finally:
        await asyncio.gather(*(s.close() for s in senders), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    async with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            got: list[str] = []
            for _ in range(10):
                got += [str(m) for m in await r.receive_messages(max_message_count=100, max_wait_time=1)]
                if len(got) >= 100:
                    break
    assert sorted(got) == sorted(f"from-{i}" for i in range(100))


async def test_one_thousand_entities():
    config = topology(queues=[queue(f"q{i:04d}") for i in range(1000)])
    with Emulator(config=config) as emu:
        assert len([p for p in emu.broker.entity_paths() if "$" not in p]) >= 1000
        async with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            names = [f"q{i:04d}" for i in range(0, 1000, 50)] + ["q0999"]

            async def send(name: str) -> None:
                async with client.get_queue_sender(name) as sender:
                    await sender.send_messages(ServiceBusMessage(name))

            async def receive(name: str) -> str:
                async with client.get_queue_receiver(
                    name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
                ) as receiver:
                    (message,) = await receiver.receive_messages(max_wait_time=5)
                    return str(message)

            # Concurrently: each link's open and close costs the SDK about a second of polling, not work.
            await asyncio.gather(*(send(name) for name in names))
            assert await asyncio.gather(*(receive(name) for name in names)) == names
