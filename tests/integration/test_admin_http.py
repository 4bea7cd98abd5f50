"""The admin port at the HTTP level: TLS with the emulator's CA, SAS authentication, the error status and
body Service Bus returns for bad input, health, and the test-support purge and reset operations."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.admin.arm_auth import bearer_token
from sbemulator.auth import sign

QUEUE_XML = (
    '<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
    '<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">'
    "{fields}</QueueDescription></content></entry>"
)


def connect(emu: Emulator, host: str = "127.0.0.1") -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=emu.ca_path)
    return http.client.HTTPSConnection(host, emu.admin_port, context=context, timeout=10)


def call(emu: Emulator, method: str, path: str, body: bytes | str | None = None, *, auth: str | None = "sas",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = connect(emu)
    all_headers = dict(headers or {})
    if auth == "sas":
        all_headers["Authorization"] = sign(f"https://127.0.0.1:{emu.admin_port}", emu.key_name, emu.key,
                                            int(time.time()) + 300)
    elif auth is not None:
        all_headers["Authorization"] = auth
    try:
        conn.request(method, path, body=body, headers=all_headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def assert_error(result: tuple[int, dict[str, str], bytes], status: int, text: str = "") -> None:
    code, headers, body = result
    assert code == status, body
    assert f"<Error><Code>{status}</Code><Detail>".encode() in body
    assert text.encode() in body
    assert headers["content-type"].startswith("application/xml")


def test_health_needs_no_token(emulator: Emulator) -> None:
    status, headers, body = call(emulator, "GET", "/health", auth=None)
    assert headers["content-type"] == "application/json"
    assert status == 200
    assert json.loads(body)["status"] == "ok"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_certificate_is_trusted_through_the_ca_for_loopback_names(emulator: Emulator, host: str) -> None:
    conn = connect(emulator, host)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    conn.close()


def test_without_the_ca_the_certificate_is_not_trusted(emulator: Emulator) -> None:
    conn = http.client.HTTPSConnection("127.0.0.1", emulator.admin_port, context=ssl.create_default_context(),
                                       timeout=10)
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/health")
    conn.close()


def test_keep_alive_serves_several_requests_on_one_connection(emulator: Emulator) -> None:
    conn = connect(emulator)
    for _ in range(3):
        conn.request("GET", "/health")
        response = conn.getresponse()
        assert response.status == 200
        response.read()
    conn.close()


def test_missing_wrong_or_expired_tokens_get_401(emulator: Emulator) -> None:
    assert_error(call(emulator, "GET", "/orders", auth=None), 401, "Authorization")
    assert_error(call(emulator, "GET", "/orders", auth="Bearer abc"), 401)
    forged = sign("https://127.0.0.1/", emulator.key_name, "wrong-key", int(time.time()) + 300)
    assert_error(call(emulator, "GET", "/orders", auth=forged), 401, "signature")
    expired = sign("https://127.0.0.1/", emulator.key_name, emulator.key, int(time.time()) - 10)
    assert_error(call(emulator, "GET", "/orders", auth=expired), 401, "expired")
    # A token scoped to one entity does not cover another.
    scoped = sign("https://127.0.0.1/orders", emulator.key_name, emulator.key, int(time.time()) + 300)
    assert call(emulator, "GET", "/orders", auth=scoped)[0] == 200
    assert_error(call(emulator, "GET", "/retry3", auth=scoped), 401)


def test_bad_atom_input_gets_service_bus_errors(emulator: Emulator) -> None:
    assert_error(call(emulator, "PUT", "/q1", b"<entry><content>"), 400, "not well-formed XML")
    assert_error(call(emulator, "PUT", "/q1", b""), 400, "empty")
    assert_error(call(emulator, "PUT", "/q1", b"<feed/>"), 400)
    assert_error(call(emulator, "PUT", "/q1", QUEUE_XML.format(fields="<LockDuration>soon</LockDuration>")),
                 400, "LockDuration")
    assert_error(call(emulator, "PUT", "/q1", QUEUE_XML.format(fields="<MaxDeliveryCount>0</MaxDeliveryCount>")),
                 400, "MaxDeliveryCount")
    assert_error(call(emulator, "PUT", "/q1", QUEUE_XML.format(fields="<RequiresSession>maybe</RequiresSession>")),
                 400, "RequiresSession")
    assert_error(call(emulator, "PUT", "/bad%20name", QUEUE_XML.format(fields="")), 400, "invalid")
    assert_error(call(emulator, "PUT", "/" + "x" * 261, QUEUE_XML.format(fields="")), 400, "260")
    assert_error(call(emulator, "PUT", "/orders", QUEUE_XML.format(fields="")), 409, "already exists")
    assert_error(call(emulator, "PUT", "/ghost", QUEUE_XML.format(fields=""), headers={"If-Match": "*"}), 404)
    assert_error(call(emulator, "GET", "/ghost"), 404, "could not be found")
    assert_error(call(emulator, "DELETE", "/ghost"), 404)
    assert_error(call(emulator, "GET", "/events/Subscriptions/ghost"), 404)
    assert_error(call(emulator, "GET", "/events/Subscriptions/all/Rules/ghost"), 404)
    rule = ('<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription '
            'xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" '
            'xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><Filter i:type="MagicFilter"/></RuleDescription>'
            "</content></entry>")
    assert_error(call(emulator, "PUT", "/events/Subscriptions/all/Rules/r", rule), 400, "MagicFilter")
    # Entity-expansion documents are refused outright.
    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><entry>&a;</entry>'
    assert_error(call(emulator, "PUT", "/q2", bomb), 400)
    # A valid create still works after all that.
    status, headers, body = call(emulator, "PUT", "/q1", QUEUE_XML.format(fields="<MaxDeliveryCount>3"
                                                                          "</MaxDeliveryCount>"))
    assert status == 201 and b"<MaxDeliveryCount>3</MaxDeliveryCount>" in body
    assert headers["content-type"].startswith("application/atom+xml")


def test_bad_arm_input_gets_arm_errors(emulator: Emulator) -> None:
    base = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/ns"
    status, _, body = call(emulator, "PUT", f"{base}/queues/q?api-version=2024-01-01", b"{}", auth=None)
    assert status == 401 and json.loads(body)["error"]["code"] == "AuthenticationFailed"
    bearer = "Bearer " + bearer_token(f"https://127.0.0.1:{emulator.admin_port}/", emulator.key_name, emulator.key,
                                      int(time.time()) + 300)
    status, _, body = call(emulator, "PUT", f"{base}/queues/q?api-version=2024-01-01", b"{not json",
                           auth=bearer)
    assert status == 400 and "not valid JSON" in json.loads(body)["error"]["message"]
    status, _, body = call(emulator, "PUT", f"{base}/queues/q", b'{"properties": {"colour": 1}}', auth=bearer)
    assert status == 400 and "colour" in json.loads(body)["error"]["message"]
    status, _, body = call(emulator, "GET", f"{base}/queues/ghost", auth=bearer)
    assert status == 404 and json.loads(body)["error"]["code"] == "NotFound"
    status, _, _ = call(emulator, "GET", "/subscriptions/s/resourceGroups/rg/providers/Other/x", auth=bearer)
    assert status == 404


def test_malformed_http_is_answered_400_and_closed(emulator: Emulator) -> None:
    context = ssl.create_default_context(cafile=emulator.ca_path)
    with socket.create_connection(("127.0.0.1", emulator.admin_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            data = tls.recv(4096)
    assert data.startswith(b"HTTP/1.1 400")


def test_purge_empties_an_entity_and_its_dead_letters(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        with sb.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(str(i)) for i in range(4)])
        with sb.get_queue_receiver("orders") as receiver:
            (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            receiver.dead_letter_message(msg, reason="x")
        with sb.get_topic_sender("events") as sender:
            sender.send_messages(ServiceBusMessage("e", application_properties={"Priority": "High"}))
    status, _, body = call(emulator, "POST", "/$admin/purge/orders")
    assert status == 200 and json.loads(body) == {"purged": 4}
    status, _, body = call(emulator, "POST", "/$admin/purge/events")  # a topic: all its subscriptions
    assert status == 200 and json.loads(body) == {"purged": 2}
    assert emulator.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as admin:
        assert admin.get_queue_runtime_properties("orders").total_message_count == 0
        assert admin.get_subscription_runtime_properties("events", "all").total_message_count == 0
    assert_error(call(emulator, "POST", "/$admin/purge/ghost"), 404)
    assert_error(call(emulator, "POST", "/$admin/purge/orders", auth=None), 401)


def test_reset_restores_the_configured_namespace(emulator: Emulator) -> None:
    assert emulator.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as admin:
        admin.create_queue("scratch")
        admin.create_subscription("events", "temp")
        admin.delete_queue("retry3")
        admin.update_queue(admin.get_queue("orders"), max_delivery_count=9)
        admin.delete_rule("events", "high", "high")
        with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
            with sb.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("left over"))

        status, _, body = call(emulator, "POST", "/$admin/reset")
        assert status == 200 and json.loads(body) == {"deleted": 2, "purged": 1}

        queues = [q.name for q in admin.list_queues()]
        assert "scratch" not in queues and "retry3" in queues
        assert admin.get_queue("orders").max_delivery_count == 3
        assert admin.get_queue_runtime_properties("orders").total_message_count == 0
        assert [s.name for s in admin.list_subscriptions("events")] == ["all", "high"]
        assert [r.name for r in admin.list_rules("events", "high")] == ["high"]


def test_atom_and_arm_tokens_are_checked_against_the_whole_resource_uri(emulator: Emulator) -> None:
    """Service Bus compares a token's whole resource URI, scheme and host included: a token signed for
    another namespace's host is refused on Atom and ARM, one for any of the emulator's own names (its
    loopback addresses, localhost) or for the bare host (the Go SDK's CreateConnectionStringWithSASUsingExpiry
    signs ``host:port``, meaning the whole namespace) is accepted."""
    expiry = int(time.time()) + 300
    port = emulator.admin_port
    for resource in (f"https://localhost:{port}/", f"https://[::1]:{port}/", f"sb://127.0.0.1:{port}",
                     f"127.0.0.1:{port}", "localhost"):
        assert call(emulator, "GET", "/orders", auth=sign(resource, emulator.key_name, emulator.key, expiry))[0] == 200
    for resource in ("https://other.servicebus.windows.net/", "https://other.servicebus.windows.net/orders",
                     "other.servicebus.windows.net", f"ftp://127.0.0.1:{port}/"):
        assert_error(call(emulator, "GET", "/orders", auth=sign(resource, emulator.key_name, emulator.key, expiry)),
                     401, "InvalidAudience")
    base = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/ns"
    own = "Bearer " + bearer_token(f"https://localhost:{port}/", emulator.key_name, emulator.key, expiry)
    assert call(emulator, "GET", f"{base}/queues/orders?api-version=2024-01-01", auth=own)[0] == 200
    other = "Bearer " + bearer_token("https://other.servicebus.windows.net/", emulator.key_name, emulator.key, expiry)
    status, _, body = call(emulator, "GET", f"{base}/queues/orders?api-version=2024-01-01", auth=other)
    assert status == 401 and json.loads(body)["error"]["code"] == "InvalidAuthenticationToken"
    assert "other.servicebus.windows.net" in json.loads(body)["error"]["message"]
