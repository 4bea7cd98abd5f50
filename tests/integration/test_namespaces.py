"""Several namespaces in one emulator (docs/emulator.md, "Several namespaces"), through the real SDKs.

Each namespace has its own AMQP port and HTTPS management port, its own entities, messages and keys.
What isolates them is what the unchanged SDKs carry: the connection string's Endpoint (host and
port) and its key. A key of one namespace does not open another: "Service Bus authentication and
authorization with Shared Access Signatures" scopes a rule to its namespace, and the token exchange
answers 401 (the SDK raises ServiceBusAuthenticationError; the management plane answers 401, which
azure-core raises as ClientAuthenticationError).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusAuthenticationError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.runtime.launcher import start_emulator_process

NOT_FOUND = (MessagingEntityNotFoundError, ServiceBusAuthenticationError)
TWO_NAMESPACES = {"UserConfig": {"Namespaces": [
    {"Name": "orders-ns", "Queues": [{"Name": "work", "Properties": {}}]},
    {"Name": "billing-ns", "Queues": [{"Name": "work", "Properties": {}}, {"Name": "invoices", "Properties": {}}],
     "SasKeys": [{"KeyName": "RootManageSharedAccessKey", "Key": "billing-secret"}]},
]}}


def _send(connection_string: str, queue: str, body: str) -> None:
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(ServiceBusMessage(body))


def _receive(connection_string: str, queue: str, wait: float = 1.0) -> list[str]:
    with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
        with client.get_queue_receiver(queue, max_wait_time=wait) as receiver:
            messages = receiver.receive_messages(max_message_count=10, max_wait_time=wait)
            for message in messages:
                receiver.complete_message(message)
            return [str(message) for message in messages]


def _admin(namespace) -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        namespace.admin_connection_string, connection_verify=namespace.ca_path)


@pytest.fixture
def two() -> Iterator[Emulator]:
    with Emulator(config=TWO_NAMESPACES, in_memory=True) as emu:
        yield emu


def test_each_namespace_of_the_file_has_its_own_port_entities_and_messages(two):
    orders, billing = two.namespace("orders-ns"), two.namespace("Billing-NS")  # names are case-insensitive
    assert [n.name for n in two.namespaces] == ["orders-ns", "billing-ns"]
    assert orders.connection_string == two.connection_string and orders.port == two.port
    assert billing.port != orders.port and "SharedAccessKey=billing-secret;" in billing.connection_string
    _send(orders.connection_string, "work", "for orders")
    _send(billing.connection_string, "work", "for billing")
    assert _receive(billing.connection_string, "work") == ["for billing"]
    assert _receive(orders.connection_string, "work") == ["for orders"]
    _send(billing.connection_string, "invoices", "only in billing")
    # A missing entity: the SDK raises either, depending on whether the token exchange (404) or the
    # attach (amqp:not-found) tells it first (docs/emulator.md, "Behaviour worth knowing").
    with pytest.raises(NOT_FOUND):
        _send(orders.connection_string, "invoices", "no such queue here")
    with _admin(orders) as admin, pytest.raises(ResourceNotFoundError):
        admin.get_queue("invoices")


def test_a_key_of_one_namespace_does_not_open_another(two, caplog):
    """A token signed with orders-ns's key, presented to billing-ns: refused as a wrong signature (401
    InvalidSignature from $cbs, so the SDK raises ServiceBusAuthenticationError), on the data plane and
    on the management plane."""
    orders, billing = two.namespace("orders-ns"), two.namespace("billing-ns")
    crossed = billing.connection_string.replace("billing-secret", orders.key)
    with caplog.at_level(logging.WARNING, logger="sbemulator"), pytest.raises(ServiceBusAuthenticationError):
        _send(crossed, "work", "signed with the other namespace's key")
    assert any("put-token refused" in r.getMessage() and "InvalidSignature" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    crossed_admin = billing.admin_connection_string.replace("billing-secret", orders.key)
    admin = ServiceBusAdministrationClient.from_connection_string(crossed_admin, connection_verify=billing.ca_path)
    with admin, pytest.raises(ClientAuthenticationError):
        admin.get_queue("work")
    assert _receive(billing.connection_string, "work", wait=0.5) == []  # nothing got in


def test_the_administration_client_lands_in_the_namespace_its_endpoint_names(two):
    orders, billing = two.namespace("orders-ns"), two.namespace("billing-ns")
    assert orders.ca_path == billing.ca_path  # one CA for the whole emulator: trusted once
    with _admin(billing) as admin:
        admin.create_queue("audit")
        assert sorted(q.name for q in admin.list_queues()) == ["audit", "invoices", "work"]
        assert admin.get_namespace_properties().name == "billing-ns"
    with _admin(orders) as admin:
        assert [q.name for q in admin.list_queues()] == ["work"]
    _send(billing.connection_string, "audit", "created through the management API")
    assert _receive(billing.connection_string, "audit") == ["created through the management API"]


def test_a_namespace_added_at_run_time_is_fresh_has_its_own_key_and_removal_frees_it(two):
    added = two.add_namespace("per-test")
    assert added.key != two.key  # a generated key: the first namespace's string does not open it
    assert [q.name for q in added.config.queues] == ["work"]  # the first namespace's configured entities
    _send(two.connection_string, "work", "in the first namespace")
    assert _receive(added.connection_string, "work", wait=0.5) == []
    _send(added.connection_string, "work", "in the added one")
    with pytest.raises(ServiceBusAuthenticationError):
        _send(added.connection_string.replace(added.key, two.key), "work", "wrong key")
    with pytest.raises(ValueError, match="already has a namespace"):
        two.add_namespace("PER-TEST")
    port = added.port
    two.remove_namespace("per-test")
    with pytest.raises(KeyError, match="no namespace 'per-test'"):
        two.namespace("per-test")
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.settimeout(5)
        probe.connect(("127.0.0.1", port))
    again = two.add_namespace("per-test")  # in memory: a new one, empty
    assert _receive(again.connection_string, "work", wait=0.5) == []
    assert _receive(two.connection_string, "work") == ["in the first namespace"]


def test_one_advance_moves_the_clock_of_every_namespace():
    with Emulator(config=TWO_NAMESPACES, in_memory=True, clock="manual") as emu:
        billing = emu.namespace("billing-ns")
        with ServiceBusClient.from_connection_string(billing.connection_string) as client:
            with client.get_queue_sender("work") as sender:
                sender.schedule_messages(ServiceBusMessage("later"), emu.now() + timedelta(hours=1))
        assert _receive(billing.connection_string, "work", wait=0.5) == []
        emu.advance(3600)
        assert _receive(billing.connection_string, "work") == ["later"]


def test_durable_namespaces_keep_their_messages_in_their_own_directories(tmp_path):
    with Emulator(config=TWO_NAMESPACES, in_memory=False, data_dir=tmp_path, admin_port=None) as emu:
        _send(emu.namespace("billing-ns").connection_string, "work", "kept")
        added = emu.add_namespace("added-ns", sas_key="added-secret")
        _send(added.connection_string, "work", "kept too")
    assert (tmp_path / "sbemulator.db").is_file()  # the first namespace: the one-namespace layout
    assert (tmp_path / "namespaces" / "billing-ns" / "sbemulator.db").is_file()
    with Emulator(config=TWO_NAMESPACES, in_memory=False, data_dir=tmp_path, admin_port=None) as emu:
        assert _receive(emu.namespace("billing-ns").connection_string, "work") == ["kept"]
        assert _receive(emu.connection_string, "work", wait=0.5) == []
        added = emu.add_namespace("added-ns", sas_key="added-secret")
        assert _receive(added.connection_string, "work") == ["kept too"]


def test_the_command_line_lists_every_namespace_in_its_ready_line(tmp_path):
    import json

    config = tmp_path / "Config.json"
    config.write_text(json.dumps(TWO_NAMESPACES), encoding="utf-8")
    process = start_emulator_process("--config", str(config), "--in-memory", "--no-websocket")
    try:
        billing = process.namespaces["billing-ns"]
        assert "SharedAccessKey=billing-secret;" in billing and f":{process.port};" not in billing
        assert set(process.namespace_admin_urls) == {"billing-ns"}
        _send(billing, "invoices", "over the command line's second namespace")
        assert _receive(billing, "invoices") == ["over the command line's second namespace"]
        with pytest.raises(NOT_FOUND):
            _send(process.connection_string, "invoices", "not in the first")
    finally:
        assert process.terminate() == 0


def test_faults_and_purges_through_the_plugin_stay_in_their_namespace(two):
    """What the pytest plugin's ServiceBusNamespace does to its namespace (docs/emulator.md, "Fault
    injection", per namespace) leaves the others alone: a ServerBusy fault on one fails only its sends,
    a purge of one removes only its messages."""
    from azure.servicebus.exceptions import ServiceBusServerBusyError

    from sbemulator.pytest_plugin import ServiceBusEmulator

    session = ServiceBusEmulator(two)
    billing = session.namespace("billing-ns")
    with billing.inject("send", "server-busy", "work"):
        with pytest.raises(ServiceBusServerBusyError):
            _send(billing.connection_string, "work", "refused")
        _send(session.connection_string, "work", "the first namespace is not faulted")
    _send(billing.connection_string, "work", "after the fault")
    assert billing.purge() == 1
    assert _receive(session.connection_string, "work") == ["the first namespace is not faulted"]
