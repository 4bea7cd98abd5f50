"""devhost's local Azurite, started the way parallel test workers start it: several at once."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.data.tables import TableServiceClient

from devhost.local_services import LocalServiceError, LocalServices
from tests.fixtures.process import REPO_ROOT

requires_azurite = pytest.mark.skipif(not (REPO_ROOT / "node_modules" / ".bin" / "azurite").exists(),
                                      reason="azurite is not installed (npm install)")


@requires_azurite
def test_azurites_started_at_once_each_get_their_own_ports_and_serve_tables() -> None:
    services = [LocalServices() for _ in range(3)]
    try:
        with ThreadPoolExecutor(len(services)) as pool:
            connections = list(pool.map(lambda s: s.start_azurite(timeout=30), services))
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
