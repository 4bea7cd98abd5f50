"""Broker behaviour on queues: FIFO, peek-lock, lock expiry, delivery counts, TTL, defer, schedule,
duplicate detection, size limits, forwarding. Time moves with a fake clock; the store is in memory."""

from __future__ import annotations

import uuid

import pytest

from sbemulator.broker import (
    EntityNotFoundError,
    InvalidOperationError,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    MessageState,
    ReceiveMode,
    SessionRequiredError,
)
from sbemulator.scheduling import Budget
from tests.fixtures.broker import bodies, make_broker, msg, receiver

Q = {"Name": "q", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 3}}


def test_resolve_is_case_insensitive_and_knows_sub_queues():
    b, _ = make_broker([Q], [{"Name": "T", "Subscriptions": [{"Name": "S"}]}])
    assert b.resolve("Q").path == "q"
    assert b.resolve("q/$deadletterqueue").kind == "deadletter"
    assert b.resolve("q/$DeadLetterQueue").path == "q/$DeadLetterQueue"
    assert b.resolve("q/$Transfer/$DeadLetterQueue").kind == "transfer_deadletter"
    assert b.resolve("t/subscriptions/s").path == "T/Subscriptions/S"
    assert b.resolve("amqps://localhost:5672/Q").path == "q"
    assert b.resolve("t").can_receive is False
    with pytest.raises(EntityNotFoundError) as err:
        b.resolve("nope")
    assert err.value.condition == "amqp:not-found"


def test_fifo_and_complete():
    b, _ = make_broker([Q])
    b.send("q", [msg(b"1"), msg(b"2")])
    b.send("q", [msg(b"3")])
    r = receiver(b, "q")
    got = r.take(2)
    assert bodies(got) == [b"1", b"2"]
    assert [d.message.sequence_number for d in got] == [1, 2]
    assert bodies(r.take(10)) == [b"3"]
    for d in got:
        r.complete(d.lock_token)
    with pytest.raises(MessageLockLostError):
        r.complete(got[0].lock_token)
    assert [m.body_raw for m in b.peek("q", 0, 10)] == [b"3"]


def test_lock_tokens_are_distinct_random_version_4_uuids_whose_bytes_le_is_the_delivery_tag():
    # The SDKs read a peek-lock delivery's lock token as UUID(bytes_le=delivery_tag); the broker keys
    # locks by those 16 bytes (model.LockKey) and builds no UUID per delivery.
    b, _ = make_broker([Q])
    b.send("q", [msg(str(i).encode()) for i in range(600)])  # more than one pool of 256 keys
    got = receiver(b, "q").take(600)
    tokens = [d.lock_token for d in got]
    assert len(set(tokens)) == 600
    assert all(t.version == 4 and t.variant == uuid.RFC_4122 for t in tokens)
    assert all(d.lock_key == d.lock_token.bytes_le and d.message.lock_token == d.lock_token for d in got)
    # and the token's own bytes (the x-opt-lock-token annotation), reordered for the whole pool at once
    assert all(d.lock_token_bytes == d.lock_token.bytes for d in got)
    (until,) = b.renew_lock("q", [tokens[5]])  # the management API takes the UUID the client has
    assert until == got[5].message.locked_until_ms


def test_abandon_returns_message_to_its_position_and_counts_delivery():
    b, _ = make_broker([Q])
    b.send("q", [msg(b"1"), msg(b"2")])
    r = receiver(b, "q")
    first = r.take(1)[0]
    assert first.header_delivery_count == 0 and first.message.delivery_count == 1
    r.abandon(first.lock_token, {"note": "retry"})
    again = r.take(1)[0]
    assert again.message.body_raw == b"1"
    assert again.header_delivery_count == 1
    assert again.message.application_properties["note"] == "retry"
    assert again.lock_token != first.lock_token


