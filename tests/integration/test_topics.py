"""Topics, subscriptions, filters, rule actions and auto-forwarding through the Python SDK."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology


def sql(name: str, expression: str, action: str | None = None) -> dict:
    props: dict = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}}
    if action:
        props["Action"] = {"SqlExpression": action}
    return {"Name": name, "Properties": props}


def correlation(name: str, **fields) -> dict:
    return {"Name": name, "Properties": {"FilterType": "Correlation", "CorrelationFilter": fields}}


def subscription(name: str, rules: list[dict] | None = None, **properties) -> dict:
    sub: dict = {"Name": name, "Properties": properties}
    if rules is not None:
        sub["Rules"] = rules
    return sub


TOPICS = topology(
    queues=[queue("audit")],
    topics=[
        {
            "Name": "messages",
            "Properties": {},
            "Subscriptions": [
                subscription("highPriority", [sql("high", "Priority = 'High'")]),
                subscription("lowPriority", [sql("low", "Priority = 'Low'")]),
                subscription("unroutedPriority", [sql("other", "Priority IS NULL OR Priority NOT IN ('High', 'Low')")]),
            ],
        },
        {
            "Name": "orders",
            "Properties": {},
            "Subscriptions": [
                subscription("everything"),  # no rules: $Default TrueFilter
                subscription("two-rules", [sql("big", "amount > 100"), sql("eu", "region = 'eu'")]),
                subscription("tagged", [sql("tag", "region = 'eu'", action="SET tier = 'gold'; REMOVE secret")]),
                subscription("by-label", [correlation("label", Label="invoice", Properties={"region": "us"})]),
                subscription("forwarder", [sql("fwd", "forward = 'yes'")], ForwardTo="audit"),
                subscription("strict", [sql("div", "amount / divisor > 1")]),
            ],
        },
    ],
)


@pytest.fixture
def topics() -> Iterator[Emulator]:
    with Emulator(config=TOPICS) as emu:
        yield emu


def drain(client: ServiceBusClient, topic: str, sub: str, expected: int | None = None, dlq: bool = False) -> list:
    got: list = []
    with client.get_subscription_receiver(
        topic, sub, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
        sub_queue=ServiceBusSubQueue.DEAD_LETTER if dlq else None,
    ) as receiver:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=50, max_wait_time=1)
            got += batch
            if expected is not None and len(got) >= expected:
                break
            if expected is None and not batch:
                break
    return got


def test_priority_queue_routing_loses_nothing(topics):
    """10 High + 10 Low land only in their subscriptions; an unknown or missing Priority goes to the
    catch-all subscription instead of being silently dropped."""
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("messages") as sender:
            batch = sender.create_message_batch()
            for i in range(10):
                batch.add_message(ServiceBusMessage(f"h{i}", application_properties={"Priority": "High"}))
                batch.add_message(ServiceBusMessage(f"l{i}", application_properties={"Priority": "Low"}))
            batch.add_message(ServiceBusMessage("urgent", application_properties={"Priority": "Urgent"}))
            batch.add_message(ServiceBusMessage("none"))
            sender.send_messages(batch)
        high = drain(client, "messages", "highPriority", 10)
        low = drain(client, "messages", "lowPriority", 10)
        other = drain(client, "messages", "unroutedPriority", 2)
    assert [str(m) for m in high] == [f"h{i}" for i in range(10)]
    assert [str(m) for m in low] == [f"l{i}" for i in range(10)]
    assert sorted(str(m) for m in other) == ["none", "urgent"]


def test_each_subscription_gets_one_copy_even_when_several_rules_match(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("both", application_properties={"amount": 500, "region": "eu"}))
            sender.send_messages(ServiceBusMessage("neither", application_properties={"amount": 5, "region": "us"}))
        assert [str(m) for m in drain(client, "orders", "two-rules")] == ["both"]
        assert sorted(str(m) for m in drain(client, "orders", "everything")) == ["both", "neither"]


def test_message_matching_no_subscription_is_dropped_and_the_send_succeeds(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("messages") as sender:
            sender.send_messages(ServiceBusMessage("fine", application_properties={"Priority": "High"}))
        with client.get_topic_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("x", application_properties={"amount": 1, "region": "ap"}))
        assert [str(m) for m in drain(client, "orders", "everything")] == ["x"]
        for sub in ("two-rules", "tagged", "by-label", "forwarder"):
            assert drain(client, "orders", sub) == []


def test_rule_action_sets_and_removes_properties_on_that_subscription_only(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("eu", application_properties={"region": "eu", "secret": "s3"}))
        (tagged,) = drain(client, "orders", "tagged", 1)
        (plain,) = drain(client, "orders", "everything", 1)
    assert tagged.application_properties[b"tier"] == b"gold"
    assert b"secret" not in tagged.application_properties
    assert b"tier" not in plain.application_properties
    assert plain.application_properties[b"secret"] == b"s3"


def test_correlation_filter_matches_label_and_properties(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("orders") as sender:
            sender.send_messages([
                ServiceBusMessage("yes", subject="invoice", application_properties={"region": "us"}),
                ServiceBusMessage("wrong label", subject="receipt", application_properties={"region": "us"}),
                ServiceBusMessage("wrong region", subject="invoice", application_properties={"region": "eu"}),
            ])
        assert [str(m) for m in drain(client, "orders", "by-label")] == ["yes"]


def test_subscription_auto_forwards_to_a_queue(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("copy me", application_properties={"forward": "yes"}))
        assert drain(client, "orders", "forwarder") == []
        with client.get_queue_receiver("audit", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=5)
            assert str(message) == "copy me"


def test_filter_evaluation_error_dead_letters_the_copy(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("div by zero", application_properties={"amount": 5, "divisor": 0}))
        assert drain(client, "orders", "strict") == []
        (dead,) = drain(client, "orders", "strict", 1, dlq=True)
    assert str(dead) == "div by zero"
    assert dead.dead_letter_reason == "FilterEvaluationException"


def test_subscription_peek_lock_abandon_and_dead_letter(topics):
    with ServiceBusClient.from_connection_string(topics.connection_string) as client:
        with client.get_topic_sender("messages") as sender:
            sender.send_messages(ServiceBusMessage("work", application_properties={"Priority": "Low"}))
        with client.get_subscription_receiver("messages", "lowPriority") as receiver:
            (first,) = receiver.receive_messages(max_wait_time=5)
            receiver.abandon_message(first)
            (second,) = receiver.receive_messages(max_wait_time=5)
            assert second.delivery_count == 1
            receiver.dead_letter_message(second, reason="Nope", error_description="test")
        (dead,) = drain(client, "messages", "lowPriority", 1, dlq=True)
    assert (str(dead), dead.dead_letter_reason) == ("work", "Nope")
