"""README "Run the Functions locally" from a fresh clone: the example settings, copied, run as written.

``local.settings.json.example`` names the local emulators' loopback endpoints. With nothing listening
there, devhost stands in sbemulator and Azurite itself (free ports, in memory), as ``make demo`` does;
a real namespace that does not answer is still an error. The example's fixed ports (5672, 10002) are
swapped for closed free ones here, so another emulator a developer runs cannot answer for them
(tests/README.md: free ports only).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from devhost.host import Host, HostError, HostOptions
from devhost.local_services import is_local_service_bus, is_local_storage
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
requires_azurite = pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "azurite").exists(),
                                      reason="azurite is not installed (npm install)")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _example_settings(tmp_path: Path, **values: str) -> Path:
    doc = json.loads((ROOT / "local.settings.json.example").read_text())
    sb, table = _closed_port(), _closed_port()
    doc["Values"]["ServiceBusConnection"] = doc["Values"]["ServiceBusConnection"].replace(
        "sb://127.0.0.1;", f"sb://127.0.0.1:{sb};")
    azurite = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=x;"
               f"TableEndpoint=http://127.0.0.1:{table}/devstoreaccount1;")
    doc["Values"]["TableStorageConnection"] = doc["Values"]["AzureWebJobsStorage"] = azurite
    doc["Values"].update(values)
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_example_settings_name_the_local_emulators() -> None:
    values = json.loads((ROOT / "local.settings.json.example").read_text())["Values"]
    assert is_local_service_bus(values["ServiceBusConnection"])
    assert is_local_storage(values["TableStorageConnection"]) and is_local_storage(values["AzureWebJobsStorage"])
    real = "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v"
    assert not is_local_service_bus(real)
    assert not is_local_service_bus(real + ";UseDevelopmentEmulator=true")  # not loopback: never stood in for
    assert not is_local_storage("DefaultEndpointsProtocol=https;AccountName=contoso;AccountKey=x")


@pytest.mark.slow
@requires_azurite
def test_devhost_with_the_example_settings_starts_the_emulator_and_azurite_and_runs_the_pipeline(
        tmp_path: Path) -> None:
    settings = _example_settings(tmp_path, SENDER_SCHEDULE="*/1 * * * * *", SENDER_BATCH_SIZE="2",
                                 CONSUMER_WORK_MS_HIGH="0", CONSUMER_WORK_MS_LOW="0", RESULTS_TABLE="readmerun",
                                 LEVELER_MAX_WRITES_PER_SECOND="100")
    configured = json.loads(settings.read_text())["Values"]
    options = HostOptions(settings_file=settings, env={}, roles=("sender", "consumer-high", "consumer-low", "leveler"),
                          instances={"consumer-high": 1, "consumer-low": 1, "leveler": 1})
    with Host(options) as host:
        assert host.settings is not None
        assert len(host.services.processes) == 2  # sbemulator and Azurite, both started by the host
        assert host.settings.get("ServiceBusConnection") != configured["ServiceBusConnection"]
        assert host.settings.get("TableStorageConnection") == host.services.storage_connection
        assert host.settings.get("AzureWebJobsStorage") == host.services.storage_connection
        table = host.table_client("readmerun")

        def rows() -> int:
            try:
                return len(list(table.list_entities()))
            except Exception:  # the leveler creates the table on its first write
                return 0

        assert wait_until(lambda: rows() >= 4, 120), "nothing reached the table through the stand-ins"
        processes = list(host.services.processes)
    assert all(process.poll() is not None for process in processes)  # stopped with the host


def test_a_real_namespace_that_does_not_answer_is_an_error_not_a_stand_in(tmp_path: Path) -> None:
    settings = _example_settings(tmp_path)
    doc = json.loads(settings.read_text())
    # not an emulator's connection string (no UseDevelopmentEmulator): devhost must not replace it
    doc["Values"]["ServiceBusConnection"] = (f"Endpoint=sb://127.0.0.1:{_closed_port()}/;"
                                             "SharedAccessKeyName=k;SharedAccessKey=v")
    settings.write_text(json.dumps(doc))
    host = Host(HostOptions(settings_file=settings, env={}, roles=("consumer-high",), connect_timeout=1))
    with pytest.raises(HostError, match="ServiceBusConnection"):
        host.start()
    assert host.services.processes == []


def test_a_missing_settings_file_says_to_copy_the_example(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "devhost", "--settings", str(tmp_path / "local.settings.json"),
                             "--duration", "1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "cp local.settings.json.example local.settings.json" in result.stderr
