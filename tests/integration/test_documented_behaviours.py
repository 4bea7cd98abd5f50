"""Documented Service Bus behaviours, checked through the real azure-servicebus SDK over a socket.

Each test names the documentation page it follows. Entities use short TTLs and lock durations so that
no test waits longer than the behaviour needs.
"""

from __future__ import annotations

import copy
import datetime as dt
import time

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import ServiceBusError

from tests.fixtures.emulator import queue, receive, topology

MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)


def sql(name: str, expression: str, action: str | None = None) -> dict:
    props: dict = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}}
    if action:
        props["Action"] = {"SqlExpression": action}
    return {"Name": name, "Properties": props}


def subscription(name: str, rules: list[dict] | None = None, **properties) -> dict:
    sub: dict = {"Name": name, "Properties": properties}
    if rules is not None:
        sub["Rules"] = rules
    return sub


CONFIG = topology(
    queues=[
        queue("ttl-1m", DefaultMessageTimeToLive="PT1M"),
        queue("ttl-1m-sessions", DefaultMessageTimeToLive="PT1M", RequiresSession=True),
        queue("forward-source", ForwardTo="ttl-1m"),  # the source's own default: 1 h
        queue("plain"),
        queue("plain-sessions", RequiresSession=True, LockDuration="PT5S", MaxDeliveryCount=1),
        queue("retry1", MaxDeliveryCount=1, LockDuration="PT2S"),
    ],
    topics=[
        {
            "Name": "ttl-topic",
            "Properties": {"DefaultMessageTimeToLive": "PT2M"},
            "Subscriptions": [
                subscription("sub-1m", DefaultMessageTimeToLive="PT1M"),
                subscription("sub-default"),  # 1 h default: the topic's 2 min caps it
            ],
        },
        {
            "Name": "rules",
            "Properties": {},
            "Subscriptions": [
                subscription("five-rules", [
                    sql("plain-a", "kind = 'order'"),
                    sql("plain-b", "amount > 10"),
                    sql("plain-c", "1=1"),
                    sql("tag-gold", "amount > 10", action="SET tier = 'gold'"),
                    sql("tag-eu", "region = 'eu'", action="SET zone = 'europe'; REMOVE secret"),
                ]),
                subscription("actions-only", [
                    sql("first", "amount > 10", action="SET step = 'first'"),
                    sql("second", "amount > 10", action="SET step = 'second'"),
                    sql("never", "amount < 0", action="SET step = 'never'"),
                ]),
                subscription("forwards-copies", [
                    sql("one", "1=1", action="SET copy = 'one'"),
                    sql("two", "1=1", action="SET copy = 'two'"),
                ], ForwardTo="plain"),
            ],
        },
        {
            "Name": "scheduled-topic",
            "Properties": {},
            "Subscriptions": [subscription("all"), subscription("sessions", RequiresSession=True)],
        },
    ],
)


@pytest.fixture
def topology_under_test() -> dict:
    return copy.deepcopy(CONFIG)