def test_max_delivery_count_dead_letters_on_the_third_abandon():
    b, _ = make_broker([Q])
    b.send("q", [msg(b"poison")])
    r = receiver(b, "q")
    for attempt in range(3):
        d = r.take(1)[0]
        assert d.header_delivery_count == attempt
        r.abandon(d.lock_token)
    assert r.take(1) == []
    dlq = receiver(b, "q/$DeadLetterQueue")
    d = dlq.take(1)[0]
    assert d.message.body_raw == b"poison"
    assert d.message.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert d.message.application_properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
    assert "3 delivery attempts" in d.message.application_properties["DeadLetterErrorDescription"]
    assert d.message.sequence_number == 1  # keeps its sequence number


def test_lock_expiry_returns_message_then_dead_letters_at_max():
    b, clock = make_broker([Q])
    b.send("q", [msg(b"a")])
    r = receiver(b, "q")
    d = r.take(1)[0]
    assert d.locked_until_ms == int(clock.now * 1000) + 30_000
    assert b.next_deadline() == pytest.approx(clock.now + 30)
    clock.advance(29)
    b.tick()
    assert r.take(1) == []
    clock.advance(1)
    b.tick()
    with pytest.raises(MessageLockLostError):
        r.complete(d.lock_token)
    for _ in range(2):
        d = r.take(1)[0]
        clock.advance(31)
        b.tick()
    assert r.take(1) == []
    assert [m.dead_letter_reason for m in b.peek("q/$DeadLetterQueue", 0, 5)] == ["MaxDeliveryCountExceeded"]


def test_settling_after_lock_expired_but_before_tick_is_lock_lost():
    b, clock = make_broker([Q])
    b.send("q", [msg()])
    r = receiver(b, "q")
    d = r.take(1)[0]
    clock.advance(31)
    with pytest.raises(MessageLockLostError):
        r.complete(d.lock_token)
    assert len(r.take(1)) == 1  # it went back


def test_renew_lock_extends_expiry():
    b, clock = make_broker([Q])
    b.send("q", [msg()])
    r = receiver(b, "q")
    d = r.take(1)[0]
    clock.advance(20)
    (until,) = b.renew_lock("q", [d.lock_token])
    assert until == int(clock.now * 1000) + 30_000
    clock.advance(20)
    b.tick()
    r.complete(d.lock_token)
    with pytest.raises(MessageLockLostError):
        b.renew_lock("q", [uuid.uuid4()])


def test_locks_taken_together_expire_each_on_their_own_terms():
    # One take locks several messages; completing, abandoning or renewing one of them changes only its
    # own lock, and the rest come back when their lock duration is over.
    b, clock = make_broker([Q])
    b.send("q", [msg(str(i).encode()) for i in range(4)])
    r = receiver(b, "q")
    done, renewed, abandoned, _lapsed = r.take(4)
    r.complete(done.lock_token)
    r.abandon(abandoned.lock_token)
    clock.advance(20)
    b.renew_lock("q", [renewed.lock_token])
    assert bodies(r.take(1)) == [b"2"]  # the abandoned one, now locked again
    clock.advance(10)
    b.tick()
    back = r.take(5)
    assert bodies(back) == [b"3"] and back[0].header_delivery_count == 1  # only the lapsed lock ended
    r.complete(renewed.lock_token)  # renewed 10 s ago: still held
    clock.advance(30)
    b.tick()
    assert sorted(bodies(r.take(5))) == [b"2", b"3"]  # both later locks ran out; 0 and 1 are gone


def test_release_does_not_count_the_delivery():
    b, _ = make_broker([Q])
    b.send("q", [msg()])
    r = receiver(b, "q")
    for _ in range(5):
        d = r.take(1)[0]
        assert d.header_delivery_count == 0
        r.release(d.lock_token)
    assert b.peek("q", 0, 1)[0].delivery_count == 0


