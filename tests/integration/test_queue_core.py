"""Queue behaviour through the real azure-servicebus SDK (sync) against sbemulator over a socket."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessageSizeExceededError,
    ServiceBusAuthenticationError,
)

WAIT = 5  # seconds: upper bound for any single receive in these tests


def _client(conn: str) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(conn)


def _receive_all(receiver, expected: int, wait: float = WAIT) -> list:
    received: list = []
    deadline = time.monotonic() + wait
    while len(received) < expected and time.monotonic() < deadline:
        received += receiver.receive_messages(max_message_count=expected - len(received), max_wait_time=1)
    return received


def test_send_single_list_and_batch_then_receive_in_fifo_order(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("m0", message_id="id-0"))
            sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"id-{i}") for i in (1, 2, 3)])
            batch = sender.create_message_batch()
            for i in (4, 5, 6):
                batch.add_message(ServiceBusMessage(f"m{i}", message_id=f"id-{i}"))
            sender.send_messages(batch)
        with client.get_queue_receiver("orders") as receiver:
            messages = _receive_all(receiver, 7)
            assert [str(m) for m in messages] == [f"m{i}" for i in range(7)]
            assert [m.message_id for m in messages] == [f"id-{i}" for i in range(7)]
            sequence = [m.sequence_number for m in messages]
            assert sequence == sorted(sequence) and len(set(sequence)) == 7
            now = dt.datetime.now(dt.UTC)
            for m in messages:
                assert abs((now - m.enqueued_time_utc).total_seconds()) < 30
                assert m.locked_until_utc > now
                assert m.delivery_count == 0
                receiver.complete_message(m)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_properties_and_body_survive_the_round_trip(sb_connection_string):
    props = {"Priority": "High", "count": 7, "ratio": 0.5, "flag": True}
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(
                b"\x00\x01binary", application_properties=props, subject="label", content_type="application/x",
                correlation_id="corr", to="someone", reply_to="back", message_id="mid",
                time_to_live=dt.timedelta(minutes=5),
            ))
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            (message,) = _receive_all(receiver, 1)
    assert b"".join(message.body) == b"\x00\x01binary"
    received = {
        k.decode(): (v.decode() if isinstance(v, bytes) else v) for k, v in message.application_properties.items()
    }
    assert received == props
    assert (message.subject, message.content_type, message.correlation_id) == ("label", "application/x", "corr")
    assert (message.to, message.reply_to, message.message_id) == ("someone", "back", "mid")
    assert message.time_to_live == dt.timedelta(minutes=5)


def test_receive_and_delete_removes_the_message(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"r{i}") for i in range(3)])
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            assert [str(m) for m in _receive_all(r, 3)] == ["r0", "r1", "r2"]
        with client.get_queue_receiver("orders") as receiver:
            assert receiver.peek_messages(max_message_count=10) == []


def test_abandon_redelivers_with_incremented_delivery_count(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("again"))
        with client.get_queue_receiver("orders") as receiver:
            (first,) = _receive_all(receiver, 1)
            receiver.abandon_message(first)
            (second,) = _receive_all(receiver, 1)
            assert str(second) == "again"
            assert second.sequence_number == first.sequence_number
            assert (first.delivery_count, second.delivery_count) == (0, 1)
            receiver.complete_message(second)


def test_dead_letter_with_reason_lands_in_the_dead_letter_queue(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("poison", message_id="p1"))
        with client.get_queue_receiver("orders") as receiver:
            (message,) = _receive_all(receiver, 1)
            receiver.dead_letter_message(message, reason="BadFormat", error_description="not JSON")
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = _receive_all(dlq, 1)
            assert str(dead) == "poison" and dead.message_id == "p1"
            assert dead.dead_letter_reason == "BadFormat"
            assert dead.dead_letter_error_description == "not JSON"
            dlq.complete_message(dead)


def test_defer_then_receive_deferred_by_sequence_number(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage("later"), ServiceBusMessage("now")])
        with client.get_queue_receiver("orders") as receiver:
            first, second = _receive_all(receiver, 2)
            receiver.defer_message(first)
            receiver.complete_message(second)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
            # the SDK peeks from the last received sequence number on, so start explicitly
            peeked = receiver.peek_messages(max_message_count=5, sequence_number=1)
            assert [p.sequence_number for p in peeked] == [first.sequence_number]
            (deferred,) = receiver.receive_deferred_messages([first.sequence_number])
            assert str(deferred) == "later"
            receiver.complete_message(deferred)
            assert receiver.peek_messages(max_message_count=5, sequence_number=1) == []


def test_lock_expiry_redelivers_and_max_delivery_count_dead_letters(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("short-lock") as sender:
            sender.send_messages(ServiceBusMessage("slow"))
        with client.get_queue_receiver("short-lock") as receiver:
            counts = []
            for _ in range(3):  # MaxDeliveryCount=3, LockDuration=2s: never settle, let the lock lapse
                (message,) = _receive_all(receiver, 1, wait=6)
                counts.append(message.delivery_count)
            assert counts == [0, 1, 2]
            time.sleep(2.5)
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(message)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        with client.get_queue_receiver("short-lock", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = _receive_all(dlq, 1)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            assert str(dead) == "slow"


def test_abandon_until_max_delivery_count_dead_letters(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("retry3") as sender:
            sender.send_messages(ServiceBusMessage("fails"))
        with client.get_queue_receiver("retry3") as receiver:
            for _ in range(3):
                (message,) = _receive_all(receiver, 1)
                receiver.abandon_message(message)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        with client.get_queue_receiver("retry3", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = _receive_all(dlq, 1)
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            assert dead.delivery_count >= 3


def test_renew_lock_extends_the_lock(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("renew-lock") as sender:
            sender.send_messages(ServiceBusMessage("renew me"))
        with client.get_queue_receiver("renew-lock") as receiver:
            (message,) = _receive_all(receiver, 1)
            first_until = message.locked_until_utc
            for _ in range(3):  # each renewal 1.5 s after the last, 2.5 s inside the 4 s lock
                time.sleep(1.5)
                receiver.renew_message_lock(message)
            assert message.locked_until_utc > first_until
            # at least 4.5 s after receipt: past the original 4 s lock, inside the renewed one
            assert dt.datetime.now(dt.UTC) > first_until
            receiver.complete_message(message)


def test_ttl_expiry_dead_letters_when_configured(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("expiring") as sender:  # DefaultMessageTimeToLive = 2 s
            sender.send_messages(ServiceBusMessage("default ttl"))
            # a longer message TTL does not extend the entity's: the smaller one wins
            sender.send_messages(ServiceBusMessage("asks for 1h", time_to_live=dt.timedelta(hours=1)))
            sender.send_messages(ServiceBusMessage("asks for 1s", time_to_live=dt.timedelta(seconds=1)))
        time.sleep(2.5)
        with client.get_queue_receiver("expiring") as receiver:
            assert receiver.receive_messages(max_message_count=3, max_wait_time=1) == []
        with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            dead = _receive_all(dlq, 3, wait=3)
            assert sorted(str(m) for m in dead) == ["asks for 1h", "asks for 1s", "default ttl"]
            assert {m.dead_letter_reason for m in dead} == {"TTLExpiredException"}


def test_ttl_expiry_drops_without_dead_lettering(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("expiring-drop") as sender:
            sender.send_messages(ServiceBusMessage("gone"))
            sender.send_messages(ServiceBusMessage("short", time_to_live=dt.timedelta(seconds=1)))
        time.sleep(2.5)
        with client.get_queue_receiver("expiring-drop") as receiver:
            assert receiver.receive_messages(max_message_count=5, max_wait_time=1) == []
        with client.get_queue_receiver("expiring-drop", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.receive_messages(max_message_count=5, max_wait_time=1) == []


def test_oversized_message_is_refused_with_message_size_exceeded(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("small") as sender:  # MaxMessageSizeInKilobytes = 64
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(b"x" * (100 * 1024)))
            sender.send_messages(ServiceBusMessage(b"y" * (32 * 1024)))
        with client.get_queue_receiver("small", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            (message,) = _receive_all(r, 1)
            assert len(b"".join(message.body)) == 32 * 1024


def test_large_message_crosses_frame_boundaries_both_ways(sb_connection_string):
    body = bytes(range(256)) * 800  # 200 KiB: several frames at the emulator's 64 KiB... and SDK's 1 MiB
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(body))
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            (message,) = _receive_all(r, 1)
    assert b"".join(message.body) == body


def test_peek_does_not_lock_or_count_deliveries(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"p{i}") for i in range(3)])
        with client.get_queue_receiver("orders") as receiver:
            first = receiver.peek_messages(max_message_count=2)
            rest = receiver.peek_messages(max_message_count=5)
            assert [str(m) for m in first + rest] == ["p0", "p1", "p2"]
            again = receiver.peek_messages(max_message_count=5, sequence_number=first[0].sequence_number)
            assert [str(m) for m in again] == ["p0", "p1", "p2"]
            messages = _receive_all(receiver, 3)
            assert [m.delivery_count for m in messages] == [0, 0, 0]


def test_scheduled_messages_appear_at_their_time_and_can_be_cancelled(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_receiver("orders") as receiver, client.get_queue_sender("orders") as sender:
            at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
            keep, cancel = sender.schedule_messages([ServiceBusMessage("keep"), ServiceBusMessage("cancel")], at)
            sender.cancel_scheduled_messages(cancel)
            sender.send_messages(ServiceBusMessage("by property", scheduled_enqueue_time_utc=at))
            peeked = receiver.peek_messages(max_message_count=10, sequence_number=1)
            assert keep in [p.sequence_number for p in peeked]
            assert cancel not in [p.sequence_number for p in peeked]
            assert all(p.scheduled_enqueue_time_utc is not None for p in peeked)
            assert receiver.receive_messages(max_message_count=1, max_wait_time=0.5) == []
            messages = _receive_all(receiver, 2, wait=8)
            assert sorted(str(m) for m in messages) == ["by property", "keep"]
            for m in messages:
                # enqueued when it became active, never before its scheduled time (ms precision)
                assert m.enqueued_time_utc >= at - dt.timedelta(milliseconds=1)
                receiver.complete_message(m)


def test_unknown_entity_refuses_the_put_token_with_404(sb_connection_string):
    """Service Bus answers the put-token for an entity that does not exist with 404 before any attach;
    the SDK raises ServiceBusAuthenticationError for it (its live tests expect that for a missing queue)."""
    with _client(sb_connection_string) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            with client.get_queue_sender("no-such-queue") as sender:
                sender.send_messages(ServiceBusMessage("x"))


def test_entity_names_are_case_insensitive(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("ORDERS") as sender:
            sender.send_messages(ServiceBusMessage("upper"))
        with client.get_queue_receiver("Orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            assert [str(m) for m in _receive_all(r, 1)] == ["upper"]


def test_duplicate_detection_drops_a_repeated_message_id(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("dedup") as sender:
            sender.send_messages(ServiceBusMessage("one", message_id="same"))
            sender.send_messages(ServiceBusMessage("two", message_id="same"))
            sender.send_messages(ServiceBusMessage("three", message_id=str(uuid.uuid4())))
        with client.get_queue_receiver("dedup", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            messages = _receive_all(r, 2)
            assert [str(m) for m in messages] == ["one", "three"]
            assert r.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_prefetched_messages_released_on_close_return_without_counting(sb_connection_string):
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"f{i}") for i in range(10)])
        with client.get_queue_receiver("orders", prefetch_count=10) as receiver:
            (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
            receiver.complete_message(first)
        time.sleep(0.5)
        with client.get_queue_receiver("orders") as receiver:
            rest = _receive_all(receiver, 9, wait=8)
            assert sorted(str(m) for m in rest) == sorted(f"f{i}" for i in range(1, 10))
            for m in rest:
                receiver.complete_message(m)


def test_sender_message_annotations_are_delivered_back(sb_connection_string):
    message = ServiceBusMessage("annotated")
    message.raw_amqp_message.annotations = {"x-app-trace": "abc", "x-opt-sequence-number": 999}
    with _client(sb_connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(message)
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            (received,) = _receive_all(r, 1)
    annotations = received.raw_amqp_message.annotations
    assert annotations[b"x-app-trace"] == "abc" or annotations[b"x-app-trace"] == b"abc"
    # the broker's own annotations are never taken from the sender
    assert received.sequence_number != 999
