"""An SDK batch of many small messages is decoded in slices, and nothing changes for the clients.

``ServiceBusSender.send_messages`` of a full batch (256 KB of 100-byte messages, ~1,500 of them) is one
transfer; decoding it in one go held the event loop for 70-100 ms, so every other connection waited
(issue #19: ``python -m bench.canary_stall`` measures that; no test times it). The gateway now decodes a
batch larger than ``Slices.batch_slice_bytes`` a slice at a time, with the connection's reading
paused, and hands it to the broker whole. These tests cross every slice boundary and check what the
SDK sees: a batch is stored all or nothing ("Service Bus messaging: send a batch": the batch is sent
atomically; it either succeeds or fails as a whole), messages keep the order they were sent in across
slices, and another client is served while a batch is still being decoded, before it is stored.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageBatch,
    ServiceBusReceiveMode,
    ServiceBusSender,
)

from sbemulator import Emulator
from sbemulator.amqp.message import ParsedMessage
from sbemulator.gateway import deliveries
from sbemulator.scheduling import Slices
from tests.fixtures.emulator import queue, sliced_emulator, topology

QUEUE = "orders"
PER_BATCH = 1200  # ~170 KB of SDK messages: well over Slices.batch_slice_bytes


@pytest.fixture
def sliced() -> Iterator[Emulator]:
    """An emulator whose slices end after every 16 messages of a batch."""
    yield from sliced_emulator(dispatch_s=0.0, batch_decode_items=16)


def _batch(sender: ServiceBusSender, start: int, count: int) -> ServiceBusMessageBatch:
    batch = sender.create_message_batch()
    for n in range(start, start + count):
        batch.add_message(ServiceBusMessage(b"x" * 100, message_id=str(n), application_properties={"n": n}))
    return batch


def _receive_all(emu: Emulator, count: int) -> list:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client, \
            client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                      prefetch_count=count) as receiver:
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += receiver.receive_messages(max_message_count=count - len(got), max_wait_time=2)
        got += receiver.receive_messages(max_message_count=10, max_wait_time=1)  # nothing more
    return got


def test_batches_decoded_in_slices_arrive_whole_once_and_in_the_order_sent(sliced: Emulator) -> None:
    with ServiceBusClient.from_connection_string(sliced.connection_string) as client, \
            client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(_batch(sender, 0, PER_BATCH))
        sender.send_messages(ServiceBusMessage(b"single", message_id=str(PER_BATCH)))  # not a batch
        sender.send_messages(_batch(sender, PER_BATCH + 1, PER_BATCH))
    got = _receive_all(sliced, 2 * PER_BATCH + 1)
    assert [int(str(m.message_id)) for m in got] == list(range(2 * PER_BATCH + 1))
    sequence = [m.sequence_number for m in got]
    assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence)
    assert [m.application_properties[b"n"] for m in got if m.message_id != str(PER_BATCH)] == \
        [n for n in range(2 * PER_BATCH + 1) if n != PER_BATCH]


def test_another_client_is_served_while_a_batch_is_decoded_and_the_batch_is_stored_all_at_once(
        sliced: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    # The batch's decoding is held after its first slice until the other client has been answered: its
    # send completing first is the proof that it was served in between (observed by order, not time).
    # Held or not, the event loop runs: each held slice yields to it.
    held = threading.Event()
    release = threading.Event()
    step = deliveries.BatchDecoder.step

    def holding_step(self: deliveries.BatchDecoder, count: int) -> bool:
        if self.messages and not release.is_set():
            held.set()
            return False  # nothing done this slice: the gateway yields and comes back
        return step(self, count)

    monkeypatch.setattr(deliveries.BatchDecoder, "step", holding_step)
    batch_sent = threading.Event()
    errors: list[BaseException] = []

    def send_batch() -> None:
        try:
            with ServiceBusClient.from_connection_string(sliced.connection_string) as client, \
                    client.get_queue_sender(QUEUE) as sender:
                sender.send_messages(_batch(sender, 1, PER_BATCH))
            batch_sent.set()
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    with ServiceBusClient.from_connection_string(sliced.connection_string) as client, \
            client.get_queue_sender(QUEUE) as other:
        thread = threading.Thread(target=send_batch, daemon=True)
        thread.start()
        assert held.wait(60), "the batch's decoding never started"
        other.send_messages(ServiceBusMessage(b"other", message_id="0"))  # answered while the batch waits
        assert not batch_sent.is_set()
        with client.get_queue_receiver(QUEUE) as peeker:
            seen = peeker.peek_messages(max_message_count=PER_BATCH + 10)
        assert [m.message_id for m in seen] == ["0"]  # none of the batch yet: never half of it
        release.set()
        thread.join(60)
    assert not errors and batch_sent.is_set()
    got = _receive_all(sliced, PER_BATCH + 1)
    # The other client's message was stored first; the batch's messages follow it, contiguous.
    assert [int(str(m.message_id)) for m in got] == list(range(PER_BATCH + 1))
    sequence = [m.sequence_number for m in got]
    assert sequence == list(range(sequence[0], sequence[0] + PER_BATCH + 1))


def test_a_batch_with_an_undecodable_message_is_refused_whole(sliced: Emulator, monkeypatch: pytest.MonkeyPatch,
                                                              ) -> None:
    # A message of the batch that cannot be decoded (message 600, in a later slice than the first): the
    # whole batch is refused, as when it was decoded in one go, and none of its messages is stored.
    parse = deliveries.parse_message

    def failing_parse(part: bytes) -> ParsedMessage:
        if b"\xa1\x03600" in part:  # its message-id, a str8 of 3 bytes
            raise deliveries.MessageDecodeError("test: a message that cannot be decoded")
        return parse(part)

    monkeypatch.setattr(deliveries, "parse_message", failing_parse)
    with ServiceBusClient.from_connection_string(sliced.connection_string) as client, \
            client.get_queue_sender(QUEUE) as sender:
        with pytest.raises(Exception, match="decoded"):
            sender.send_messages(_batch(sender, 0, PER_BATCH))
        monkeypatch.setattr(deliveries, "parse_message", parse)
        sender.send_messages(ServiceBusMessage(b"after", message_id="after"))
    got = _receive_all(sliced, 1)
    assert [m.message_id for m in got] == ["after"]


@pytest.mark.slow
def test_a_big_prefetch_is_delivered_in_order_and_its_locks_outlive_the_closed_receiver() -> None:
    # A receiver prefetching thousands is served a slice per take (Slices.pump_s shrunk to nothing), in
    # sequence order, each message delivered once (delivery count 0). Closing it leaves its locks in
    # place ("Message transfers, locks, and settlement": a lock lasts its lock duration; the receiver's
    # close does not give it back), so the messages come back once the locks lapse, counted once
    # (delivery count 1). The close no longer visits every lock; this is what it must keep.
    count, name = 3000, "prefetched"
    # A lock long enough that the first receive ends before any lapses on a loaded machine.
    config = topology(queues=[queue(name, LockDuration="PT8S", MaxDeliveryCount=5)])
    sliced = Slices(pump_s=0.0, dispatch_s=0.0)
    with Emulator(config=config, in_memory=True, admin_port=None, slices=sliced) as emu, \
            ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender(name) as sender:
            for start in range(0, count, PER_BATCH):
                sender.send_messages(_batch(sender, start, min(PER_BATCH, count - start)))
        with client.get_queue_receiver(name, prefetch_count=count) as receiver:
            first: list = []
            deadline = time.monotonic() + 60
            while len(first) < count and time.monotonic() < deadline:
                first += receiver.receive_messages(max_message_count=count - len(first), max_wait_time=2)
        assert [int(str(m.message_id)) for m in first] == list(range(count))
        assert {m.delivery_count for m in first} == {0}
        with client.get_queue_receiver(name, prefetch_count=count) as receiver:
            again: list = []
            deadline = time.monotonic() + 60
            while len(again) < count and time.monotonic() < deadline:
                again += receiver.receive_messages(max_message_count=count - len(again), max_wait_time=2)
            for message in again[:10]:
                receiver.complete_message(message)
    assert sorted(int(str(m.message_id)) for m in again) == list(range(count))
    assert {m.delivery_count for m in again} == {1}
