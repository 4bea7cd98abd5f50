"""A purge of thousands of messages works in slices (broker/purge.py), and the clients see one purge.

The slices are made tiny (``PURGE_SLICE``), so a purge of a few thousand messages crosses hundreds of slice
boundaries while another client sends and receives on the purged queue and on another one, all with the
Python SDK over a socket. What must hold (issue #19; Service Bus's own purge is the portal's and Service Bus
Explorer's "Purge messages", which removes the messages the entity holds):

* a purge removes exactly what the entity held when it began, and returns that count: every message sent
  before it is gone and never delivered, every message sent after it began is kept and delivered once;
* a lock held on a purged message is lost: completing it raises the SDK's ``MessageLockLostError``
  ("Message transfers, locks, and settlement": the lock is invalid once the message is removed);
* the runtime properties count what is left; the other queue loses nothing;
* durable, a purge is answered once its last slice is committed, so after a restart nothing purged comes
  back and nothing sent after it is missing;
* the pytest plugin's ``purge`` (a synchronous call from the test thread) returns a finished purge.

No timings are asserted: ``python -m bench.purge_hold`` and ``python -m bench.canary_stall`` measure the holds.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.exceptions import MessageLockLostError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.broker import purge as purge_module
from sbemulator.pytest_plugin import ServiceBusEmulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY

from .test_admin_http import call

COUNT = 2000
SLICE = 7


@pytest.fixture
def tiny_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(purge_module, "PURGE_SLICE", SLICE)


@pytest.fixture
def emulator(tiny_slices: None) -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True) as emu:
        yield emu


def _fill(sb: ServiceBusClient, queue: str, count: int, prefix: str) -> None:
    with sb.get_queue_sender(queue) as sender:
        for start in range(0, count, 500):
            sender.send_messages([ServiceBusMessage(f"{prefix}{n}", message_id=f"{prefix}{n}")
                                  for n in range(start, min(count, start + 500))])


def _drain(sb: ServiceBusClient, queue: str, expected: int) -> list[str]:
    """Every message of ``queue`` (receive and delete) until ``expected`` came and a wait found no more."""
    got: list[str] = []
    with sb.get_queue_receiver(queue, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                               prefetch_count=0) as receiver:
        for _ in range(10_000):
            batch = receiver.receive_messages(max_message_count=200, max_wait_time=2 if len(got) >= expected
                                              else 10)
            if not batch:
                break
            got.extend(str(m) for m in batch)
    return got


class _Traffic(threading.Thread):
    """Another client, while the purge runs: sends numbered messages to the purged queue one at a time, and
    sends to and receives from another queue, until told to stop (a bounded number of rounds)."""

    def __init__(self, connection_string: str, started: threading.Event) -> None:
        super().__init__(daemon=True)
        self.connection_string = connection_string
        self.started = started
        self.stop = threading.Event()
        self.sent: list[str] = []
        self.other_sent: list[str] = []
        self.other_received: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with ServiceBusClient.from_connection_string(self.connection_string) as sb, \
                    sb.get_queue_sender("orders") as sender, sb.get_queue_sender("retry3") as other, \
                    sb.get_queue_receiver("retry3", max_wait_time=1) as other_receiver:
                for n in range(2000):
                    if self.stop.is_set() and n >= 20:
                        break
                    sender.send_messages(ServiceBusMessage(f"late{n}", message_id=f"late{n}"))
                    self.sent.append(f"late{n}")
                    other.send_messages(ServiceBusMessage(f"other{n}"))
                    self.other_sent.append(f"other{n}")
                    for m in other_receiver.receive_messages(max_message_count=5, max_wait_time=0.2):
                        other_receiver.complete_message(m)
                        self.other_received.append(str(m))
                    if n == 5:
                        self.started.set()
                for _ in range(100):  # the rest of the other queue
                    if len(self.other_received) >= len(self.other_sent):
                        break
                    for m in other_receiver.receive_messages(max_message_count=50, max_wait_time=1):
                        other_receiver.complete_message(m)
                        self.other_received.append(str(m))
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.started.set()


def test_a_purge_in_slices_removes_what_was_there_and_keeps_what_came_after(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        _fill(sb, "orders", COUNT, "m")
        with sb.get_queue_receiver("orders", prefetch_count=0) as holder:
            locked = holder.receive_messages(max_message_count=10, max_wait_time=10)
            assert locked
            started = threading.Event()
            traffic = _Traffic(emulator.connection_string, started)
            traffic.start()
            assert started.wait(60), "the other client sent nothing within 60 s"
            status, _, body = call(emulator, "POST", "/$admin/purge/orders")
            traffic.stop.set()
            traffic.join(120)
            assert not traffic.is_alive() and traffic.error is None, traffic.error
            assert status == 200, body
            purged = json.loads(body)["purged"]
            # the lock on a purged message is gone ("the message has already been removed from the queue")
            with pytest.raises(MessageLockLostError):
                holder.complete_message(locked[0])

        late = traffic.sent
        kept_late = len(late) - (purged - COUNT)  # the purge took every message sent before it began
        assert 0 <= purged - COUNT <= len(late)
        assert emulator.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            emulator.admin_connection_string, connection_verify=emulator.ca_path
        ) as admin:
            props = admin.get_queue_runtime_properties("orders")
            assert (props.active_message_count, props.total_message_count) == (kept_late, kept_late)
            assert admin.get_queue_runtime_properties("retry3").total_message_count == 0
        left = _drain(sb, "orders", kept_late)
    # exactly the messages sent after the purge began, each once, in order; nothing purged comes back
    assert left == late[len(late) - kept_late:]
    assert sorted(traffic.other_received) == sorted(traffic.other_sent)


def test_a_durable_purge_stays_purged_after_a_restart(tiny_slices: None, tmp_path: Path) -> None:
    config = copy.deepcopy(STANDARD_TOPOLOGY)
    with Emulator(config=config, in_memory=False, data_dir=tmp_path) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
            _fill(sb, "orders", 600, "m")
            with sb.get_queue_receiver("orders", prefetch_count=0) as receiver:
                poison = receiver.receive_messages(max_message_count=3, max_wait_time=10)
                for m in poison:
                    receiver.dead_letter_message(m, reason="poison")
            status, _, body = call(emu, "POST", "/$admin/purge/orders")  # with its dead-letter queue
            assert status == 200 and json.loads(body) == {"purged": 600}
            _fill(sb, "orders", 5, "after")
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=False, data_dir=tmp_path) as emu:
        assert emu.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            emu.admin_connection_string, connection_verify=emu.ca_path
        ) as admin:
            props = admin.get_queue_runtime_properties("orders")
            assert (props.active_message_count, props.dead_letter_message_count) == (5, 0)
        with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
            assert _drain(sb, "orders", 5) == [f"after{n}" for n in range(5)]


def test_a_purge_lets_the_event_loop_run_between_its_slices(emulator: Emulator) -> None:
    """What the slices are for: between two slices every other task of the emulator's loop runs (a task
    that only counts its turns here; the AMQP connections of other clients in the emulator)."""
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        _fill(sb, "orders", 700, "m")

    async def purge_while_counting(namespace: Any) -> tuple[int, int]:
        turns = 0
        running = True

        async def count() -> None:
            nonlocal turns
            while running:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count())
        await asyncio.sleep(0)
        before = turns
        try:
            removed = await namespace.purge_async("orders")
        finally:
            running = False
            await counter
        return removed, turns - before

    admin = emulator.namespace().admin
    assert admin is not None
    removed, turns = emulator.call(purge_while_counting, admin.namespace)
    assert removed == 700
    assert turns >= 700 // SLICE - 1  # a turn at least between every two of its 100 slices


def test_the_pytest_plugins_purge_and_reset_return_when_they_are_finished(emulator: Emulator) -> None:
    namespace = ServiceBusEmulator(emulator)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        _fill(sb, "orders", 300, "m")
        _fill(sb, "retry3", 40, "r")
        assert namespace.purge("orders", "retry3") == 340
        with sb.get_queue_receiver("orders") as receiver:
            assert receiver.peek_messages(max_message_count=10) == []
        assert namespace.purge() == 0
        _fill(sb, "orders", 100, "m")
        namespace.reset()
        with sb.get_queue_receiver("orders") as receiver:
            assert receiver.peek_messages(max_message_count=10) == []
        _fill(sb, "orders", 50, "m")
        _fill(sb, "retry3", 20, "r")
        status, _, body = call(emulator, "POST", "/$admin/reset")  # the purges of a reset are sliced too
        assert status == 200 and json.loads(body) == {"deleted": 0, "purged": 70}
        assert emulator.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            emulator.admin_connection_string, connection_verify=emulator.ca_path
        ) as admin:
            assert admin.get_queue_runtime_properties("orders").total_message_count == 0
            assert admin.get_queue_runtime_properties("retry3").total_message_count == 0
