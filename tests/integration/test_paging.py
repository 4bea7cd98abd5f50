"""A durable backlog that does not fit in the read-ahead window, through the Python SDK: the messages
beyond it wait in the store as index entries and are paged in ahead of delivery (broker/paging.py).
The window is made tiny (``page_window`` / ``--page-window``) so that a handful of messages is a backlog."""

from __future__ import annotations

import datetime as dt
import json

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology
from tests.fixtures.process import start_emulator_process

WINDOW = 3
TOPOLOGY = topology(
    queues=[queue("backlog", LockDuration="PT1M"), queue("grouped", RequiresSession=True)],
    topics=[{"Name": "events", "Properties": {}, "Subscriptions": [{"Name": "all", "Properties": {}}]}],
)


def _receive(receiver, count: int, wait: float = 10) -> list:
    out: list = []
    for _ in range(int(wait)):
        out += receiver.receive_messages(max_message_count=count - len(out), max_wait_time=1)
        if len(out) >= count:
            break
    return out


def _emulator(tmp_path) -> Emulator:
    return Emulator(TOPOLOGY, in_memory=False, data_dir=tmp_path / "data", page_window=WINDOW, admin_port=None)


def test_peek_deferral_scheduled_and_receive_by_sequence_number_on_a_paged_backlog(tmp_path):
    with _emulator(tmp_path) as emu, ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("backlog") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(20)])
            (scheduled,) = sender.schedule_messages(
                ServiceBusMessage("scheduled"), dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
            )
        with client.get_queue_receiver("backlog", prefetch_count=0) as receiver:
            # "Message browsing": peek from a sequence number reads paged-out messages, in order.
            peeked = receiver.peek_messages(max_message_count=30, sequence_number=1)
            assert [str(m) for m in peeked] == [f"m{i}" for i in range(20)] + ["scheduled"]
            assert [m.application_properties[b"i"] for m in peeked[:20]] == list(range(20))
            assert [str(m) for m in receiver.peek_messages(max_message_count=2, sequence_number=15)] == ["m14", "m15"]
            # "Message deferral": defer messages that were paged out, then receive them by sequence number.
            first = _receive(receiver, 10)
            assert [str(m) for m in first] == [f"m{i}" for i in range(10)]
            deferred = {m.sequence_number: str(m) for m in first[2:5]}
            for m in first[2:5]:
                receiver.defer_message(m)
            for m in first[:2] + first[5:]:
                receiver.complete_message(m)
            rest = _receive(receiver, 10)
            assert [str(m) for m in rest] == [f"m{i}" for i in range(10, 20)]
            for m in rest:
                receiver.complete_message(m)
            by_number = receiver.receive_deferred_messages(sorted(deferred))
            assert {m.sequence_number: str(m) for m in by_number} == deferred
            for m in by_number:
                receiver.complete_message(m)
            # "Scheduled messages": still there, cancellable, behind the drained backlog.
            (left,) = receiver.peek_messages(max_message_count=5, sequence_number=1)
            assert left.sequence_number == scheduled
        with client.get_queue_sender("backlog") as sender:
            sender.cancel_scheduled_messages(scheduled)
        with client.get_queue_receiver("backlog") as receiver:
            assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []


def test_session_and_subscription_messages_on_a_backlog_beyond_the_window(tmp_path):
    with _emulator(tmp_path) as emu, ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("grouped") as sender:
            sender.send_messages([ServiceBusMessage(f"{g}{i}", session_id=g) for i in range(8) for g in "ab"])
        for group in "ba":
            with client.get_queue_receiver("grouped", session_id=group) as receiver:
                got = _receive(receiver, 8)
                assert [str(m) for m in got] == [f"{group}{i}" for i in range(8)]
                for m in got:
                    receiver.complete_message(m)
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage(f"e{i}") for i in range(12)])
        with client.get_subscription_receiver(
            "events", "all", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, prefetch_count=0
        ) as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=20)] == [f"e{i}" for i in range(12)]
            assert [str(m) for m in _receive(receiver, 12)] == [f"e{i}" for i in range(12)]


def test_a_kill_during_a_paged_drain_loses_nothing_acknowledged(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TOPOLOGY))
    args = ("--config", str(config), "--data-dir", str(tmp_path / "data"), "--page-window", str(WINDOW),
            "--no-admin")
    count = 60
    first = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("backlog") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(count)])
            with client.get_queue_receiver("backlog", prefetch_count=0) as receiver:
                taken = _receive(receiver, 25)
                completed = {str(m) for m in taken[:20]}
                for m in taken[:20]:
                    receiver.complete_message(m)
                # taken[20:] stay locked by this process when it dies
    finally:
        first.kill()  # SIGKILL in the middle of the drain: paged-in, locked and paged-out messages

    second = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("backlog", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                           prefetch_count=0) as receiver:
                rest = [str(m) for m in _receive(receiver, count - len(completed), wait=20)]
                assert sorted(rest) == sorted({f"m{i}" for i in range(count)} - completed)
                assert rest == sorted(rest, key=lambda body: int(body[1:]))  # still in order
                assert receiver.receive_messages(max_message_count=5, max_wait_time=1) == []
    finally:
        assert second.terminate() == 0


def test_a_dead_letter_queue_beyond_the_window_through_a_kill(tmp_path):
    """"Dead-letter queues": a poison flood makes a dead-letter queue a backlog; beyond the window it waits
    in the store and is paged in, in sequence order (dead-lettered messages keep their numbers, and here
    arrive out of order); peek reads it; a SIGKILL in the middle of its drain loses nothing completed."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TOPOLOGY))
    args = ("--config", str(config), "--data-dir", str(tmp_path / "data"), "--page-window", str(WINDOW),
            "--no-admin")
    count = 24
    order = [i for i in range(count) if i % 2] + [i for i in range(count) if not i % 2]  # odd ones first
    first = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(first.connection_string) as client:
            with client.get_queue_sender("backlog") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(count)])
            with client.get_queue_receiver("backlog", prefetch_count=0) as receiver:
                taken = _receive(receiver, count)
                assert [str(m) for m in taken] == [f"m{i}" for i in range(count)]
                for i in order:
                    receiver.dead_letter_message(taken[i], reason="poison", error_description=f"m{i}")
            with client.get_queue_receiver("backlog", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           prefetch_count=0) as dlq:
                peeked = dlq.peek_messages(max_message_count=count + 5, sequence_number=1)
                assert [str(m) for m in peeked] == [f"m{i}" for i in range(count)]
                assert [m.dead_letter_reason for m in peeked] == ["poison"] * count
                got = _receive(dlq, 10)
                assert [str(m) for m in got] == [f"m{i}" for i in range(10)]
                assert [m.dead_letter_error_description for m in got] == [f"m{i}" for i in range(10)]
                completed = {str(m) for m in got[:8]}
                for m in got[:8]:
                    dlq.complete_message(m)
                # got[8:] stay locked by this process when it dies
    finally:
        first.kill()

    second = start_emulator_process(*args)
    try:
        with ServiceBusClient.from_connection_string(second.connection_string) as client:
            with client.get_queue_receiver("backlog", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                           prefetch_count=0) as dlq:
                rest = _receive(dlq, count - len(completed), wait=20)
                assert [str(m) for m in rest] == [f"m{i}" for i in range(8, count)]  # in order, each once
                assert all(m.dead_letter_reason == "poison" for m in rest)
                assert dlq.receive_messages(max_message_count=5, max_wait_time=1) == []
    finally:
        assert second.terminate() == 0