def test_close_leaves_unsettled_messages_locked_until_the_locks_lapse():
    """As on Service Bus: the locks outlive the receiver (settle them by token meanwhile); when they lapse
    the messages return with the delivery counted (docs/emulator.md, "Where the docs are terse")."""
    b, clock = make_broker([Q])
    b.send("q", [msg(b"1"), msg(b"2"), msg(b"3")])
    r1 = receiver(b, "q")
    taken = r1.take(3)
    r2 = receiver(b, "q")
    r1.close()
    assert r2.take(5) == []  # still locked
    b.update_disposition("q", [taken[0].lock_token], "completed")
    clock.now += 20
    b.renew_lock("q", [taken[1].lock_token])
    clock.now += 11
    b.tick()
    got = r2.take(5)
    assert bodies(got) == [b"3"] and [d.header_delivery_count for d in got] == [1]
    b.update_disposition("q", [taken[1].lock_token], "completed")  # renewed after the close: still valid


def test_receive_and_delete():
    b, _ = make_broker([Q])
    b.send("q", [msg(b"1"), msg(b"2")])
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    d = r.take(1)[0]
    assert d.lock_token is None and d.message.body_raw == b"1"
    assert [m.body_raw for m in b.peek("q", 0, 10)] == [b"2"]


def test_peek_sees_all_states_without_side_effects():
    b, clock = make_broker([Q])
    b.send("q", [msg(b"active"), msg(b"defer")])
    b.schedule("q", [msg(b"later", scheduled_enqueue_time_ms=int((clock.now + 60) * 1000))])
    r = receiver(b, "q")
    d = r.take(2)[1]
    r.defer(d.lock_token)
    peeked = b.peek("q", 0, 10)
    assert [(m.body_raw, m.state) for m in peeked] == [
        (b"active", MessageState.ACTIVE),
        (b"defer", MessageState.DEFERRED),
        (b"later", MessageState.SCHEDULED),
    ]
    assert [m.sequence_number for m in b.peek("q", 2, 1)] == [2]
    assert b.peek("q", 4, 10) == []


def test_defer_and_receive_deferred():
    b, _ = make_broker([Q])
    b.send("q", [msg(b"1"), msg(b"2")])
    r = receiver(b, "q")
    d1 = r.take(1)[0]
    r.defer(d1.lock_token)
    assert bodies(r.take(5)) == [b"2"]  # deferred messages are not received normally
    with pytest.raises(MessageNotFoundError):
        b.receive_deferred("q", [2], ReceiveMode.PEEK_LOCK)
    (got,) = b.receive_deferred("q", [1], ReceiveMode.PEEK_LOCK)
    assert got.message.body_raw == b"1" and got.lock_token is not None
    assert got.header_delivery_count == 1
    b.update_disposition("q", [got.lock_token], "abandoned")
    assert b.peek("q", 1, 1)[0].state == MessageState.DEFERRED  # abandon keeps it deferred
    (got,) = b.receive_deferred("q", [1], ReceiveMode.PEEK_LOCK)
    b.update_disposition("q", [got.lock_token], "completed")
    with pytest.raises(MessageNotFoundError):
        b.receive_deferred("q", [1], ReceiveMode.PEEK_LOCK)


def test_update_disposition_dead_letter_with_reason_and_properties():
    b, _ = make_broker([Q])
    b.send("q", [msg()])
    d = receiver(b, "q").take(1)[0]
    b.update_disposition("q", [d.lock_token], "suspended", "Bad", "it was bad", {"k": 1})
    (m,) = b.peek("q/$DeadLetterQueue", 0, 5)
    assert (m.dead_letter_reason, m.dead_letter_description) == ("Bad", "it was bad")
    assert m.application_properties == {
        "k": 1,
        "DeadLetterReason": "Bad",
        "DeadLetterErrorDescription": "it was bad",
    }
    with pytest.raises(MessageLockLostError):
        b.update_disposition("q", [d.lock_token], "completed")


