"""The web console's HTTP API without a browser: its authorization (same keys as the management API,
nothing anonymous, the key never in URLs or logs) and what its operations do, checked with the SDK.

Dead-letter queues and resubmission follow
https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues
"""

from __future__ import annotations

import copy
import http.client
import json
import logging
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology

WAIT_S = 5
TOPOLOGY = topology(
    queues=[queue("orders"), queue("console"), queue("sessions", RequiresSession=True)],
    topics=[{"Name": "events", "Properties": {}, "Subscriptions": [
        {"Name": "a", "Properties": {}}, {"Name": "b", "Properties": {}}]}],
)


class Console:
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu
        self.context = ssl.create_default_context(cafile=emu.ca_path)
        self.cookie: str | None = None

    def call(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
             cookie: str | None = None, marker: bool = True) -> tuple[int, dict[str, str], Any]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.emu.admin_port, context=self.context, timeout=10)
        sent = {"X-Requested-With": "sbconsole"} if marker else {}
        if body is not None:
            sent["Content-Type"] = "application/json"
        cookie = cookie if cookie is not None else self.cookie
        if cookie:
            sent["Cookie"] = cookie
        sent.update(headers or {})
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None, sent)
            response = conn.getresponse()
            raw = response.read()
            data = json.loads(raw) if response.getheader("Content-Type", "").startswith("application/json") else raw
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()

    def login(self) -> dict[str, str]:
        status, headers, _ = self.call("POST", "/console/api/login",
                                       {"keyName": self.emu.key_name, "key": self.emu.key})
        assert status == 200
        self.cookie = headers["set-cookie"].split(";", 1)[0]
        return headers


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emulator:
        yield emulator


@pytest.fixture
def console(emu: Emulator) -> Console:
    return Console(emu)


def test_pages_are_public_data_is_not(console: Console) -> None:
    status, headers, body = console.call("GET", "/console/", marker=False)
    assert status == 200 and b"Sign in" in body and b"orders" not in body
    assert "script-src 'self'" in headers["content-security-policy"]
    assert console.call("GET", "/console", marker=False)[1]["location"] == "/console/"
    for api in ("overview", "entity?path=orders", "messages?path=orders", "session"):
        status, _, body = console.call("GET", f"/console/api/{api}")
        assert status == 401 and body["error"] == "Unauthorized"
    assert console.call("POST", "/console/api/purge", {"path": "orders"})[0] == 401


def test_sign_in_checks_the_namespace_keys_and_sets_a_strict_cookie(console: Console, emu: Emulator,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="sbemulator")
    wrong = console.call("POST", "/console/api/login", {"keyName": emu.key_name, "key": "guess"})
    assert wrong[0] == 401 and "set-cookie" not in wrong[1]
    unknown = console.call("POST", "/console/api/login", {"keyName": "nobody", "key": emu.key})
    assert unknown[0] == 401
    headers = console.login()
    cookie = headers["set-cookie"]
    for attribute in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/console/"):
        assert attribute in cookie
    assert emu.key not in cookie
    assert console.call("GET", "/console/api/session")[2] == {"keyName": emu.key_name, "namespace": "sbemulatorns"}
    # The API wants its marker header (a cross-site form or image cannot send it) and JSON bodies.
    assert console.call("GET", "/console/api/overview", marker=False)[0] == 400
    form = console.call("POST", "/console/api/purge", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form[0] == 400
    assert headers["set-cookie"].startswith(f"sbconsole_{emu.admin_port}=")  # one cookie per emulator
    # A forged or ended session is refused.
    assert console.call("GET", "/console/api/overview", cookie=f"sbconsole_{emu.admin_port}=forged")[0] == 401
    old = console.cookie
    assert console.call("POST", "/console/api/logout", {})[0] == 200
    assert console.call("GET", "/console/api/overview", cookie=old)[0] == 401
    assert emu.key not in caplog.text


def test_a_queue_named_console_stays_reachable_through_the_atom_api(emu: Emulator) -> None:
    assert emu.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
            emu.admin_connection_string, connection_verify=emu.ca_path) as admin:
        assert admin.get_queue("console").name == "console"
        assert admin.get_queue_runtime_properties("console").active_message_count == 0


