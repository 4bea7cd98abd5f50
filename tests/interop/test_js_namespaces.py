"""The JavaScript SDK against several namespaces in one emulator (docs/emulator.md, "Several
namespaces"): @azure/service-bus unchanged picks a namespace by the connection string's Endpoint port,
sees only that namespace's messages, and a key of another namespace is refused (the token exchange
answers 401: the SDK's ServiceBusError with code UnauthorizedAccess)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sbemulator import Emulator
from tests.integration.test_namespaces import TWO_NAMESPACES
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=TWO_NAMESPACES, admin_port=None) as emulator:
        yield emulator


def test_the_javascript_sdk_reaches_each_namespace_by_its_port(emu: Emulator) -> None:
    orders, billing = emu.namespace("orders-ns"), emu.namespace("billing-ns")
    added = emu.add_namespace("js-test")
    assert run_js("namespaces.mjs", orders.connection_string, "work", "to orders") == {
        "sent": True, "bodies": ["to orders"]}
    assert run_js("namespaces.mjs", billing.connection_string, "work", "to billing") == {
        "sent": True, "bodies": ["to billing"]}
    assert run_js("namespaces.mjs", added.connection_string, "work", "to the added one") == {
        "sent": True, "bodies": ["to the added one"]}
    crossed = run_js("namespaces.mjs", billing.connection_string.replace("billing-secret", orders.key),
                     "work", "with orders' key")
    assert crossed == {"sent": False, "error": {"name": "ServiceBusError", "code": "UnauthorizedAccess"}}
    assert run_js("namespaces.mjs", billing.connection_string, "invoices", "only billing has it")["sent"] is True
    missing = run_js("namespaces.mjs", orders.connection_string, "invoices", "orders has no such queue")
    assert missing == {"sent": False, "error": {"name": "ServiceBusError", "code": "MessagingEntityNotFound"}}
