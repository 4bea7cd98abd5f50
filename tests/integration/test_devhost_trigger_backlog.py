"""The scale controller's backlog reader: runtime properties first, peeking when there is no management API.

Both ways must give the same active count for a queue and for a subscription ("Target-based scaling",
Azure Functions docs: the event source length is the entity's active message count), and peeking
stops at the limit the decision can use.
"""

from __future__ import annotations

from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from devhost.discovery import FunctionSpec
from devhost.trigger_backlog import TriggerBacklog
from sbemulator import Emulator

pytestmark = pytest.mark.timeout(60)


def _spec(trigger: dict[str, Any]) -> FunctionSpec:
    return FunctionSpec(name="f", role="r", trigger=trigger, outputs=(), function=lambda message: None)


QUEUE = _spec({"type": "serviceBusTrigger", "queueName": "orders"})
SUBSCRIPTION = _spec({"type": "serviceBusTrigger", "topicName": "events", "subscriptionName": "all"})


def test_peeking_and_runtime_properties_agree(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(5)])
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(3)])

    def admin() -> ServiceBusAdministrationClient:
        assert emulator.admin_connection_string is not None
        return ServiceBusAdministrationClient.from_connection_string(
            emulator.admin_connection_string, connection_verify=emulator.ca_path, connection_timeout=3,
            read_timeout=5)

    def client_factory() -> ServiceBusClient:
        return ServiceBusClient.from_connection_string(emulator.connection_string)

    by_properties = TriggerBacklog(admin, client_factory)
    by_peeking = TriggerBacklog(lambda: None, client_factory)
    try:
        assert (by_properties.active(QUEUE, 100), by_properties.active(SUBSCRIPTION, 100)) == (5, 3)
        assert by_properties.source == "runtime properties"
        for _ in range(2):  # every count starts from the first message, not after the previous peek
            assert (by_peeking.active(QUEUE, 100), by_peeking.active(SUBSCRIPTION, 100)) == (5, 3)
        assert by_peeking.source == "peek"
        assert by_peeking.active(QUEUE, 2) == 5  # a page is read whole: at least the limit, never fewer
    finally:
        by_properties.close()
        by_peeking.close()
