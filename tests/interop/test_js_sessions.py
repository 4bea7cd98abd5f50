"""JS SDK session receivers on the session-enabled queue `sessions`, with the Python SDK reading
what the JS side left behind (session state, a message whose session receiver closed unsettled)."""

from __future__ import annotations

from azure.servicebus import ServiceBusClient

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def test_js_accept_session_state_and_exclusive_lock(sb_connection_string: str) -> None:
    out = run_js("sessions.mjs", sb_connection_string, "sessions", "named", timeout=90)

    assert out["sendWithoutSession"] is not None
    assert "SessionId" in out["sendWithoutSession"]["message"]
    assert out["acceptedSessionId"] == "s-a"
    assert out["lockedUntil"] is not None
    assert out["stateBefore"] is None
    # One session's messages only, in send order.
    assert [m["messageId"] for m in out["sessionA"]] == ["a-1", "a-2", "a-3"]
    assert all(m["sessionId"] == "s-a" for m in out["sessionA"])
    assert out["stateAfterSet"] == {"step": 2, "owner": "js"}
    assert out["secondAccept"] is not None
    assert out["secondAccept"]["code"] == "SessionCannotBeLocked"
    assert out["renewedUntil"] >= out["lockedUntil"]
    assert [m["messageId"] for m in out["sessionB"]] == ["b-1"]
    assert out["stateInNewReceiver"] == {"step": 2, "owner": "js"}
    assert out["emptyAfterComplete"] == []

    with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        with client.get_queue_receiver("sessions", session_id="s-a", max_wait_time=3) as receiver:
            # The JS SDK stores state as JSON bytes; the Python SDK hands back those bytes.
            assert receiver.session.get_state() == b'{"step":2,"owner":"js"}'
        with client.get_queue_receiver("sessions", session_id="s-b", max_wait_time=8) as receiver:
            # JS closed its s-b receiver without settling b-1: the message is available again, and
            # closing a session does not count a delivery ("Message sessions", impact of delivery count).
            messages = receiver.receive_messages(max_message_count=1, max_wait_time=8)
            assert [(m.message_id, m.delivery_count) for m in messages] == [("b-1", 0)]
            receiver.complete_message(messages[0])


def test_js_accept_next_session_takes_each_session_with_messages(sb_connection_string: str) -> None:
    out = run_js("sessions.mjs", sb_connection_string, "sessions", "next", timeout=90)

    assert sorted(out["sessionIds"]) == ["s-first", "s-second"]
    by_session = dict(zip(out["sessionIds"], out["messages"], strict=True))
    assert [m["messageId"] for m in by_session["s-first"]] == ["n-1"]
    assert [m["messageId"] for m in by_session["s-second"]] == ["n-2"]