def test_resubmit_from_a_subscription_goes_back_to_that_subscription_only(console: Console, emu: Emulator) -> None:
    console.login()
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_topic_sender("events") as sender:
            sender.send_messages(ServiceBusMessage("e1", application_properties={"Kind": "x"}))
        with client.get_subscription_receiver("events", "a", max_wait_time=WAIT_S) as receiver:
            [m] = receiver.receive_messages(max_wait_time=WAIT_S)
            receiver.dead_letter_message(m, reason="Broken", error_description="bad payload")
        page = console.call("GET", "/console/api/messages?path=events/Subscriptions/a&subQueue=deadletter")[2]
        [dead] = page["messages"]
        assert (dead["deadLetterReason"], dead["deadLetterErrorDescription"]) == ("Broken", "bad payload")
        request = {"path": "events/Subscriptions/a", "sequenceNumbers": [dead["sequenceNumber"]]}
        status, _, result = console.call("POST", "/console/api/resubmit", request)
        assert status == 200 and result == {"resubmitted": 1, "skippedLocked": 0}
        with client.get_subscription_receiver("events", "a", max_wait_time=WAIT_S) as receiver:
            [again] = receiver.receive_messages(max_wait_time=WAIT_S)
            assert str(again) == "e1" and again.dead_letter_reason is None
            assert again.application_properties == {b"Kind": b"x"}
            receiver.complete_message(again)
        # Subscription b still holds only its original copy.
        with client.get_subscription_receiver("events", "b") as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == ["e1"]
        with client.get_subscription_receiver("events", "a", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.peek_messages(max_message_count=10) == []
    # Unknown sequence numbers are a 404, nothing moves.
    missing = console.call("POST", "/console/api/resubmit", {"path": "events/Subscriptions/a", "sequenceNumbers": [99]})
    assert missing[0] == 404


def test_resubmit_leaves_a_message_a_receiver_holds_locked(console: Console, emu: Emulator) -> None:
    console.login()
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage("one"), ServiceBusMessage("two")])
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            for m in receiver.receive_messages(max_message_count=2, max_wait_time=WAIT_S):
                receiver.dead_letter_message(m, reason="Nope")
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                       max_wait_time=WAIT_S) as dlq:
            [held] = dlq.receive_messages(max_message_count=1, max_wait_time=WAIT_S)
            result = console.call("POST", "/console/api/resubmit", {"path": "orders", "all": True})[2]
            assert result == {"resubmitted": 1, "skippedLocked": 1}
            dlq.complete_message(held)
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            [back] = receiver.receive_messages(max_wait_time=WAIT_S)
            assert str(back) != str(held)


def test_purge_one_sub_queue_or_everything(console: Console, emu: Emulator) -> None:
    console.login()
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            [m] = receiver.receive_messages(max_wait_time=WAIT_S)
            receiver.dead_letter_message(m, reason="Nope")
    assert console.call("POST", "/console/api/purge", {"path": "orders", "subQueue": "deadletter"})[2] == {"purged": 1}
    counts = console.call("GET", "/console/api/entity?path=orders")[2]["counts"]
    assert (counts["active"], counts["deadLetter"]) == (2, 0)
    assert console.call("POST", "/console/api/purge", {"path": "orders", "subQueue": "all"})[2] == {"purged": 2}
    assert console.call("POST", "/console/api/purge", {"path": "ghost"})[0] == 404


def test_send_errors_are_named_like_service_bus_and_lose_nothing(console: Console, emu: Emulator) -> None:
    console.login()
    status, _, body = console.call("POST", "/console/api/send", {"path": "sessions", "body": "x"})
    assert status == 400 and "SessionId" in body["message"]
    bad_type = console.call("POST", "/console/api/send", {"path": "orders", "body": "x", "applicationProperties": [
        {"name": "Attempt", "value": "three", "type": "int"}]})
    assert bad_type[0] == 400 and "Attempt" in bad_type[2]["message"]
    bad_time = console.call("POST", "/console/api/send", {"path": "orders", "body": "x",
                                                          "scheduledEnqueueTimeUtc": "tomorrow"})
    assert bad_time[0] == 400
    assert console.call("POST", "/console/api/send", {"path": "events/Subscriptions/a", "body": "x"})[0] == 404
    counts = console.call("GET", "/console/api/entity?path=orders")[2]["counts"]
    assert counts["active"] == 0 and counts["scheduled"] == 0
    ok = console.call("POST", "/console/api/send", {"path": "sessions", "body": "x", "sessionId": "s1"})
    assert ok[0] == 200
    sessions = console.call("GET", "/console/api/entity?path=sessions")[2]["sessions"]
    assert [(s["id"], s["messageCount"]) for s in sessions] == [("s1", 1)]