def test_schedule_and_cancel():
    b, clock = make_broker([Q])
    rec = receiver(b, "q")
    at = int((clock.now + 10) * 1000)
    s1, s2 = b.schedule(
        "q", [msg(b"a", scheduled_enqueue_time_ms=at), msg(b"b", scheduled_enqueue_time_ms=at)]
    )
    assert (s1, s2) == (1, 2)
    b.cancel_scheduled("q", [s2])
    with pytest.raises(MessageNotFoundError):
        b.cancel_scheduled("q", [s2])
    assert rec.take(5) == []
    assert b.next_deadline() == pytest.approx(clock.now + 10)
    calls = rec.on_available.calls
    clock.advance(10)
    b.tick()
    assert rec.on_available.calls > calls
    (d,) = rec.take(5)
    assert d.message.body_raw == b"a"
    assert d.message.enqueued_time_ms == at  # enqueued when it became active


def test_send_with_scheduled_time_via_annotation():
    b, clock = make_broker([Q])
    b.send("q", [msg(scheduled_enqueue_time_ms=int((clock.now + 5) * 1000))])
    r = receiver(b, "q")
    assert r.take(1) == []
    clock.advance(5)
    b.tick()
    assert len(r.take(1)) == 1


def test_ttl_expiry_drops_or_dead_letters():
    b, clock = make_broker(
        [
            {"Name": "drop", "Properties": {"DefaultMessageTimeToLive": "PT1M"}},
            {
                "Name": "keep",
                "Properties": {"DefaultMessageTimeToLive": "PT1M", "DeadLetteringOnMessageExpiration": True},
            },
        ]
    )
    for q in ("drop", "keep"):
        b.send(q, [msg(b"short", time_to_live_ms=5_000), msg(b"default")])
    clock.advance(5)
    b.tick()
    assert [m.body_raw for m in b.peek("drop", 0, 10)] == [b"default"]
    assert [m.body_raw for m in b.peek("keep", 0, 10)] == [b"default"]
    (dl,) = b.peek("keep/$DeadLetterQueue", 0, 10)
    assert dl.body_raw == b"short" and dl.dead_letter_reason == "TTLExpiredException"
    clock.advance(55)
    b.tick()
    assert b.peek("drop", 0, 10) == []
    assert len(b.peek("keep/$DeadLetterQueue", 0, 10)) == 2
    assert b.peek("drop/$DeadLetterQueue", 0, 10) == []


def test_locked_message_does_not_expire_until_its_lock_ends():
    b, clock = make_broker([{"Name": "q", "Properties": {"DeadLetteringOnMessageExpiration": True}}])
    b.send("q", [msg(time_to_live_ms=1000)])
    r = receiver(b, "q")
    d = r.take(1)[0]
    clock.advance(2)
    b.tick()
    r.abandon(d.lock_token)
    assert r.take(1) == []
    assert b.peek("q/$DeadLetterQueue", 0, 1)[0].dead_letter_reason == "TTLExpiredException"


def test_expired_message_is_not_delivered_even_before_tick():
    b, clock = make_broker([Q])
    b.send("q", [msg(time_to_live_ms=1000), msg(b"ok")])
    clock.advance(1)
    assert bodies(receiver(b, "q").take(5)) == [b"ok"]


def test_duplicate_detection_within_window():
    b, clock = make_broker(
        [
            {
                "Name": "q",
                "Properties": {
                    "RequiresDuplicateDetection": True,
                    "DuplicateDetectionHistoryTimeWindow": "PT20S",
                },
            }
        ]
    )
    b.send(
        "q", [msg(b"1", message_id="m1"), msg(b"dup-in-batch", message_id="m1"), msg(b"2", message_id="m2")]
    )
    clock.advance(10)
    b.send("q", [msg(b"dup", message_id="m1")])
    clock.advance(11)
    b.send("q", [msg(b"again", message_id="m1")])
    assert [m.body_raw for m in b.peek("q", 0, 10)] == [b"1", b"2", b"again"]


def test_no_duplicate_detection_when_disabled():
    b, _ = make_broker([Q])
    b.send("q", [msg(message_id="m"), msg(message_id="m")])
    assert len(b.peek("q", 0, 10)) == 2


