"""Message fields survive a trip between the Python and the JavaScript SDK, in both directions.

The two SDKs encode application properties differently (Python: int as int32, float as double;
JS/rhea: positive integers as uint/ulong, negative as int/long), so the broker must pass the encoded
properties through untouched for each side to read back what the other wrote.
"""

from __future__ import annotations

import json

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def _text(value: object) -> object:
    return value.decode() if isinstance(value, bytes) else value


def test_python_sends_js_receives_every_field(sb_connection_string: str) -> None:
    with ServiceBusClient.from_connection_string(sb_connection_string) as client, \
            client.get_queue_sender("orders") as sender:
        sender.send_messages([
            ServiceBusMessage(
                "hello from python",
                message_id="py-1",
                subject="greeting",
                content_type="text/plain",
                correlation_id="corr-py-1",
                application_properties={"text": "héllo wörld", "count": 42, "negative": -7,
                                        "ratio": 2.5, "flag": True, "off": False},
            ),
            ServiceBusMessage(
                json.dumps({"order": 17}),
                message_id="py-2",
                subject="order",
                content_type="application/json",
                correlation_id="corr-py-2",
                application_properties={"Priority": "High"},
            ),
        ])

    result = run_js("receive_describe.mjs", sb_connection_string, "orders", "2")

    received = {m["messageId"]: m for m in result["received"]}
    assert sorted(received) == ["py-1", "py-2"]
    first = received["py-1"]
    # Python sends str bodies as a data section; the JS SDK hands a Buffer back for non-JSON bytes.
    assert first["body"] == {"buffer": "hello from python"}
    assert (first["subject"], first["contentType"], first["correlationId"]) == (
        "greeting", "text/plain", "corr-py-1")
    assert first["applicationProperties"] == {
        "text": {"type": "string", "value": "héllo wörld"},
        "count": {"type": "number", "value": 42},
        "negative": {"type": "number", "value": -7},
        "ratio": {"type": "number", "value": 2.5},
        "flag": {"type": "boolean", "value": True},
        "off": {"type": "boolean", "value": False},
    }
    second = received["py-2"]
    # A data section holding JSON text is decoded by the JS SDK's default transformer.
    assert second["body"] == {"order": 17}
    assert (second["subject"], second["contentType"], second["correlationId"]) == (
        "order", "application/json", "corr-py-2")
    assert second["applicationProperties"] == {"Priority": {"type": "string", "value": "High"}}
    assert first["deliveryCount"] == 0 and second["deliveryCount"] == 0


def test_js_sends_python_receives_every_field(sb_connection_string: str) -> None:
    assert run_js("send_with_properties.mjs", sb_connection_string, "orders") == {"sent": 2}

    with ServiceBusClient.from_connection_string(sb_connection_string) as client, \
            client.get_queue_receiver("orders", max_wait_time=5) as receiver:
        messages: list[ServiceBusReceivedMessage] = []
        for _ in range(5):
            messages += receiver.receive_messages(max_message_count=2 - len(messages), max_wait_time=2)
            if len(messages) == 2:
                break
        for message in messages:
            receiver.complete_message(message)

    received = {str(m.message_id): m for m in messages}
    assert sorted(received) == ["js-1", "js-2"]
    first, second = received["js-1"], received["js-2"]
    assert (first.subject, first.content_type, first.correlation_id) == (
        "greeting", "text/plain", "corr-js-1")
    # The JS SDK JSON-encodes bodies into a data section.
    assert json.loads(b"".join(first.body)) == "hello from js"
    props = {_text(k): _text(v) for k, v in (first.application_properties or {}).items()}
    assert props == {"text": "héllo wörld", "count": 42, "negative": -7, "ratio": 2.5,
                     "flag": True, "off": False}
    assert isinstance(props["ratio"], float) and isinstance(props["count"], int)
    assert isinstance(props["flag"], bool)
    assert (second.subject, second.content_type, second.correlation_id) == (
        "order", "application/json", "corr-js-2")
    assert json.loads(b"".join(second.body)) == {"order": 17, "items": ["a", "b"]}
    assert {_text(k): _text(v) for k, v in (second.application_properties or {}).items()} == {
        "Priority": "High", "big": 5000000000}
    assert first.delivery_count == 0


def test_python_publishes_js_receives_from_filtered_subscription(sb_connection_string: str) -> None:
    """Subscription `high` has the SQL rule Priority = 'High'; `all` keeps the default rule."""
    with ServiceBusClient.from_connection_string(sb_connection_string) as client, \
            client.get_topic_sender("events") as sender:
        sender.send_messages([
            ServiceBusMessage(f"event {i}", message_id=f"ev-{i}",
                              application_properties={"Priority": priority})
            for i, priority in enumerate(["High", "Low", "High"])
        ])

    high = run_js("receive_describe.mjs", sb_connection_string, "events/Subscriptions/high", "3", "3000")
    everything = run_js("receive_describe.mjs", sb_connection_string, "events/Subscriptions/all", "4", "3000")

    assert [m["messageId"] for m in high["received"]] == ["ev-0", "ev-2"]
    assert all(m["applicationProperties"]["Priority"]["value"] == "High" for m in high["received"])
    assert [m["messageId"] for m in everything["received"]] == ["ev-0", "ev-1", "ev-2"]
    # Every subscription gets its own intact copy of the body.
    assert [m["body"] for m in everything["received"]] == [
        {"buffer": "event 0"}, {"buffer": "event 1"}, {"buffer": "event 2"}]
