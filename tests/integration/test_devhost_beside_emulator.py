"""README "Run the Functions locally": devhost beside an emulator the user started (``make emulator``).

The settings name the emulator's AMQP endpoint only; devhost finds its management endpoint (and CA
certificate) the way the emulator announces it, in the ready file ``python -m sbemulator`` writes
(sbemulator/runtime/ready.py), never by guessing a port. The trigger of the ``ordered`` app is a
session queue: Service Bus refuses a non-session receiver on it ("It is not possible for an entity
that requires sessions to create a non-sessionful message receiver"), so its backlog must come from
the management API's runtime properties, and without one the app runs at its limit instead of
failing. The emulator runs as its own process on free ports; ready files go to a folder of the test's
own (``SBEMULATOR_RUN_DIR``).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient

from devhost.discovery import FunctionSpec
from devhost.host import Host, HostOptions
from devhost.scale_controller import ScaleOptions
from devhost.trigger_backlog import TriggerBacklog
from sbemulator.runtime.launcher import start_emulator_process
from sbemulator.runtime.ready import read_ready
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
requires_azurite = pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "azurite").exists(),
                                      reason="azurite is not installed (npm install)")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run"
    monkeypatch.setenv("SBEMULATOR_RUN_DIR", str(folder))  # inherited by the emulator process
    return folder


def _settings(tmp_path: Path, connection: str) -> Path:
    doc = json.loads((ROOT / "local.settings.json.example").read_text())
    doc["Values"]["ServiceBusConnection"] = connection
    # Azurite's example port swapped for a closed free one: devhost starts its own Azurite for the run
    azurite = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=x;"
               f"TableEndpoint=http://127.0.0.1:{_closed_port()}/devstoreaccount1;")
    doc["Values"]["TableStorageConnection"] = doc["Values"]["AzureWebJobsStorage"] = azurite
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps(doc))
    return path


@requires_azurite
def test_devhost_beside_a_user_started_emulator_uses_its_announced_management_endpoint(
        tmp_path: Path, run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    emulator = start_emulator_process("--config", str(ROOT / "infra" / "servicebus.json"), "--data-dir",
                                      str(tmp_path / "data"))
    try:
        info = read_ready(emulator.port)
        assert info is not None and info["admin_url"] == emulator.admin_url, info
        assert (run_dir / f"{emulator.port}.json").exists()
        settings = _settings(tmp_path, emulator.connection_string)
        caplog.set_level("INFO", logger="devhost")
        with Host(HostOptions(settings_file=settings, env={}, roles=("ordered",), scale=ScaleOptions())) as host:
            assert host.services.service_bus_connection is None  # the user's emulator, none of its own
            assert host.external_admin is not None and host.external_admin[1] == emulator.ca_path
            admin = host.admin_client()
            assert admin.get_queue_runtime_properties("ordered-writes").active_message_count == 0
            assert host.scaler is not None and host.scaler.backlog.source == "runtime properties"
        said = caplog.text
        assert f"using the emulator at 127.0.0.1:{emulator.port}" in said
        assert emulator.admin_url is not None
        assert emulator.admin_url in said and f"{emulator.admin_url}/console/" in said
        assert "Azurite started: http://127.0.0.1:" in said
    finally:
        assert emulator.terminate() == 0
    assert not (run_dir / f"{emulator.port}.json").exists()  # removed when the emulator stops
    assert read_ready(emulator.port) is None


def test_a_session_trigger_without_a_management_endpoint_runs_at_its_limit(tmp_path: Path, run_dir: Path) -> None:
    """Peeking a session queue needs a session lock, which would take the session from the app."""
    emulator = start_emulator_process("--config", str(ROOT / "infra" / "servicebus.json"), "--in-memory")
    try:
        spec = FunctionSpec(name="ordered_writer", role="ordered", function=lambda: None,
                            trigger={"type": "serviceBusTrigger", "queueName": "ordered-writes",
                                     "isSessionsEnabled": True, "connection": "ServiceBusConnection"},
                            outputs=())
        plain = FunctionSpec(name="leveler", role="leveler", function=lambda: None,
                             trigger={"type": "serviceBusTrigger", "queueName": "leveling",
                                      "connection": "ServiceBusConnection"}, outputs=())
        with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
            backlog = TriggerBacklog(lambda: None, lambda: client)
            assert backlog.active(spec, 8) == 8
            assert backlog.active(plain, 8) == 0  # a plain queue is still counted by peeking
            assert backlog.source == "peek"
    finally:
        emulator.terminate()


@requires_azurite
def test_devhost_beside_an_emulator_that_announces_no_management_endpoint_peeks_and_runs(
        tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """As beside the official emulator: no ready file where devhost looks. devhost guesses no port (it
    used to dial 443, the WebSocket port: WRONG_VERSION_NUMBER), counts plain triggers by peeking and
    runs the session-triggered app at its limit instead of dying on the session entity."""
    emulator = start_emulator_process("--config", str(ROOT / "infra" / "servicebus.json"), "--in-memory")
    try:
        monkeypatch.setenv("SBEMULATOR_RUN_DIR", str(tmp_path / "elsewhere"))  # devhost finds no ready file
        settings = _settings(tmp_path, emulator.connection_string)
        caplog.set_level("INFO", logger="devhost")
        with Host(HostOptions(settings_file=settings, env={}, roles=("ordered", "leveler"),
                              scale=ScaleOptions())) as host:
            assert host.admin_client() is None
            assert host.scaler is not None and host.scaler.backlog.source == "peek"
            assert wait_until(lambda: host.scaler is not None and host.scaler.peak("ordered") >= 1, 60)
        assert "it announced no management endpoint" in caplog.text
        assert "WRONG_VERSION_NUMBER" not in caplog.text
    finally:
        assert emulator.terminate() == 0