def drain_subscription(client: ServiceBusClient, topic: str, sub: str, expected: int) -> list:
    with client.get_subscription_receiver(
        topic, sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        got = receive(receiver, expected)
        # nothing beyond what was expected
        got += receiver.receive_messages(max_message_count=10, max_wait_time=0.5)
    return got


def drain_queue(client: ServiceBusClient, name: str, expected: int) -> list:
    with client.get_queue_receiver(name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = receive(receiver, expected)
        got += receiver.receive_messages(max_message_count=10, max_wait_time=0.5)
    return got


def by_body(messages: list) -> dict[str, object]:
    return {str(m): m for m in messages}


# ------------------------------------------------------------------ 1. message expiration (TTL ceiling)
def test_entity_ttl_is_a_ceiling_on_a_queue(client):
    """"Message expiration" (learn.microsoft.com/azure/service-bus-messaging/message-expiration): a message
    TTL longer than the entity's DefaultMessageTimeToLive is silently adjusted to the entity's; a shorter one
    applies as sent; without one the entity's default is assumed. The receiver sees the effective TTL and
    ExpiresAtUtc = EnqueuedTimeUtc + TTL."""
    with client.get_queue_sender("ttl-1m") as sender:
        sender.send_messages([
            ServiceBusMessage("longer", time_to_live=HOUR),
            ServiceBusMessage("shorter", time_to_live=dt.timedelta(seconds=30)),
            ServiceBusMessage("unset"),
        ])
    got = by_body(drain_queue(client, "ttl-1m", 3))
    assert {body: m.time_to_live for body, m in got.items()} == {
        "longer": MINUTE, "shorter": dt.timedelta(seconds=30), "unset": MINUTE,
    }
    for m in got.values():
        assert m.expires_at_utc == m.enqueued_time_utc + m.time_to_live


def test_entity_ttl_is_a_ceiling_on_a_session_queue(client):
    """"Message expiration": the ceiling applies to session entities the same way."""
    with client.get_queue_sender("ttl-1m-sessions") as sender:
        sender.send_messages(ServiceBusMessage("s", session_id="a", time_to_live=HOUR))
    with client.get_queue_receiver("ttl-1m-sessions", session_id="a") as receiver:
        (m,) = receive(receiver, 1)
        receiver.complete_message(m)
    assert m.time_to_live == MINUTE
    assert m.expires_at_utc == m.enqueued_time_utc + MINUTE


def test_topic_and_subscription_ttls_are_both_ceilings(client):
    """"Message expiration": the TTL cannot exceed the DefaultMessageTimeToLive of the destination
    subscription, nor the topic's (the subscription's default is capped by its topic's)."""
    with client.get_topic_sender("ttl-topic") as sender:
        sender.send_messages(ServiceBusMessage("long", time_to_live=HOUR))
    (short,) = drain_subscription(client, "ttl-topic", "sub-1m", 1)
    (capped,) = drain_subscription(client, "ttl-topic", "sub-default", 1)
    assert short.time_to_live == MINUTE
    assert capped.time_to_live == dt.timedelta(minutes=2)
    assert capped.expires_at_utc == capped.enqueued_time_utc + dt.timedelta(minutes=2)


def test_auto_forwarded_message_gets_the_destination_ttl_ceiling(client):
    """"Message expiration": the ceiling is the destination queue's; a message auto-forwarded into a
    queue with a shorter DefaultMessageTimeToLive arrives with that TTL."""
    with client.get_queue_sender("forward-source") as sender:
        sender.send_messages(ServiceBusMessage("forwarded", time_to_live=dt.timedelta(minutes=30)))
    (m,) = drain_queue(client, "ttl-1m", 1)
    assert m.time_to_live == MINUTE


# ------------------------------------------------------------------ 2. topic filters and actions
def test_rules_without_actions_give_one_copy_and_each_rule_with_an_action_its_own(client):
    """"Topic filters and actions" (learn.microsoft.com/azure/service-bus-messaging/topic-filters): five
    matching rules, two with actions, give three messages: one for the three rules without actions, one
    per rule with an action, each with only its own action applied and a RuleName property."""
    with client.get_topic_sender("rules") as sender:
        sender.send_messages(ServiceBusMessage(
            "m", application_properties={"kind": "order", "amount": 50, "region": "eu", "secret": "s"}))
    got = drain_subscription(client, "rules", "five-rules", 3)
    assert len(got) == 3
    props = [{k.decode(): (v.decode() if isinstance(v, bytes) else v) for k, v in m.application_properties.items()}
             for m in got]
    plain = [p for p in props if "RuleName" not in p]
    tagged = {p["RuleName"]: p for p in props if "RuleName" in p}
    assert len(plain) == 1 and "tier" not in plain[0] and "zone" not in plain[0] and plain[0]["secret"] == "s"
    assert set(tagged) == {"tag-gold", "tag-eu"}
    assert tagged["tag-gold"]["tier"] == "gold" and "zone" not in tagged["tag-gold"]
    assert tagged["tag-gold"]["secret"] == "s"
    assert tagged["tag-eu"]["zone"] == "europe" and "tier" not in tagged["tag-eu"]
    assert "secret" not in tagged["tag-eu"]
    assert len({m.sequence_number for m in got}) == 3


def test_only_the_matching_rules_with_actions_yield_copies(client):
    """"Topic filters and actions": with no rule without action matching, only the matching rules with
    actions produce messages (one each); a message matching nothing produces none."""
    with client.get_topic_sender("rules") as sender:
        sender.send_messages(ServiceBusMessage("big", application_properties={"amount": 50}))
        sender.send_messages(ServiceBusMessage("small", application_properties={"amount": 1}))
    got = drain_subscription(client, "rules", "actions-only", 2)
    assert sorted((str(m), m.application_properties[b"step"]) for m in got) == [
        ("big", b"first"), ("big", b"second")]


def test_every_action_copy_is_auto_forwarded(client):
    """"Topic filters and actions" with auto-forwarding: each copy a rule action produced travels on."""
    with client.get_topic_sender("rules") as sender:
        sender.send_messages(ServiceBusMessage("f"))
    got = drain_queue(client, "plain", 2)
    assert sorted(m.application_properties[b"copy"] for m in got) == [b"one", b"two"]


# ------------------------------------------------------------------ 3. scheduled messages and sequence numbers
def _in(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def test_scheduled_message_gets_a_new_sequence_number_when_it_becomes_active(client):
    """"Message sequencing and timestamps" (learn.microsoft.com/azure/service-bus-messaging/message-sequencing),
    Scheduled messages: the sequence number returned by scheduling is valid only while the message is
    scheduled (cancel uses it); on activation the message is appended as if enqueued at that instant,
    with a new sequence number."""
    with client.get_queue_sender("plain") as sender:
        (scheduled_seq,) = sender.schedule_messages(ServiceBusMessage("later"), _in(1.5))
        (cancelled_seq,) = sender.schedule_messages(ServiceBusMessage("cancelled"), _in(1.5))
        sender.cancel_scheduled_messages(cancelled_seq)  # valid while scheduled
        sender.send_messages(ServiceBusMessage("now"))
    with client.get_queue_receiver("plain") as receiver:
        (peeked,) = receiver.peek_messages(max_message_count=1, sequence_number=scheduled_seq)
        assert (str(peeked), peeked.sequence_number) == ("later", scheduled_seq)
        got = by_body(receive(receiver, 2))
        for m in got.values():
            receiver.complete_message(m)
    assert set(got) == {"now", "later"}
    assert got["now"].sequence_number > cancelled_seq > scheduled_seq
    assert got["later"].sequence_number > got["now"].sequence_number
    with client.get_queue_sender("plain") as sender, pytest.raises(ServiceBusError):
        sender.cancel_scheduled_messages(scheduled_seq)  # no longer scheduled


def test_scheduled_session_message_gets_a_new_sequence_number(client):
    """"Message sequencing and timestamps": the same on a session queue."""
    with client.get_queue_sender("plain-sessions") as sender:
        (scheduled_seq,) = sender.schedule_messages(ServiceBusMessage("later", session_id="s"), _in(1.5))
        sender.send_messages(ServiceBusMessage("now", session_id="s"))
    with client.get_queue_receiver("plain-sessions", session_id="s") as receiver:
        got = receive(receiver, 2)
        for m in got:
            receiver.complete_message(m)
    assert [str(m) for m in got] == ["now", "later"]
    assert got[0].sequence_number > scheduled_seq
    assert got[1].sequence_number > got[0].sequence_number


def test_message_scheduled_on_a_topic_is_numbered_by_each_subscription_on_arrival(client):
    """"Message sequencing and timestamps": a message scheduled on a topic can be cancelled with the number
    scheduling returned; once active it reaches every subscription (session ones too) after the messages
    sent before its activation."""
    with client.get_topic_sender("scheduled-topic") as sender:
        (cancelled,) = sender.schedule_messages(ServiceBusMessage("cancelled", session_id="s"), _in(1.5))
        sender.schedule_messages(ServiceBusMessage("later", session_id="s"), _in(1.5))
        sender.cancel_scheduled_messages(cancelled)
        sender.send_messages(ServiceBusMessage("now", session_id="s"))
    with client.get_subscription_receiver("scheduled-topic", "all") as receiver:
        got = receive(receiver, 2)
        for m in got:
            receiver.complete_message(m)
    assert [str(m) for m in got] == ["now", "later"]
    assert got[1].sequence_number > got[0].sequence_number
    with client.get_subscription_receiver("scheduled-topic", "sessions", session_id="s") as receiver:
        got = receive(receiver, 2)
        for m in got:
            receiver.complete_message(m)
    assert [str(m) for m in got] == ["now", "later"]


# ------------------------------------------------------------------ 4. sessions and delivery count
def test_closing_a_session_receiver_without_settling_does_not_count_a_delivery(client):
    """"Message sessions" (learn.microsoft.com/azure/service-bus-messaging/message-sessions), Impact of
    delivery count: a session accepted and closed with its messages locked but not completed does not
    increment their delivery count; the next session receiver gets them again (MaxDeliveryCount is 1
    here, so a counted delivery would have dead-lettered them)."""
    with client.get_queue_sender("plain-sessions") as sender:
        sender.send_messages([ServiceBusMessage(b, session_id="g") for b in ("g1", "g2")])
    for _ in range(2):
        with client.get_queue_receiver("plain-sessions", session_id="g") as receiver:
            got = receive(receiver, 2)
            assert [(str(m), m.delivery_count) for m in got] == [("g1", 0), ("g2", 0)]
            # closed without settling
    with client.get_queue_receiver("plain-sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as receiver:
        got = receive(receiver, 2)
        assert [(str(m), m.delivery_count) for m in got] == [("g1", 0), ("g2", 0)]
        for m in got:
            receiver.complete_message(m)
    with client.get_queue_receiver("plain-sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        assert dlq.receive_messages(max_message_count=5, max_wait_time=0.5) == []


def test_session_lock_expiry_counts_a_delivery(client):
    """"Message sessions", Impact of delivery count: a session whose lock expires does increment the delivery
    count of its unsettled messages; with MaxDeliveryCount 1 that dead-letters them."""
    with client.get_queue_sender("plain-sessions") as sender:
        sender.send_messages(ServiceBusMessage("x", session_id="e"))
    holder = client.get_queue_receiver("plain-sessions", session_id="e")
    holder.__enter__()
    try:
        assert [str(m) for m in receive(holder, 1)] == ["x"]
        time.sleep(5.5)  # the 5 s session lock lapses
        with client.get_queue_receiver("plain-sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = receive(dlq, 1)
            assert (str(dead), dead.dead_letter_reason) == ("x", "MaxDeliveryCountExceeded")
            dlq.complete_message(dead)
    finally:
        try:
            holder.__exit__(None, None, None)
        except ServiceBusError:
            pass


def test_closing_a_plain_peek_lock_receiver_leaves_its_locks_to_lapse(client):
    """A non-session receiver that closes with messages locked: the locks stay until they lapse, as on
    Service Bus (docs/emulator.md, "Where the docs are terse"), and a lapsed lock counts a delivery
    ("Message transfers, locks, and settlement": DeliveryCount is incremented "when a message lock
    expires, or the message is explicitly abandoned"). With MaxDeliveryCount 1 the message is dead-lettered
    once its 2-second lock lapses."""
    with client.get_queue_sender("retry1") as sender:
        sender.send_messages(ServiceBusMessage("once"))
    with client.get_queue_receiver("retry1") as receiver:
        assert [str(m) for m in receive(receiver, 1)] == ["once"]
    with client.get_queue_receiver("retry1", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
