"""SAS authentication through the SDK: the emulator validates tokens for real (CBS put-token).

The SDK raises ServiceBusAuthenticationError for a 401 put-token reply without passing on the
reply's description, so the reasons themselves are asserted in tests/unit/test_auth.py.
"""

from __future__ import annotations

import time

import pytest
from azure.core.credentials import AzureSasCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from sbemulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, sign


def _send_one(client: ServiceBusClient, queue: str = "orders") -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage("x"))


def _sas_client(emulator, token: str) -> ServiceBusClient:
    return ServiceBusClient(
        f"127.0.0.1:{emulator.port}", AzureSasCredential(token), use_tls=False, retry_total=0
    )


def test_wrong_key_is_refused(emulator):
    conn = emulator.connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send_one(client)


def test_unknown_key_name_is_refused(emulator):
    conn = emulator.connection_string.replace(DEFAULT_KEY_NAME, "SomeOtherPolicy")
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send_one(client)


def test_expired_token_is_refused(emulator):
    token = sign(f"sb://127.0.0.1:{emulator.port}/orders", DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) - 60)
    with _sas_client(emulator, token) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send_one(client)


def test_token_scoped_to_one_entity_does_not_open_another(emulator):
    expiry = int(time.time()) + 3600
    token = sign(f"sb://127.0.0.1:{emulator.port}/orders", DEFAULT_KEY_NAME, DEFAULT_KEY, expiry)
    with _sas_client(emulator, token) as client:
        _send_one(client, "orders")  # in scope
        with pytest.raises(ServiceBusAuthenticationError):
            _send_one(client, "retry3")


def test_namespace_wide_token_opens_every_entity(emulator):
    token = sign(f"sb://127.0.0.1:{emulator.port}/", DEFAULT_KEY_NAME, DEFAULT_KEY, int(time.time()) + 3600)
    with _sas_client(emulator, token) as client:
        _send_one(client, "orders")
        _send_one(client, "retry3")
        with client.get_queue_receiver("retry3", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            assert [str(m) for m in r.receive_messages(max_message_count=1, max_wait_time=5)] == ["x"]


def test_custom_sas_key_replaces_the_default():
    from sbemulator import Emulator
    from tests.fixtures.emulator import STANDARD_TOPOLOGY

    with Emulator(config=STANDARD_TOPOLOGY, sas_key="my-own-key") as emu:
        assert "SharedAccessKey=my-own-key" in emu.connection_string
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            _send_one(client)
        default_conn = emu.connection_string.replace("my-own-key", DEFAULT_KEY)
        with ServiceBusClient.from_connection_string(default_conn, retry_total=0) as client:
            with pytest.raises(ServiceBusAuthenticationError):
                _send_one(client)


def test_token_for_another_namespace_host_is_refused(emulator):
    """Service Bus compares the token's whole resource URI on $cbs: a token signed for another host is
    refused even with the right key; the emulator's own names (localhost, the bare host:port the Go SDK
    signs for its SharedAccessSignature connection strings) open the namespace."""
    expiry = int(time.time()) + 3600
    token = sign("sb://other.servicebus.windows.net/orders", DEFAULT_KEY_NAME, DEFAULT_KEY, expiry)
    with _sas_client(emulator, token) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send_one(client, "orders")
    for resource in (f"sb://localhost:{emulator.port}/orders", f"127.0.0.1:{emulator.port}"):
        with _sas_client(emulator, sign(resource, DEFAULT_KEY_NAME, DEFAULT_KEY, expiry)) as client:
            _send_one(client, "orders")
