"""Errors that name the problem: what a user sees when something is wrong, in one line each.

A refused put-token is logged once at the default level (WARNING) with the key name, the entity and
the reason, and the reason is the put-token reply's status description (what Service Bus's own
replies carry; "AMQP 1.0 in Azure Service Bus: claims-based authorization"). A topology file with
several mistakes lists all of them; under the pytest plugin a bad or missing one is one usage error.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
import subprocess
import sys
import time

import pytest
from azure.core.credentials import AzureSasCredential
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusAuthenticationError

from sbemulator import Emulator
from sbemulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, sign
from tests.fixtures.process import REPO_ROOT


def refused_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sbemulator" and "put-token refused" in r.getMessage()]


@pytest.mark.parametrize(("key_name", "key", "expiry", "resource", "reason"), [
    (DEFAULT_KEY_NAME, "not-the-key", 3600, "", "invalid signature"),
    ("SomeOtherPolicy", DEFAULT_KEY, 3600, "", "unknown shared access key name"),
    (DEFAULT_KEY_NAME, DEFAULT_KEY, -60, "", "expired"),
    (DEFAULT_KEY_NAME, DEFAULT_KEY, 3600, "/retry3", "does not cover"),
])
def test_a_refused_put_token_is_logged_once_with_key_entity_and_reason(
        emulator: Emulator, caplog: pytest.LogCaptureFixture, key_name: str, key: str, expiry: int,
        resource: str, reason: str) -> None:
    caplog.set_level(logging.WARNING, logger="sbemulator")
    caplog.set_level(logging.DEBUG, logger="azure.servicebus._pyamqp.cbs")
    token = sign(f"sb://127.0.0.1:{emulator.port}{resource}", key_name, key, int(time.time()) + expiry)
    client = ServiceBusClient(f"127.0.0.1:{emulator.port}", AzureSasCredential(token), use_tls=False,
                              retry_total=0)
    with client, pytest.raises(ServiceBusAuthenticationError):
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("x"))
    deadline = time.monotonic() + 5
    while not refused_records(caplog) and time.monotonic() < deadline:
        time.sleep(0.05)
    [record] = refused_records(caplog)
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert repr(key_name) in message and "orders" in message and reason in message
    assert "sig=" not in message and "not-the-key" not in message  # neither the token nor a key is logged
    # The reason reached the SDK: its CBS client records the reply's status description (the exception it
    # raises then says only amqp:client-error).
    sdk = [r.getMessage() for r in caplog.records if r.name == "azure.servicebus._pyamqp.cbs"]
    assert any("401" in m and reason in m for m in sdk), sdk


# ---------------------------------------------------------------------- a topology with several mistakes
THREE_MISTAKES = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [
    {"Name": "a", "Properties": {"LockDuration": "ten minutes", "MaxDeliveryCount": "three"}},
    {"Name": "b", "Properties": {"Colour": "blue"}},
]}]}}


def test_a_topology_with_several_mistakes_reports_all_of_them(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(THREE_MISTAKES))
    result = subprocess.run([sys.executable, "-m", "sbemulator", "--config", str(bad), "--in-memory", "--port", "0"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "3 problems" in result.stderr
    for where in ("Queues[0].Properties.LockDuration", "Queues[0].Properties.MaxDeliveryCount",
                  "Queues[1].Properties.Colour"):
        assert f"{bad}: UserConfig.Namespaces[0].{where}" in result.stderr


# ---------------------------------------------------------------------- the pytest plugin
@pytest.mark.parametrize("topology", ["missing", "invalid", "bad clock"])
def test_the_pytest_plugin_reports_a_bad_topology_once_as_a_usage_error(tmp_path, topology: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    if topology == "invalid":
        (project / "Config.json").write_text(json.dumps(THREE_MISTAKES))
    if topology == "bad clock":
        (project / "pytest.ini").write_text("[pytest]\nsbemulator_clock = manaul\n")
    else:
        (project / "pytest.ini").write_text("[pytest]\nsbemulator_config = Config.json\n")
    (project / "test_many.py").write_text(
        "def test_one(servicebus_emulator):\n    pass\n\n"
        "def test_two(servicebus_emulator):\n    pass\n\n"
        "def test_three(clean_servicebus_emulator):\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                            capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert output.count("sbemulator:") == 1 and "Traceback" not in output
    expected = {"missing": "does not exist", "invalid": "3 problems", "bad clock": "not 'manaul'"}[topology]
    assert expected in output, output


# ---------------------------------------------------------------------- instructions that work
def test_the_readme_lists_every_cli_option_and_make_emulator_takes_args() -> None:
    from sbemulator.runtime.cli import build_parser

    readme = (REPO_ROOT / "README.md").read_text()
    options = [flag for action in build_parser()._actions for flag in action.option_strings
               if flag.startswith("--") and flag != "--help"]
    assert options and [flag for flag in options if f"`{flag}" not in readme] == []
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "-m sbemulator --config infra/servicebus.json $(ARGS)" in makefile
    assert 'make emulator ARGS="' in readme


def test_make_emulator_passes_args(tmp_path) -> None:
    """`make -n` prints the command make would run, with ARGS in it (nothing is started)."""
    result = subprocess.run(["make", "-n", "emulator", "ARGS=--port 0 --in-memory"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "-m sbemulator --config infra/servicebus.json --port 0 --in-memory" in result.stdout


@pytest.mark.parametrize(("keyword", "hint"), [
    ("port", "port=0 picks a free port"),
    ("admin_port", "admin_port=0 picks a free port, admin_port=None serves none"),
    ("websocket_port", "websocket_port=0 picks a free port, websocket_port=None serves none"),
])
def test_a_port_in_use_names_the_argument_that_moves_it_in_python_too(keyword: str, hint: str) -> None:
    """`Emulator(...)` on a taken port: still an OSError (EADDRINUSE), and its message says which listener
    and which argument moves it, as the command line names its option."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError) as refused:
            with Emulator(config={"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": []}]}}, in_memory=True,
                          **{keyword: port}):
                pass
    assert refused.value.errno == errno.EADDRINUSE
    assert f"cannot listen on 127.0.0.1:{port}" in str(refused.value) and hint in str(refused.value)


