"""This project's leveler against injected faults: ServerBusy on its complete, on its dead-letter and on
the priority consumer's send to the leveling queue, and a table store that throttles, with the
emulator's clock moved past the lock instead of waiting for it (docs/emulator.md, "Fault injection"
and "A clock you control").

The leveler runs the code the Function runs (``consumers.leveling.settle`` with the SDK receiver's
settlement calls), over the project's topology (infra/servicebus.json: the leveling queue's lock is
1 minute, MaxDeliveryCount 5). What it must show is at-least-once delivery with an idempotent store:
a complete that the service refuses leaves the message locked, it comes back when the lock lapses,
and the row is written again in place, never twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusServerBusyError

from consumers.leveling import LevelingWorker, Outcome, settle
from consumers.settlement import ReceiverActions
from consumers.table_sink import InMemorySink
from sbemulator import Emulator
from shared.contract import ContractMessage, utc_now
from shared.topology import QUEUE_LEVELING

TOPOLOGY = Path(__file__).resolve().parents[2] / "infra" / "servicebus.json"
WAIT = 5
LOCK_S = 60  # the leveling queue's LockDuration


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=str(TOPOLOGY), clock="manual") as emulator:
        yield emulator


def _client(emu: Emulator) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(emu.connection_string, retry_total=2,
                                                   retry_backoff_factor=0.01, retry_backoff_max=0.05)


def _send(client: ServiceBusClient, message_id: str, body: str | None = None) -> None:
    body = body or ContractMessage(message_id, "tenant-x", "Low", utc_now(), {}, {"ok": True}).to_json()
    with client.get_queue_sender(QUEUE_LEVELING) as sender:
        sender.send_messages(ServiceBusMessage(body, message_id=message_id))


def test_the_leveler_rides_out_server_busy_on_complete(emu: Emulator) -> None:
    """Fewer ServerBusy answers than the SDK's retries: the complete succeeds, one write."""
    sink = InMemorySink()
    with _client(emu) as client:
        _send(client, "busy-1")
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            with emu.faults.injected("settle", "server-busy", QUEUE_LEVELING, count=2) as rule:
                assert settle(LevelingWorker(sink), message, ReceiverActions(receiver)) is Outcome.COMPLETED
            assert rule.applied == 2
            assert receiver.receive_messages(max_wait_time=1) == []
    assert sink.writes == 1


def test_a_complete_refused_after_the_retries_redelivers_and_the_row_is_written_once(emu: Emulator) -> None:
    """The service keeps answering ServerBusy: the leveler's invocation fails with the SDK's
    ServiceBusServerBusyError (the host logs it; the row is already written), the message stays
    locked, and once the lock lapses it is delivered again and completed; the upsert makes the second
    write the same row."""
    sink = InMemorySink()
    worker = LevelingWorker(sink)
    with _client(emu) as client:
        _send(client, "busy-2")
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=0) as receiver:
            (first,) = receiver.receive_messages(max_wait_time=WAIT)
            with emu.faults.injected("settle", "server-busy", QUEUE_LEVELING):
                with pytest.raises(ServiceBusServerBusyError):
                    settle(worker, first, ReceiverActions(receiver))
            assert receiver.receive_messages(max_wait_time=1) == []  # still locked: not lost, not doubled
            emu.advance(LOCK_S + 1)
            (second,) = receiver.receive_messages(max_wait_time=WAIT)
            assert (second.message_id, second.delivery_count) == ("busy-2", 1)
            assert settle(worker, second, ReceiverActions(receiver)) is Outcome.COMPLETED
    assert sink.writes == 2 and list(sink.rows) == [("tenant-x", "busy-2")]


def test_poison_whose_dead_letter_is_refused_is_dead_lettered_on_its_redelivery(emu: Emulator) -> None:
    """A dead-letter call that meets ServerBusy fails the invocation; the redelivered poison is
    dead-lettered with its reason then, not by MaxDeliveryCount."""
    with _client(emu) as client:
        _send(client, "poison-1", body='{"message_id": "poison-1"}')
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=0) as receiver:
            (first,) = receiver.receive_messages(max_wait_time=WAIT)
            with emu.faults.injected("settle", "server-busy", QUEUE_LEVELING):
                with pytest.raises(ServiceBusServerBusyError):
                    settle(LevelingWorker(InMemorySink()), first, ReceiverActions(receiver))
            emu.advance(LOCK_S + 1)
            (second,) = receiver.receive_messages(max_wait_time=WAIT)
            assert settle(LevelingWorker(InMemorySink()), second, ReceiverActions(receiver)) is Outcome.DEAD_LETTERED
        with client.get_queue_receiver(QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = dlq.receive_messages(max_wait_time=WAIT)
            assert dead.message_id == "poison-1" and dead.dead_letter_reason == "MissingField"


class ThrottlingSink(InMemorySink):
    """A table store that answers its first ``refusals`` writes as Table Storage does when it throttles
    (503 ServerBusy, "Azure Table storage performance and scalability checklist": retry with backoff);
    ``refusals=None``: every write."""

    def __init__(self, refusals: int | None) -> None:
        super().__init__()
        self.refusals = refusals
        self.refused = 0

    def upsert(self, message: ContractMessage) -> None:
        if self.refusals is None or self.refused < self.refusals:
            self.refused += 1
            raise HttpResponseError(message="ServerBusy: The server is busy.", response=None)
        super().upsert(message)


def test_a_store_that_throttles_abandons_and_the_redelivery_writes_once(emu: Emulator) -> None:
    """A throttled write fails the invocation and abandons the message (delivery counted); the next
    delivery writes the row once and completes."""
    sink = ThrottlingSink(refusals=2)
    worker = LevelingWorker(sink)
    with _client(emu) as client:
        _send(client, "throttled-1")
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=0) as receiver:
            for attempt in range(2):
                (message,) = receiver.receive_messages(max_wait_time=WAIT)
                assert message.delivery_count == attempt
                with pytest.raises(HttpResponseError):
                    settle(worker, message, ReceiverActions(receiver))
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            assert settle(worker, message, ReceiverActions(receiver)) is Outcome.COMPLETED
            assert receiver.receive_messages(max_wait_time=1) == []
    assert (sink.refused, sink.writes) == (2, 1) and list(sink.rows) == [("tenant-x", "throttled-1")]


def test_a_store_that_keeps_throttling_sends_the_message_to_the_dead_letter_queue(emu: Emulator) -> None:
    """MaxDeliveryCount (5 on the leveling queue) abandoned deliveries: the broker dead-letters the
    message with MaxDeliveryCountExceeded ("Dead-letter queues"), nothing is written."""
    sink = ThrottlingSink(refusals=None)
    worker = LevelingWorker(sink)
    with _client(emu) as client:
        _send(client, "throttled-2")
        with client.get_queue_receiver(QUEUE_LEVELING, prefetch_count=0) as receiver:
            for _ in range(5):
                (message,) = receiver.receive_messages(max_wait_time=WAIT)
                with pytest.raises(HttpResponseError):
                    settle(worker, message, ReceiverActions(receiver))
            assert receiver.receive_messages(max_wait_time=1) == []
        with client.get_queue_receiver(QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = dlq.receive_messages(max_wait_time=WAIT)
            assert dead.message_id == "throttled-2" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert (sink.refused, sink.writes) == (5, 0)
