"""JS SDK receive modes and every settlement path, against one queue, end to end."""

from __future__ import annotations

from datetime import datetime

from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


def _ids(messages: list[dict]) -> list[str]:
    return [m["messageId"] for m in messages]


def test_js_receive_modes_abandon_defer_peek_schedule(sb_connection_string: str) -> None:
    out = run_js("settlement.mjs", sb_connection_string, "orders", timeout=90)

    # receiveAndDelete: delivered without a lock and removed at once.
    assert _ids(out["receiveAndDelete"]) == ["rd-1", "rd-2"]
    assert all(m["lockToken"] is None for m in out["receiveAndDelete"])
    assert out["afterReceiveAndDelete"] == []

    # abandon: same message again, delivery count one higher, abandon's properties applied.
    first, second, second_props = out["abandon"]
    assert first["messageId"] == second["messageId"] == "ab"
    assert first["sequenceNumber"] == second["sequenceNumber"]
    assert (first["deliveryCount"], second["deliveryCount"]) == (0, 1)
    assert second_props == {"reason": "retry"}
    assert first["lockToken"] != second["lockToken"]

    # defer: hidden from receive, returned by sequence number in the deferred state.
    assert out["afterDeferReceive"] == []
    assert _ids(out["deferred"]) == ["df"]
    assert out["deferred"][0]["state"] == "deferred"
    assert out["deferred"][0]["deliveryCount"] == 1  # it was delivered once before being deferred
    assert out["deferred"][0]["lockToken"]

    # peek: all three visible in order, none locked, and all still receivable afterwards.
    assert _ids(out["peeked"]) == ["p1", "p2", "p3"]
    assert all(m["lockToken"] is None and m["state"] == "active" for m in out["peeked"])
    assert _ids(out["receivedAfterPeek"]) == ["p1", "p2", "p3"]
    assert all(m["deliveryCount"] == 0 for m in out["receivedAfterPeek"])

    # schedule: both visible as scheduled, only the due one is delivered, the cancelled one is gone.
    far_seq, soon_seq = out["scheduledSequenceNumbers"]
    assert int(soon_seq) == int(far_seq) + 1
    assert [(m["messageId"], m["state"], m["sequenceNumber"]) for m in out["peekScheduled"]] == [
        ("far", "scheduled", far_seq), ("soon", "scheduled", soon_seq)]
    assert out["beforeDue"] == []
    assert _ids(out["due"]) == ["soon"]
    assert out["due"][0]["state"] == "active"
    assert datetime.fromisoformat(out["dueAt"][0].replace("Z", "+00:00")) == datetime.fromisoformat(
        out["soonAt"].replace("Z", "+00:00"))
    assert out["afterCancel"] == []
