"""devhost's local stand-ins: sbemulator through ``sbemulator.runtime.launcher``, and Azurite started the way
parallel test workers start it (several at once)."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.management import ServiceBusAdministrationClient

from devhost.local_services import LocalServiceError, LocalServices, emulator_admin_connection_string
from shared.topology import QUEUE_LEVELING
from tests.fixtures.process import REPO_ROOT, start_emulator_process

requires_azurite = pytest.mark.skipif(not (REPO_ROOT / "node_modules" / ".bin" / "azurite").exists(),
                                      reason="azurite is not installed (npm install)")


@requires_azurite
def test_azurites_started_at_once_each_get_their_own_ports_and_serve_tables() -> None:
    services = [LocalServices() for _ in range(3)]
    try:
        with ThreadPoolExecutor(len(services)) as pool:
            connections = list(pool.map(lambda s: s.start_azurite(), services))
        endpoints = {part for c in connections for part in c.split(";") if part.startswith("TableEndpoint=")}
        assert len(endpoints) == 3
        for i, connection in enumerate(connections):
            with TableServiceClient.from_connection_string(connection) as tables:
                tables.create_table(f"worker{i}")
                assert [t.name for t in tables.list_tables()] == [f"worker{i}"]  # nothing shared
    finally:
        for service in services:
            service.stop()
    assert all(service.processes == [] for service in services)


def test_a_stand_in_that_exits_before_listening_is_reported_with_its_output(monkeypatch) -> None:
    services = LocalServices()
    monkeypatch.setattr(services, "azurite_command", lambda: [sys.executable, "-c", "print('no ports for you')"])
    with pytest.raises(LocalServiceError, match="no ports for you"):
        services.start_azurite(timeout=10)
    assert services.processes == []


def test_the_emulator_starts_on_free_ports_and_reports_its_admin_endpoint() -> None:
    services = LocalServices()
    try:
        connection = services.start_service_bus(REPO_ROOT / "infra" / "servicebus.json")
        assert services.admin_url and services.admin_ca and services.admin_connection_string
        with ServiceBusClient.from_connection_string(connection) as client:
            with client.get_queue_sender(QUEUE_LEVELING) as sender:
                sender.send_messages(ServiceBusMessage("through devhost's emulator"))
            with client.get_queue_receiver(QUEUE_LEVELING, max_wait_time=5) as receiver:
                assert [str(m) for m in receiver.receive_messages(max_wait_time=5)] == ["through devhost's emulator"]
        (process,) = services.processes
    finally:
        services.stop()
    assert process.poll() is not None and services.processes == []


def test_an_emulator_that_cannot_start_is_reported_with_its_output(tmp_path: Path) -> None:
    bad = tmp_path / "topology.json"
    bad.write_text(json.dumps({"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [
        {"Name": "q", "Properties": {"LockDuration": "ten minutes"}}]}]}}))
    services = LocalServices()
    with pytest.raises(LocalServiceError, match="LockDuration"):
        services.start_service_bus(bad)
    assert services.processes == [] and services.service_bus_connection is None


def test_the_admin_connection_string_has_the_emulators_own_key_and_admin_port() -> None:
    """An emulator started with a key of its own: the management API accepts the admin connection string
    built from its data-plane one (a wrong key or port would fail with 401 or a refused connection)."""
    process = start_emulator_process("--config", str(REPO_ROOT / "infra" / "servicebus.json"), "--in-memory",
                                     "--sas-key", "a-key-of-its-own")
    try:
        assert process.admin_url is not None
        conn = emulator_admin_connection_string(process.connection_string, process.admin_url)
        assert f":{process.admin_port};" in conn and "SharedAccessKey=a-key-of-its-own;" in conn
        with ServiceBusAdministrationClient.from_connection_string(
                conn, connection_verify=process.ca_path, connection_timeout=3, read_timeout=5) as admin:
            assert admin.get_queue_runtime_properties(QUEUE_LEVELING).active_message_count == 0
    finally:
        process.terminate()
    with pytest.raises(ValueError, match="no emulator admin endpoint"):
        emulator_admin_connection_string(process.connection_string, "not a url")