def test_refused_put_tokens_in_a_loop_are_logged_at_a_bounded_rate_then_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    # A client retrying a bad token (or a hostile one) must not fill the log with a line per attempt:
    # per connection, RefusalLog.per_window lines a window, then one line with how many were left out.
    from sbemulator.amqp.message import ParsedMessage
    from sbemulator.amqp.performatives import Properties
    from sbemulator.auth import SasValidator
    from sbemulator.gateway.cbs import RefusalLog, handle_put_token

    audience = "sb://h/orders"
    token = sign(audience, DEFAULT_KEY_NAME, "not-the-key", int(time.time()) + 600)
    request = ParsedMessage(properties=Properties(message_id="1"), body_sections=[(0x77, token)],
                            application_properties={"operation": "put-token", "type": "jwt", "name": audience})
    now = [100.0]
    refusals = RefusalLog(per_window=5, window_s=60.0, clock=lambda: now[0])
    validator = SasValidator({DEFAULT_KEY_NAME: DEFAULT_KEY})
    caplog.set_level(logging.WARNING, logger="sbemulator")
    for _ in range(50):
        assert handle_put_token(request, validator, time.time(), None, refusals).status_code == 401
    assert len(refused_records(caplog)) == 5
    now[0] += 61  # the next window: the count of what was left out, then lines again
    handle_put_token(request, validator, time.time(), None, refusals)
    messages = [r.getMessage() for r in caplog.records if r.name == "sbemulator"]
    assert "45 more put-token refusals in the last 60 s were not logged" in messages
    assert len(refused_records(caplog)) == 6
