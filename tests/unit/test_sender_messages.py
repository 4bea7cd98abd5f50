"""Building and batching. The batches are real ``ServiceBusMessageBatch`` objects (they measure the
encoded AMQP size); only the sender is a stand-in, because ``create_message_batch`` on a real sender
opens a link to learn the broker's maximum message size, which needs a broker."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus.exceptions import MessageSizeExceededError

from sender.messages import build_contract_messages, build_messages, publish
from shared.contract import parse_message

EMULATOR = ("Endpoint=sb://127.0.0.1;SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;")


class StandInSender:
    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self.sent: list[ServiceBusMessageBatch] = []

    def create_message_batch(self) -> ServiceBusMessageBatch:
        return ServiceBusMessageBatch(max_size_in_bytes=self.max_size)

    def send_messages(self, batch: ServiceBusMessageBatch) -> None:
        assert batch.size_in_bytes <= self.max_size
        self.sent.append(batch)


def _ids(batch: ServiceBusMessageBatch) -> list[str]:
    return [str(m.message_id) for m in batch._messages]


def test_build_messages_sets_priority_property_id_and_json_body() -> None:
    messages = build_messages(2, 3, ["t1", "t2"], now=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    assert [(m.application_properties or {})["Priority"] for m in messages] == ["High"] * 2 + ["Low"] * 3
    assert len({m.message_id for m in messages}) == 5
    for message in messages:
        body = parse_message(b"".join(message.body))
        assert body.message_id == message.message_id
        assert body.priority == (message.application_properties or {})["Priority"]
        assert message.content_type == "application/json"
    assert [parse_message(b"".join(m.body)).tenant_id for m in messages] == ["t1", "t2", "t1", "t2", "t1"]


def test_invalid_priorities_are_built_for_the_catch_all() -> None:
    messages = build_contract_messages(1, 1, ["t"], n_invalid=2, invalid_priority="Urgent")
    assert [m.priority for m in messages] == ["High", "Low", "Urgent", "Urgent"]


def test_build_messages_validates_its_arguments() -> None:
    with pytest.raises(ValueError):
        build_messages(1, 1, [])
    with pytest.raises(ValueError):
        build_messages(-1, 1, ["t"])


def test_messages_build_with_an_emulator_client_and_no_network() -> None:
    with ServiceBusClient.from_connection_string(EMULATOR) as client:  # nothing connects until a link opens
        sender = client.get_topic_sender("messages")
        assert sender is not None
    assert json.loads(b"".join(build_messages(1, 0, ["t"])[0].body))["priority"] == "High"


def test_publish_fills_batches_and_splits_when_full() -> None:
    messages = build_messages(20, 20, ["t1"])
    sender = StandInSender(max_size=4096)
    batches = publish(sender, messages)
    assert batches == len(sender.sent) > 1
    sent_ids = [mid for batch in sender.sent for mid in _ids(batch)]
    assert sent_ids == [m.message_id for m in messages]  # all sent once, in order
    # every batch but the last was full: the next message would not have fit
    for batch in sender.sent[:-1]:
        assert batch.size_in_bytes > 4096 - 400


def test_publish_one_batch_when_everything_fits() -> None:
    sender = StandInSender(max_size=256 * 1024)
    assert publish(sender, build_messages(10, 10, ["t"])) == 1


def test_publish_nothing_sends_nothing() -> None:
    sender = StandInSender(max_size=1024)
    assert publish(sender, []) == 0 and sender.sent == []


def test_a_message_larger_than_a_batch_raises() -> None:
    sender = StandInSender(max_size=1024)
    with pytest.raises(MessageSizeExceededError):
        publish(sender, [ServiceBusMessage("x" * 5000)])
