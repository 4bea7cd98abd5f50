"""The JavaScript SDK over WebSockets (``webSocketOptions`` with the ``ws`` package).

The JS SDK always dials ``wss://<host>:<port>/$servicebus/websocket`` (TLS, subprotocol AMQPWSB10) for
WebSockets, whatever ``UseDevelopmentEmulator`` says; ``customEndpointAddress`` points it at the
emulator's HTTPS management port, whose certificate it is told to trust through
``webSocketConstructorOptions.ca``.
"""

from __future__ import annotations

from sbemulator import Emulator
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def test_js_sdk_sends_receives_and_settles_over_wss(emulator: Emulator) -> None:
    assert emulator.ca_path is not None
    result = run_js("websocket.mjs", emulator.connection_string, "orders", extra_env={
        "SB_CUSTOM_ENDPOINT": f"sb://127.0.0.1:{emulator.admin_port}", "SB_CA": emulator.ca_path})
    assert [m["messageId"] for m in result["first"]] == ["w1", "w2"]
    assert [m["body"] for m in result["first"]] == ["over websocket 1", "over websocket 2"]
    [again] = result["again"]
    assert again["messageId"] == "w2" and again["deliveryCount"] == 1
    assert result["leftover"] == 0
