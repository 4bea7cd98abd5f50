"""JS SDK sends in all three shapes and settles; the Python SDK then inspects what the broker kept."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient, ServiceBusSubQueue

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def test_js_send_shapes_complete_and_dead_letter_seen_from_python(sb_connection_string: str) -> None:
    result = run_js("send_settle_deadletter.mjs", sb_connection_string, "orders")

    assert result["batchAdded"] == [True, True, True]
    assert result["batchCount"] == 3
    received = {m["messageId"]: m for m in result["received"]}
    assert sorted(received) == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert received["m1"]["body"] == "single"
    assert received["m2"]["body"] == {"kind": "json", "n": 2}
    assert received["m3"]["body"] == {"buffer": "raw-bytes"}
    assert received["m6"]["body"] == "batched m6"
    assert all(m["deliveryCount"] == 0 for m in received.values())
    # Sequence numbers are assigned in send order, one per message, even inside a batch.
    order = sorted(received.values(), key=lambda m: int(m["sequenceNumber"]))
    assert [m["messageId"] for m in order] == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert len({m["sequenceNumber"] for m in order}) == 6
    assert result["leftover"] == []

    with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        with client.get_queue_receiver("orders") as receiver:
            assert receiver.peek_messages(max_message_count=10) == []
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                 max_wait_time=5) as dlq:
            dead = dlq.receive_messages(max_message_count=10, max_wait_time=5)
            assert len(dead) == 1
            message = dead[0]
            assert message.message_id == "m5"
            # The JS SDK JSON-encodes non-Buffer bodies into a data section: Python sees the JSON text.
            assert b"".join(message.body) == b'"batched m5"'
            assert message.dead_letter_reason == "InvalidPayload"
            assert message.dead_letter_error_description == "field 'amount' is missing"
            props = {k.decode() if isinstance(k, bytes) else k: v for k, v in
                     (message.application_properties or {}).items()}
            assert props["DeadLetterReason"] in ("InvalidPayload", b"InvalidPayload")
            dlq.complete_message(message)
            assert dlq.receive_messages(max_message_count=1, max_wait_time=1) == []


def test_js_sees_entity_size_limit(sb_connection_string: str) -> None:
    """Queue `small` allows 64 KB messages: the JS SDK learns that from the sender link's attach."""
    out = run_js("size_limits.mjs", sb_connection_string, "small")

    assert out["maxSizeInBytes"] == 64 * 1024
    assert out["added"] == [True, False]
    assert out["count"] == 1
    assert out["oversized"] == {"name": "ServiceBusError", "code": "MessageSizeExceeded"}
    assert out["receivedIds"] == ["c1"]