def test_size_limit_rejects_whole_batch():
    b, _ = make_broker([Q, {"Name": "small", "Properties": {"MaxMessageSizeInKilobytes": 1}}])
    with pytest.raises(MessageSizeExceededError) as err:
        b.send("q", [msg(b"ok"), msg(size=256 * 1024 + 1)])
    assert err.value.condition == "amqp:link:message-size-exceeded"
    assert b.peek("q", 0, 10) == []
    b.send("q", [msg(size=256 * 1024)])
    with pytest.raises(MessageSizeExceededError):
        b.send("small", [msg(size=1025)])
    assert b.resolve("small").max_message_size == 1024


def test_send_rules():
    b, _ = make_broker(
        [Q, {"Name": "sq", "Properties": {"RequiresSession": True}}],
        [{"Name": "t", "Subscriptions": [{"Name": "s"}]}],
    )
    for path in ("q/$DeadLetterQueue", "t/Subscriptions/s"):
        with pytest.raises(InvalidOperationError):
            b.send(path, [msg()])
    with pytest.raises(SessionRequiredError) as err:
        b.send("sq", [msg(session_id="a"), msg()])
    assert err.value.condition == "amqp:not-allowed"
    assert b.peek("sq", 0, 10) == []
    with pytest.raises(InvalidOperationError):
        receiver(b, "sq")  # a session entity needs a session receiver
    with pytest.raises(InvalidOperationError):
        receiver(b, "q", next_available_session=True)


def test_sequence_numbers_are_per_entity_and_increase():
    b, _ = make_broker([Q, {"Name": "q2"}])
    b.send("q", [msg(), msg()])
    b.send("q2", [msg()])
    b.send("q", [msg()])
    assert [m.sequence_number for m in b.peek("q", 0, 10)] == [1, 2, 3]
    assert [m.sequence_number for m in b.peek("q2", 0, 10)] == [1]


def test_on_available_fires_for_waiting_receivers_after_send():
    b, _ = make_broker([Q])
    r1, r2 = receiver(b, "q"), receiver(b, "q")
    assert (r1.on_available.calls, r2.on_available.calls) == (0, 0)
    b.send("q", [msg()])
    assert r1.on_available.calls == 1 and r2.on_available.calls == 1
    assert len(r2.take(1)) == 1 and r1.take(1) == []


def test_on_available_may_take_reentrantly():
    b, _ = make_broker([Q])
    got = []
    r = None

    def on_available():
        got.extend(r.take(10))

    r = b.open_receiver("q", ReceiveMode.PEEK_LOCK, on_available)
    b.send("q", [msg(b"1"), msg(b"2")])
    assert bodies(got) == [b"1", b"2"]


def test_forward_to_queue_and_dead_letter_forwarding():
    b, _ = make_broker(
        [
            {"Name": "src", "Properties": {"ForwardTo": "dst"}},
            {"Name": "dst", "Properties": {"MaxDeliveryCount": 1, "ForwardDeadLetteredMessagesTo": "poison"}},
            {"Name": "poison"},
        ]
    )
    b.send("dst", [msg(b"pre")])
    b.send("src", [msg(b"fwd")])
    assert b.peek("src", 0, 10) == []
    got = b.peek("dst", 0, 10)
    assert [(m.body_raw, m.sequence_number, m.enqueue_sequence_number) for m in got] == [
        (b"pre", 1, None),
        (b"fwd", 2, 1),
    ]
    r = receiver(b, "dst")
    d = r.take(1)[0]
    r.dead_letter(d.lock_token, "why", "because")
    (p,) = b.peek("poison", 0, 10)
    assert p.body_raw == b"pre" and p.dead_letter_source == "dst" and p.dead_letter_reason == "why"
    assert b.peek("dst/$DeadLetterQueue", 0, 10) == []


def test_forward_hop_limit_goes_to_transfer_dead_letter_queue():
    queues = [{"Name": f"h{i}", "Properties": {"ForwardTo": f"h{i + 1}"}} for i in range(5)] + [
        {"Name": "h5"}
    ]
    b, _ = make_broker(queues)
    b.send("h1", [msg(b"x")])  # h1->h2->h3->h4->h5 is four hops
    assert len(b.peek("h5", 0, 10)) == 1
    b.send("h0", [msg(b"y")])  # the fifth hop is refused
    assert len(b.peek("h5", 0, 10)) == 1
    (m,) = b.peek("h4/$Transfer/$DeadLetterQueue", 0, 10)
    assert m.body_raw == b"y" and m.hops == 4


