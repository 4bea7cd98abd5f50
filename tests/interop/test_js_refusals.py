"""Refusals the documentation names, as the JavaScript SDK reports them: "Suspend and reactivate messaging
entities" (a Disabled queue refuses sends and receives) and "Service Bus quotas" (a property above 32 KB)."""

from __future__ import annotations

from azure.servicebus.management import EntityStatus, ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def test_js_gets_named_errors_for_a_disabled_queue_and_an_oversized_property(emulator: Emulator) -> None:
    assert emulator.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as admin:
        orders = admin.get_queue("orders")
        orders.status = EntityStatus.DISABLED
        admin.update_queue(orders)

    out = run_js("refusals.mjs", emulator.connection_string, "orders", "retry3")

    assert out["send"]["code"] == "MessagingEntityDisabled"
    assert out["receive"]["code"] == "MessagingEntityDisabled"
    assert out["property"] is not None and out["property"]["name"] == "ServiceBusError"
