"""MaxSizeInMegabytes with the real Python SDK: a full queue or topic refuses sends with
ServiceBusQuotaExceededError, takes them again once receivers drained it, and SizeInBytes says how full
it is.

"Service Bus quotas", queue or topic size: 1, 2, 3, 4 or 5 GB (Standard); "Subsequent incoming
messages are rejected, and an exception is received by the calling code." The refusal is Service Bus's
QuotaExceeded ("Service Bus messaging exceptions"), whose text reports the entity's size above the
maximum: the send that crosses the limit is taken, the ones after it are refused. The config file takes
sizes from 1 MB (the emulator's extension, like MaxMessageSizeInKilobytes), so a few 200 KB messages
fill an entity.
"""

from __future__ import annotations

import copy

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusQuotaExceededError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY, queue, receive
from tests.interop.node import run_js

MIB = 1024 * 1024
BODY = b"x" * (200 * 1024)  # below the 256 KB message size of the Standard tier


@pytest.fixture
def topology_under_test() -> dict:
    config = copy.deepcopy(STANDARD_TOPOLOGY)
    ns = config["UserConfig"]["Namespaces"][0]
    ns["Queues"].append(queue("tiny", MaxSizeInMegabytes=1))
    ns["Topics"].append({
        "Name": "tinytopic",
        "Properties": {"MaxSizeInMegabytes": 1},
        "Subscriptions": [{"Name": "a", "Properties": {}}, {"Name": "b", "Properties": {}}],
    })
    return config


def _fill(sender, limit: int = 50) -> tuple[int, ServiceBusQuotaExceededError]:
    """Send BODY until the entity refuses one; returns how many were taken and the refusal."""
    for sent in range(limit):
        try:
            sender.send_messages(ServiceBusMessage(BODY))
        except ServiceBusQuotaExceededError as exc:
            return sent, exc
    raise AssertionError(f"{limit} messages of {len(BODY)} bytes were all taken")


def test_a_full_queue_refuses_sends_with_quota_exceeded_until_it_is_drained(
    emu: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    with client.get_queue_sender("tiny") as sender:
        taken, refusal = _fill(sender)
        size = admin.get_queue_runtime_properties("tiny").size_in_bytes
        assert size is not None
        per_message = size // taken
        assert size == per_message * taken  # every message counts its whole encoded size
        assert per_message > len(BODY)  # ... headers and properties included
        # the send that crossed 1 MB was taken; the one after it was refused
        assert (taken - 1) * per_message < MIB <= size
        assert "The maximum entity size has been reached or exceeded for Queue" in str(refusal)
        assert f"Size of entity in bytes:{size}, Max entity size in bytes: {MIB}" in str(refusal)
        with pytest.raises(ServiceBusQuotaExceededError):  # still full: the link is up and says so again
            sender.send_messages(ServiceBusMessage(BODY))

        with client.get_queue_receiver("tiny") as receiver:
            got = receive(receiver, 2)
            assert len(got) == 2
            for m in got:
                receiver.complete_message(m)
        assert admin.get_queue_runtime_properties("tiny").size_in_bytes == per_message * (taken - 2)
        sender.send_messages(ServiceBusMessage(BODY))  # the same link sends again once there is room
    props = admin.get_queue_runtime_properties("tiny")
    assert props.size_in_bytes == per_message * (taken - 1)
    assert props.active_message_count == taken - 1


def test_a_topic_counts_every_subscription_and_refuses_when_full(
    emu: Emulator, client: ServiceBusClient, admin: ServiceBusAdministrationClient
) -> None:
    with client.get_topic_sender("tinytopic") as sender:
        sender.send_messages(ServiceBusMessage(BODY))
        topic_size = admin.get_topic_runtime_properties("tinytopic").size_in_bytes
        assert topic_size is not None
        per_copy = topic_size // 2
        assert per_copy > len(BODY)
        taken, refusal = _fill(sender)
        taken += 1
        size = admin.get_topic_runtime_properties("tinytopic").size_in_bytes
        assert size == 2 * per_copy * taken  # two subscriptions, a copy in each
        assert (taken - 1) * 2 * per_copy < MIB <= size
        assert "reached or exceeded for Topic" in str(refusal)

        with client.get_subscription_receiver("tinytopic", "a") as receiver:
            got = receive(receiver, taken)
            assert len(got) == taken
            for m in got:
                receiver.complete_message(m)
        assert admin.get_topic_runtime_properties("tinytopic").size_in_bytes == per_copy * taken
        sender.send_messages(ServiceBusMessage(BODY))
    assert admin.get_topic_runtime_properties("tinytopic").size_in_bytes == per_copy * (taken + 2)
    assert admin.get_subscription_runtime_properties("tinytopic", "b").active_message_count == taken + 1


def test_the_management_api_takes_the_standard_sizes_and_refuses_others(
    emu: Emulator, admin: ServiceBusAdministrationClient
) -> None:
    assert admin.create_queue("default-size").max_size_in_megabytes == 1024  # Service Bus's default
    assert admin.create_queue("five-gb", max_size_in_megabytes=5120).max_size_in_megabytes == 5120
    assert admin.get_queue("five-gb").max_size_in_megabytes == 5120
    with pytest.raises(HttpResponseError) as refused:
        admin.create_queue("odd-size", max_size_in_megabytes=1500)
    assert refused.value.status_code == 400
    assert "MaxSizeInMegabytes" in str(refused.value)
    assert admin.create_topic("big-topic", max_size_in_megabytes=2048).max_size_in_megabytes == 2048
    # A config file's small size reads back and survives an update that leaves it as it is.
    tiny = admin.get_queue("tiny")
    assert tiny.max_size_in_megabytes == 1
    tiny.max_delivery_count = 7
    admin.update_queue(tiny)
    assert admin.get_queue("tiny").max_size_in_megabytes == 1


def test_size_in_bytes_is_the_same_after_a_restart(tmp_path, topology_under_test: dict) -> None:
    data = tmp_path / "data"
    with Emulator(config=copy.deepcopy(topology_under_test), data_dir=data, in_memory=False) as first:
        with ServiceBusClient.from_connection_string(first.connection_string) as sb, sb.get_queue_sender("tiny") as s:
            _fill(s)
        assert first.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            first.admin_connection_string, connection_verify=first.ca_path
        ) as adm:
            before = adm.get_queue_runtime_properties("tiny").size_in_bytes
    with Emulator(config=copy.deepcopy(topology_under_test), data_dir=data, in_memory=False) as second:
        assert second.admin_connection_string is not None
        with ServiceBusAdministrationClient.from_connection_string(
            second.admin_connection_string, connection_verify=second.ca_path
        ) as adm:
            assert adm.get_queue_runtime_properties("tiny").size_in_bytes == before
        with ServiceBusClient.from_connection_string(second.connection_string) as sb, sb.get_queue_sender("tiny") as s:
            with pytest.raises(ServiceBusQuotaExceededError):  # still full after the restart
                s.send_messages(ServiceBusMessage(BODY))


def test_the_javascript_sdk_meets_the_same_quota(emu: Emulator) -> None:
    """@azure/service-bus maps the refusal to its QuotaExceeded code (not retried) and sends again after
    a drain on the same sender."""
    out = run_js("quota.mjs", emu.connection_string, "tiny")
    assert out["refusal"] == {"name": "ServiceBusError", "code": "QuotaExceeded", "retryable": False}
    assert out["taken"] >= 5  # 1 MB of 200 KB messages: the sixth crosses it
    assert out["drained"] == 2
    assert out["afterDrain"] == "sent"
