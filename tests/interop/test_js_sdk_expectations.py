"""Issue #24's behaviours as the JavaScript SDK sees them: SAS rights, the x-opt-lock-token delivery
annotation and a missing entity refused at the put-token (tests/integration/test_sas_rights.py and
test_message_sections.py have the Python side). The empty session id has no JS test: @azure/service-bus
tests the session id an attach returns for truthiness, so it cannot accept session ""."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


@pytest.fixture
def emu() -> Iterator[Emulator]:
    raw = copy.deepcopy(STANDARD_TOPOLOGY)
    raw["UserConfig"]["Namespaces"][0]["SasKeys"] = [
        {"KeyName": "Listener", "Key": "listen-secret", "Rights": ["Listen"]},
        {"KeyName": "Sender", "Key": "send-secret", "Rights": ["Send"]},
    ]
    with Emulator(config=raw, in_memory=True) as emulator:
        yield emulator


def _conn(emu: Emulator, name: str, key: str) -> str:
    return (f"Endpoint=sb://127.0.0.1:{emu.port};SharedAccessKeyName={name};SharedAccessKey={key};"
            "UseDevelopmentEmulator=true;")


def test_js_listen_and_send_keys_get_unauthorized_access_for_what_they_lack(emu: Emulator) -> None:
    listener = run_js("sdk_expectations.mjs", _conn(emu, "Listener", "listen-secret"), "rights", "orders")
    assert listener["receive"] is None
    assert listener["send"]["code"] == "UnauthorizedAccess"
    assert "'Send' claim(s) are required" in listener["send"]["message"]
    sender = run_js("sdk_expectations.mjs", _conn(emu, "Sender", "send-secret"), "rights", "orders")
    assert sender["send"] is None
    assert sender["receive"]["code"] == "UnauthorizedAccess"


def test_js_sees_the_lock_token_annotation_and_the_missing_entity(emu: Emulator) -> None:
    out = run_js("sdk_expectations.mjs", emu.connection_string, "sections", "orders")
    assert out["lockToken"] is not None
    assert out["annotationLockToken"] == out["lockToken"]
    # @azure/service-bus names the put-token's 404 as a missing entity
    assert out["missing"]["code"] == "MessagingEntityNotFound"
    assert "could not be found" in out["missing"]["message"]
