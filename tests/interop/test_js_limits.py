"""The Service Bus limits as the JavaScript SDK reports them (`ServiceBusError.code`), one row each of
docs/emulator.md's "Limits and faults" table: "Service Bus quotas" (concurrent receive requests per
entity; links per connection refused with QuotaExceeded), "AMQP 1.0 in Azure Service Bus:
claims-based authorization" (a refused put-token), and a $management request above the entity's
message size (the refusal is the request's disposition, which the SDK's request-response link does
not read: ServiceTimeout, as the service gives it, azure-sdk-for-js issue 23623)."""

from __future__ import annotations

import copy

import pytest

from sbemulator import Emulator
from sbemulator.gateway.limits import Limits
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


@pytest.mark.parametrize(("mode", "limits", "code", "words"), [
    ("receivers", Limits(max_receivers_per_entity=1), "QuotaExceeded", "concurrent receive requests"),
    ("links", Limits(max_links_per_connection=5), "QuotaExceeded", "Cannot open more than 5 links"),
    ("token", Limits(), "UnauthorizedAccess", "InvalidSignature"),
    ("schedule", Limits(), "ServiceTimeout", "timed out"),
])
def test_js_gets_the_named_error_for_each_limit(mode: str, limits: Limits, code: str, words: str) -> None:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        wrong_key = emu.connection_string.replace(f"SharedAccessKey={emu.key};", "SharedAccessKey=not-the-key;")
        out = run_js("limits.mjs", emu.connection_string, mode, "orders", wrong_key)
    refused = out["refused"]
    assert refused is not None and refused["name"] == "ServiceBusError", out
    assert refused["code"] == code and words in refused["message"], out
    if mode == "links":
        assert out["opened"] >= 1  # the $cbs pair counts too
