"""Backpressure: a receiver that does not read its socket stops the emulator taking messages for it.

A client with unlimited credit that never reads must not make the emulator lock (and buffer) the
whole queue for it: once the connection's output is above the high-water mark, its receive pump
takes nothing more from the broker, so the other receivers of the queue get the rest, and the
stalled client's own deliveries resume, complete, when it reads again. Service Bus's own answer to a
slow reader is its lock duration; what the emulator adds is that it only locks what the client's
connection can take (the bound is stated in docs/emulator.md, "Limits and faults", and measured by
``python -m bench.slow_reader_memory``).
"""

from __future__ import annotations

import copy
import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

from sbemulator import Emulator
from sbemulator.amqp.message import parse_message
from sbemulator.amqp.performatives import ROLE_RECEIVER, Attach, Begin, Flow, Source, Target, Transfer
from sbemulator.amqp.types import UByte, UInt
from sbemulator.gateway.limits import Limits
from tests.fixtures.emulator import queue, topology

from .test_malformed_input import RawClient
from .test_protocol_strictness import _plain

QUEUE = "orders"
# The stalled client's locks must outlive the test, however loaded the machine: if they lapsed, the
# other receiver would be given those messages too. PT5M is the longest lock Service Bus allows.
TOPOLOGY = topology(queues=[queue(QUEUE, LockDuration="PT5M")])
MESSAGES = 6000
BODY = b"b" * 2000  # 12 MB in all: more than the kernel's socket buffers on loopback can hold


def _send_all(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            for start in range(0, MESSAGES, 100):
                sender.send_messages([ServiceBusMessage(BODY, message_id=f"m-{i}")
                                      for i in range(start, start + 100)])


def _stalled_receiver(emu: Emulator) -> RawClient:
    """A peek-lock receiver on the queue with unlimited credit and a receive window of 4 KiB, which then
    reads nothing."""
    raw = RawClient(emu.port, timeout=10.0, receive_buffer=4096)
    raw.open("PLAIN", _plain(emu), max_frame_size=UInt(65536))
    raw.frame(Begin(None, UInt(0), UInt(0xFFFFFFFF), UInt(0xFFFFFFFF)))
    assert isinstance(raw.read_frame().body, Begin)
    raw.frame(Attach("stalled", UInt(0), ROLE_RECEIVER, UByte(0), UByte(1), Source(QUEUE), Target("stalled-client")))
    assert isinstance(raw.read_frame().body, Attach)
    raw.frame(Flow(UInt(0), UInt(0xFFFFFFFF), UInt(0), UInt(0xFFFFFFFF), UInt(0), UInt(0), UInt(0xFFFFFFF)))
    return raw


def test_a_receiver_that_does_not_read_leaves_the_rest_of_the_queue_to_the_others() -> None:
    limits = Limits(write_high_water=64 * 1024, write_low_water=16 * 1024)
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        _send_all(emu)
        with _stalled_receiver(emu) as stalled:
            time.sleep(1.0)  # let the emulator write to it until its buffers are full
            # Another receiver of the same queue gets what the stalled one could not take.
            others: set[str] = set()
            with ServiceBusClient.from_connection_string(emu.connection_string) as client:
                # Receive-and-delete: what it is given is its own at once, with no lock of its own that
                # could lapse between a prefetch and its complete on a loaded machine.
                with client.get_queue_receiver(QUEUE, prefetch_count=200,
                                               receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline:
                        batch = receiver.receive_messages(max_message_count=200, max_wait_time=2)
                        if not batch:
                            break
                        others.update(str(message.message_id) for message in batch)
            # The stalled connection holds at most what fits in the socket buffers plus the mark.
            assert len(others) >= MESSAGES // 2, f"only {len(others)} of {MESSAGES} reached the other receiver"
            # Reading again, the stalled client gets exactly the messages nobody else received.
            mine: set[str] = set()
            deadline = time.monotonic() + 60
            while len(mine) + len(others) < MESSAGES and time.monotonic() < deadline:
                frame = stalled.read_frame()
                if isinstance(frame.body, Transfer):
                    mine.add(_message_id(frame.payload))
            assert mine.isdisjoint(others)
            assert len(mine) + len(others) == MESSAGES


def _message_id(payload: bytes) -> str:
    return str(parse_message(bytes(payload)).properties.message_id)
