"""The management port over plain HTTP, beside HTTPS: what the .NET ServiceBusAdministrationClient sends
when its connection string says ``UseDevelopmentEmulator=true``, and ``/health`` as container harnesses
probe it.

The .NET requests follow azure-sdk-for-net, sdk/servicebus/Azure.Messaging.ServiceBus/src/Administration/:
* ServiceBusAdministrationClient.cs (connection-string constructor): ``useTls`` is false when the
  connection string says UseDevelopmentEmulator=true; host and port are the Endpoint's
  (``Endpoint=sb://localhost:5300;...`` -> ``http://localhost:5300/...``); the SAS audience is
  ``BuildAudienceResource(host)``: ``https://localhost/`` (scheme https, no port, lower case; .NET's
  ``Uri.AbsoluteUri`` keeps the root path's slash), whatever the request's scheme and port (its
  SharedAccessCredential returns the signature it was built with, whatever scope is asked for).
* HttpRequestAndResponse.cs: ``GetEntityAsync`` -> ``GET /{path}?api-version=2021-05&enrich=False``
  (C#'s bool text), pages with ``&$skip=0&$top=100``; ``PutEntityAsync`` -> ``PUT /{path}?api-version=2021-05``
  with ``Content-Type: application/atom+xml`` and ``If-Match: *`` for an update; ``DeleteEntityAsync``;
  ``Authorization`` is the bare SharedAccessSignature token; 404 is MessagingEntityNotFound, 409 on a
  create MessagingEntityAlreadyExists.
* QueuePropertiesExtensions.cs ``Serialize``: the Atom entry body (elements in its order, defaults of
  CreateQueueOptions; XDocument.ToString() indents it).
``/health``: the Testcontainers wait strategies used with the official emulator probe
``GET http://<host>:5300/health`` for a 200.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest

from sbemulator import Emulator
from sbemulator.auth import sign

SB = "{http://schemas.microsoft.com/netservices/2010/10/servicebus/connect}"
ATOM = "{http://www.w3.org/2005/Atom}"
API = "api-version=2021-05"

# QueuePropertiesExtensions.Serialize for new CreateQueueOptions("dotnet-orders") { MaxDeliveryCount = 7 },
# as XDocument.ToString() writes it.
DOTNET_CREATE_QUEUE = """<entry xmlns="http://www.w3.org/2005/Atom">
  <content type="application/xml">
    <QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect">
      <LockDuration>PT1M</LockDuration>
      <MaxSizeInMegabytes>1024</MaxSizeInMegabytes>
      <RequiresDuplicateDetection>false</RequiresDuplicateDetection>
      <RequiresSession>false</RequiresSession>
      <DeadLetteringOnMessageExpiration>false</DeadLetteringOnMessageExpiration>
      <DuplicateDetectionHistoryTimeWindow>PT10M</DuplicateDetectionHistoryTimeWindow>
      <MaxDeliveryCount>7</MaxDeliveryCount>
      <EnableBatchedOperations>true</EnableBatchedOperations>
      <IsAnonymousAccessible>false</IsAnonymousAccessible>
      <Status>Active</Status>
      <EnablePartitioning>false</EnablePartitioning>
      <EnableExpress>false</EnableExpress>
    </QueueDescription>
  </content>