def test_peek_pages_and_body_views(console: Console, emu: Emulator) -> None:
    console.login()
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
            sender.send_messages(ServiceBusMessage(b"\x00\xff"))  # not text
    first = console.call("GET", "/console/api/messages?path=orders&count=4")[2]
    assert [m["sequenceNumber"] for m in first["messages"]] == [1, 2, 3, 4] and first["more"] is True
    second = console.call("GET", f"/console/api/messages?path=orders&count=4&from={first['nextFromSequenceNumber']}")[2]
    assert [m["sequenceNumber"] for m in second["messages"]] == [5, 6] and second["more"] is False
    assert second["messages"][0]["body"]["text"] == "m4"
    binary = second["messages"][1]["body"]
    assert binary["text"] is None and binary["hex"] == "00 ff"
    # Peeking changes nothing: the SDK still receives the first message with delivery count 0.
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            [m] = receiver.receive_messages(max_wait_time=WAIT_S)
            assert str(m) == "m0" and m.delivery_count == 0


def test_new_operations_need_a_session(console: Console) -> None:
    for name in ("receive", "settle", "create-entity", "update-entity", "delete-entity", "create-rule",
                 "update-rule", "delete-rule"):
        status, _, _ = console.call("POST", f"/console/api/{name}", {"path": "orders"})
        assert status == 401, name
    assert console.call("GET", "/console/api/body?path=orders&seq=1")[0] == 401


def test_settle_refuses_what_service_bus_refuses(console: Console, emu: Emulator) -> None:
    console.login()
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("x"))
    status, _, data = console.call("POST", "/console/api/receive", {"path": "orders", "mode": "peeklock"})
    assert status == 200
    [m] = data["messages"]
    token = m["lockToken"]
    bad = [({"action": "vanish"}, "Unknown settlement"), ({"lockToken": "not-a-uuid"}, "not a UUID")]
    for change, text in bad:
        status, _, error = console.call("POST", "/console/api/settle",
                                        {"path": "orders", "lockToken": token, "action": "complete", **change})
        assert status == 400 and text in error["message"]
    ok = console.call("POST", "/console/api/settle", {"path": "orders", "lockToken": token, "action": "complete"})
    assert ok[0] == 200
    # Settled once: a second settlement finds no lock (MessageLockLost in the SDKs' terms).
    status, _, error = console.call("POST", "/console/api/settle",
                                    {"path": "orders", "lockToken": token, "action": "complete"})
    assert status == 400 and "lock" in error["message"].lower()
    status, _, error = console.call("POST", "/console/api/receive", {"path": "events", "mode": "peeklock"})
    assert status == 404  # a topic is not received from; its subscriptions are


def test_entity_changes_follow_the_management_api_rules(console: Console) -> None:
    """The console's forms are checked by the Atom API's own rules (the one table in descriptions.py)."""
    console.login()
    status, _, schema = console.call("GET", "/console/api/schema?kind=queue")
    assert status == 200
    names = {p["name"]: p for p in schema["properties"]}
    assert names["RequiresSession"]["immutable"] and "MessageCount" not in names
    cases = [({"LockDuration": "PT6M"}, "the maximum is 5 minutes"),
             ({"MaxDeliveryCount": "0"}, "expected an integer >= 1"),
             ({"LockDuration": "soon"}, "is not a duration"), ({"Nope": 1}, "not a property")]
    for props, text in cases:
        status, _, error = console.call("POST", "/console/api/create-entity",
                                        {"kind": "queue", "name": "q1", "properties": props})
        assert status == 400 and text in error["message"], (props, error)
    status, _, error = console.call("POST", "/console/api/create-entity", {"kind": "queue", "name": "bad name!"})
    assert status == 400 and "invalid" in error["message"]
    assert console.call("POST", "/console/api/create-entity", {"kind": "queue", "name": "orders"})[0] == 409
