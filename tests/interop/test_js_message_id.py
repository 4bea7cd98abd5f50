"""Messages sent without a message id by the JS SDK (which never sets one itself) must still be
settleable by the JS SDK: its receiver keys lock renewal by messageId and throws when it is absent.
Service Bus assigns an id to every message that arrives without one."""

from __future__ import annotations

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def test_js_completes_messages_sent_without_message_id(sb_connection_string: str) -> None:
    out = run_js("no_message_id.mjs", sb_connection_string, "orders")

    assert sorted(m["body"] for m in out["received"]) == ["anonymous-1", "anonymous-2"]
    ids = [m["messageId"] for m in out["received"]]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 2
    assert out["leftover"] == []