</entry>"""


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(config=None, in_memory=True) as running:
        yield running


def dotnet_call(emu: Emulator, method: str, target: str, body: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request as HttpRequestAndResponse.SendHttpRequestAsync sends it over the .NET HttpClient (plain
    HTTP/1.1 to the Endpoint's host and port; Azure.Core's request id and user agent headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", emu.admin_port, timeout=10)
    token = sign("https://localhost/", emu.key_name, emu.key, int(time.time()) + 3600)
    all_headers = {
        "Host": f"localhost:{emu.admin_port}",
        "Authorization": token,
        "x-ms-client-request-id": str(uuid.uuid4()),
        "x-ms-return-client-request-id": "true",
        "User-Agent": "azsdk-net-Messaging.ServiceBus/7.18.2 (.NET 8.0.11; Ubuntu 22.04.5 LTS)",
        **(headers or {}),
    }
    payload = None if body is None else body.encode("utf-8")
    if payload is not None:
        all_headers["Content-Type"] = "application/atom+xml"
    try:
        conn.request(method, target, body=payload, headers=all_headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_the_dotnet_admin_client_manages_a_queue_over_plain_http(emu: Emulator) -> None:
    status, _, body = dotnet_call(emu, "GET", f"/$namespaceinfo?{API}&enrich=False")
    assert status == 200, body
    assert ET.fromstring(body).find(f"{ATOM}content/{SB}NamespaceInfo") is not None

    status, _, body = dotnet_call(emu, "PUT", f"/dotnet-orders?{API}", DOTNET_CREATE_QUEUE)
    assert status == 201, body
    created = ET.fromstring(body)
    assert created.findtext(f"{ATOM}title") == "dotnet-orders"
    assert created.findtext(f"{ATOM}content/{SB}QueueDescription/{SB}MaxDeliveryCount") == "7"

    status, _, body = dotnet_call(emu, "PUT", f"/dotnet-orders?{API}", DOTNET_CREATE_QUEUE)
    assert status == 409, body  # MessagingEntityAlreadyExists for the .NET client

    update = DOTNET_CREATE_QUEUE.replace("<MaxDeliveryCount>7<", "<MaxDeliveryCount>9<")
    status, _, body = dotnet_call(emu, "PUT", f"/dotnet-orders?{API}", update, {"If-Match": "*"})
    assert status == 200, body

    status, _, body = dotnet_call(emu, "GET", f"/dotnet-orders?{API}&enrich=False")
    assert status == 200, body
    assert ET.fromstring(body).findtext(f"{ATOM}content/{SB}QueueDescription/{SB}MaxDeliveryCount") == "9"

    status, _, body = dotnet_call(emu, "GET", f"/$Resources/queues?{API}&enrich=False&$skip=0&$top=100")
    assert status == 200, body
    titles = [entry.findtext(f"{ATOM}title") for entry in ET.fromstring(body).findall(f"{ATOM}entry")]
    assert "dotnet-orders" in titles

    status, _, body = dotnet_call(emu, "DELETE", f"/dotnet-orders?{API}")
    assert status == 200, body
    status, _, _ = dotnet_call(emu, "GET", f"/dotnet-orders?{API}&enrich=False")
    assert status == 404  # MessagingEntityNotFound


def test_plain_http_is_authenticated_like_https(emu: Emulator) -> None:
    status, _, body = dotnet_call(emu, "GET", f"/$Resources/queues?{API}&enrich=False",
                                  headers={"Authorization": sign("https://localhost/", emu.key_name, "bad" * 11,
                                                                 int(time.time()) + 60)})
    assert status == 401, body


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_health_answers_unauthenticated_over_http_and_https(emu: Emulator, scheme: str) -> None:
    if scheme == "https":
        context = ssl.create_default_context(cafile=emu.ca_path)
        conn: http.client.HTTPConnection = http.client.HTTPSConnection("127.0.0.1", emu.admin_port,
                                                                        context=context, timeout=10)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", emu.admin_port, timeout=10)
    try:
        conn.request("GET", "/health")
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("content-type") == "application/json"
        assert b'"status": "ok"' in response.read()
    finally:
        conn.close()


def test_https_and_http_keep_alive_side_by_side(emu: Emulator) -> None:
    """Each connection keeps the protocol its first bytes chose: several requests on one plain connection
    and on one TLS connection, interleaved."""
    plain = http.client.HTTPConnection("127.0.0.1", emu.admin_port, timeout=10)
    secure = http.client.HTTPSConnection("127.0.0.1", emu.admin_port, timeout=10,
                                         context=ssl.create_default_context(cafile=emu.ca_path))
    try:
        for _ in range(3):
            for conn in (plain, secure):
                conn.request("GET", "/health")
                response = conn.getresponse()
                response.read()
                assert response.status == 200
    finally:
        plain.close()
        secure.close()


def test_bytes_that_are_neither_get_400(emu: Emulator) -> None:
    with socket.create_connection(("127.0.0.1", emu.admin_port), timeout=10) as raw:
        raw.sendall(b"\x00\x01garbage\r\n\r\n")
        assert raw.recv(4096).startswith(b"HTTP/1.1 400")
