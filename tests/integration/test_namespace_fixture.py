"""The pytest plugin's ``servicebus_namespace`` fixture (docs/emulator.md, "Several namespaces"), run as a
user's project runs it: a test project in ``tmp_path`` whose tests use only the plugin's fixtures and
azure-servicebus, under pytest-xdist with two workers.

What it shows: every test gets a namespace of its own (its own port and key) in its worker's emulator
(one emulator per worker process); a message a test leaves behind is not seen by the next test on
the same worker, nor by a test running at the same time on the other worker; and the session
namespace's key does not open a test's namespace.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = {"UserConfig": {"Namespaces": [{"Name": "app", "Queues": [{"Name": "orders", "Properties": {}}]}]}}

PROJECT_TEST = '''
import json
import os

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError

WAIT = 2  # seconds: every receive is bounded


@pytest.mark.parametrize("n", range(6))
def test_leaves_a_message_behind(servicebus_namespace, servicebus_emulator, n):
    with ServiceBusClient.from_connection_string(servicebus_namespace.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            assert receiver.peek_messages(max_message_count=10) == []  # nothing of any other test
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(f"left behind by test {n}"))
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == [f"left behind by test {n}"]
    crossed = servicebus_namespace.connection_string.replace(servicebus_namespace.key, servicebus_emulator.key)
    with ServiceBusClient.from_connection_string(crossed, retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError), client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("with the session namespace's key"))
    record = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "pid": os.getpid(),
              "emulator_port": servicebus_emulator.emulator.port, "name": servicebus_namespace.name,
              "port": servicebus_namespace.emulator.namespace(servicebus_namespace.name).port}
    with open(os.environ["NAMESPACE_RECORD"], "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\\n")


def test_the_session_namespace_saw_none_of_it(servicebus_emulator):
    with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            assert receiver.peek_messages(max_message_count=10) == []
'''


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="needs pytest-xdist")
@pytest.mark.timeout(300)
def test_every_test_gets_its_own_namespace_under_xdist(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\nsbemulator_config = "Config.json"\n')
    (project / "test_isolated.py").write_text(PROJECT_TEST, encoding="utf-8")
    record = tmp_path / "record.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["NAMESPACE_RECORD"] = str(record)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "load"],
        cwd=project, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "7 passed" in result.stdout, result.stdout
    rows = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 6
    # One emulator per worker process (its own port), a namespace of its own per test.
    emulators = {(row["worker"], row["pid"], row["emulator_port"]) for row in rows}
    assert len({row["worker"] for row in rows}) == len(emulators) == len({e[2] for e in emulators})
    per_worker: dict[str, list[dict]] = {}
    for row in rows:
        per_worker.setdefault(row["worker"], []).append(row)
    assert sorted(per_worker) == ["gw0", "gw1"]  # --dist load hands each worker a share at the start
    for worker_rows in per_worker.values():
        assert len({row["name"] for row in worker_rows}) == len(worker_rows)
        assert all(row["port"] != row["emulator_port"] for row in worker_rows)