def test_dead_letter_queue_messages_can_be_received_and_completed():
    b, _ = make_broker([Q])
    b.send("q", [msg()])
    r = receiver(b, "q")
    r.dead_letter(r.take(1)[0].lock_token)
    dlq = receiver(b, "q/$DeadLetterQueue")
    d = dlq.take(1)[0]
    dlq.abandon(d.lock_token)
    d = dlq.take(1)[0]
    dlq.complete(d.lock_token)
    assert b.peek("q/$DeadLetterQueue", 0, 5) == []


def test_runtime_entities_and_rules():
    from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

    b, _ = make_broker()
    b.create_queue(QueueConfig(name="rq"))
    b.create_topic(TopicConfig(name="rt", subscriptions=(SubscriptionConfig(name="all"),)))
    b.add_rule("rt/Subscriptions/all", RuleConfig(name="never", filter_type="Sql", sql_expression="1=0"))
    assert [r.name for r in b.list_rules("rt/Subscriptions/all")] == ["$Default", "never"]
    b.remove_rule("rt/Subscriptions/all", "$Default")
    b.send("rt", [msg()])
    assert b.peek("rt/Subscriptions/all", 0, 5) == []
    b.send("rq", [msg()])
    b.delete_entity("rq")
    with pytest.raises(EntityNotFoundError):
        b.resolve("rq")


def test_counts_by_state():
    b, clock = make_broker([Q])
    b.send("q", [msg(), msg(), msg()])
    b.schedule("q", [msg(scheduled_enqueue_time_ms=int((clock.now + 60) * 1000))])
    r = receiver(b, "q")
    d1, d2 = r.take(2)
    r.defer(d1.lock_token)
    r.dead_letter(d2.lock_token)
    assert b.counts("q") == {
        "active": 1,
        "deferred": 1,
        "scheduled": 1,
        "dead_letter": 1,
        "transfer_dead_letter": 0,
    }
    assert b.describe("q").max_delivery_count == 3


def test_settled_messages_do_not_pile_up_in_timers():
    b, _ = make_broker([Q])
    r = receiver(b, "q")
    for _ in range(200):
        b.send("q", [msg() for _ in range(100)])
        for d in r.take(100):
            r.complete(d.lock_token)
        b.tick(Budget(0.01))  # as the server's timer task does: a compaction runs in its slices
    # 20,000 messages each left a TTL and a lock timer; compaction keeps only live ones
    assert len(b._timers) < 17_000
    # next_deadline drops Slices.stale_pops stale entries a call and answers 0 while more may follow (the timer
    # task then asks again after yielding): at most a bounded number of calls reach the empty heap
    for _ in range(len(b._timers) // 1024 + 2):
        deadline = b.next_deadline()
        if deadline != 0:
            break
    assert deadline is None


def test_on_deadline_changed_fires_for_a_new_earliest_timer():
    b, clock = make_broker([Q])
    calls = []
    b.on_deadline_changed = lambda: calls.append(b.next_deadline())
    b.send("q", [msg()])  # TTL timer in an hour
    assert calls == [pytest.approx(clock.now + 3600)]
    receiver(b, "q").take(1)  # lock timer in 30 s is earlier
    assert calls[-1] == pytest.approx(clock.now + 30)
    b.send("q", [msg()])  # a later TTL timer: no call
    assert len(calls) == 2


def test_a_failing_on_available_callback_does_not_starve_other_receivers():
    b, _ = make_broker([Q])

    def boom():
        raise RuntimeError("link gone")

    b.open_receiver("q", ReceiveMode.PEEK_LOCK, boom)
    ok = receiver(b, "q")
    b.send("q", [msg()])  # does not raise
    assert ok.on_available.calls == 1
