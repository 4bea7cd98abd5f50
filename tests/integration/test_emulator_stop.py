"""Stopping an emulator ends it: its store is closed and its data directory free for the next one when
``stop()`` returns, whatever its timer loop was doing at that moment.

The case that once hung is a timer wake-up (a send that makes an earlier deadline, a clock advance) in
the same loop turn as the stop: Python 3.11's ``asyncio.wait_for`` then returns the wake-up and drops
the cancellation, so a ticker that only listened for cancellation went on forever and the store stayed
open (the next emulator on the directory was told it is "in use by process <this one>").
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.runtime.server import AmqpServer
from tests.fixtures.emulator import STANDARD_TOPOLOGY


def _wake_then_stop(emu: Emulator) -> None:
    """Wake the ticker and stop the server in one loop turn, then end the loop as ``stop()`` does."""
    loop, server = emu._loop, emu.server
    assert loop is not None and isinstance(server, AmqpServer)
    done = asyncio.run_coroutine_threadsafe(_race(server), loop)
    done.result(timeout=15)


async def _race(server: AmqpServer) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while not server._wake._waiters:  # until the ticker is parked on it
        assert loop.time() < deadline, "the ticker never waited on its wake-up event"
        await asyncio.sleep(0.01)
    server._wake.set()
    stopping = asyncio.ensure_future(server.stop())
    await asyncio.wait({stopping}, timeout=10)  # not wait_for: a cancellation must not help it end
    assert stopping.done(), "the server did not stop: its ticker is still running"
    stopping.result()


def test_a_wake_up_in_the_same_turn_as_the_stop_still_ends_the_ticker(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client, \
                client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("kept"))
        _wake_then_stop(emu)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client, \
            client.get_queue_receiver("orders", max_wait_time=5) as receiver:
        assert [str(m) for m in receiver.peek_messages(max_message_count=5)] == ["kept"]


def test_stop_frees_the_data_directory_for_the_next_emulator_every_time(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    for round_ in range(5):
        with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as emu, \
                ServiceBusClient.from_connection_string(emu.connection_string) as client, \
                client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(f"round-{round_}"))  # a send moves the next deadline
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as last, \
            ServiceBusClient.from_connection_string(last.connection_string) as client, \
            client.get_queue_receiver("orders", max_wait_time=5) as receiver:
        assert len(receiver.peek_messages(max_message_count=10)) == 5
