"""The command line: ready line with the connection string, clean exit, clear config errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, TransportType

from tests.fixtures.process import REPO_ROOT, start_emulator_process


def test_ready_line_connection_string_works_and_sigterm_exits_zero(tmp_path):
    proc = start_emulator_process("--config", str(REPO_ROOT / "infra" / "servicebus.json"), "--in-memory")
    try:
        assert "UseDevelopmentEmulator=true" in proc.connection_string
        with ServiceBusClient.from_connection_string(proc.connection_string) as client:
            with client.get_queue_sender("leveling") as sender:
                sender.send_messages(ServiceBusMessage("hello"))
            with client.get_queue_receiver("leveling", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
                assert [str(m) for m in r.receive_messages(max_wait_time=5)] == ["hello"]
    finally:
        assert proc.terminate() == 0


def test_invalid_config_exits_non_zero_naming_file_and_path(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [
        {"Name": "q", "Properties": {"LockDuration": "ten minutes"}}]}]}}))
    result = subprocess.run(
        [sys.executable, "-m", "sbemulator", "--config", str(bad), "--in-memory", "--port", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert str(bad) in result.stderr
    assert "Queues[0].Properties.LockDuration" in result.stderr


def test_unparseable_json_is_reported(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    result = subprocess.run(
        [sys.executable, "-m", "sbemulator", "--config", str(bad), "--in-memory", "--port", "0"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert "broken.json" in result.stderr


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_peek_lock_and_settlement_work_on_either_event_loop(tmp_path, loop):
    # --loop uvloop is optional (uvloop is in requirements-dev.txt so the benchmarks measure it side by
    # side); on it the emulator must behave exactly as on the standard loop, durable store included.
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    proc = start_emulator_process("--config", str(REPO_ROOT / "infra" / "servicebus.json"),
                                  "--data-dir", str(tmp_path / "data"), "--loop", loop)
    try:
        with ServiceBusClient.from_connection_string(proc.connection_string) as client:
            with client.get_queue_sender("leveling") as sender:
                sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(250)])  # > one take of credit
            with client.get_queue_receiver("leveling", prefetch_count=100) as receiver:
                seen: list[str] = []
                abandoned = False
                while len(seen) < 250:
                    batch = receiver.receive_messages(max_message_count=100, max_wait_time=5)
                    assert batch, f"only {len(seen)} of 250 arrived"
                    for message in batch:
                        if not abandoned:  # one goes back and comes again, counted
                            receiver.abandon_message(message)
                            abandoned = True
                            continue
                        receiver.complete_message(message)
                        seen.append(str(message))
            assert sorted(seen) == sorted(f"m{i}" for i in range(250))
            with client.get_queue_receiver("leveling") as receiver:
                assert receiver.peek_messages(max_message_count=5) == []
    finally:
        assert proc.terminate() == 0


# ---------------------------------------------------------------------- ports: defaults and collisions
def test_fixed_default_ports_go_with_the_default_amqp_port_only():
    """A second emulator started with ``--port N`` must not collide with the first on 5300 (management)
    or 443 (WebSockets): with any other --port those pick free ports unless given."""
    from sbemulator.runtime.cli import parse_args

    default = parse_args(["--config", "c.json"])
    assert (default.port, default.admin_port, default.websocket_port) == (5672, 5300, 443)
    moved = parse_args(["--config", "c.json", "--port", "5673"])
    assert (moved.port, moved.admin_port, moved.websocket_port) == (5673, 0, 0)
    given = parse_args(["--config", "c.json", "--port", "5673", "--admin-port", "5301", "--websocket-port", "8443"])
    assert (given.admin_port, given.websocket_port) == (5301, 8443)


@pytest.mark.parametrize(("flag", "hint"), [
    ("--port", "--port N moves it"),
    ("--admin-port", "--admin-port N moves it"),
    ("--websocket-port", "--websocket-port N moves it"),
])
def test_a_port_in_use_names_the_flag_that_moves_it(flag, hint):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--port": "0", "--admin-port": "0", "--websocket-port": "0", flag: str(port)}
        args = [a for name, value in ports.items() for a in (name, value)]
        result = subprocess.run(
            [sys.executable, "-m", "sbemulator", "--config", str(REPO_ROOT / "infra" / "servicebus.json"),
             "--in-memory", *args],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=30,
        )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()  # one line, no traceback
    assert f"127.0.0.1:{port}" in line and hint in line


def test_the_websocket_port_is_printed_and_serves_the_sdk():
    proc = start_emulator_process("--config", str(REPO_ROOT / "infra" / "servicebus.json"), "--in-memory")
    try:
        assert proc.websocket_port is not None
        with ServiceBusClient.from_connection_string(
                proc.connection_string, transport_type=TransportType.AmqpOverWebsocket,
                custom_endpoint_address=f"sb://127.0.0.1:{proc.websocket_port}") as client:
            with client.get_queue_sender("leveling") as sender:
                sender.send_messages(ServiceBusMessage("over websocket"))
            with client.get_queue_receiver("leveling", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
                assert [str(m) for m in r.receive_messages(max_wait_time=5)] == ["over websocket"]
    finally:
        assert proc.terminate() == 0


def test_the_amqp_limit_flags_reach_the_server():
    """--max-receivers-per-entity 1 (and the other limit flags) set the Limits the connections are held to:
    a second receiver on the queue is refused with QuotaExceeded, the one open keeps working."""
    from azure.servicebus.exceptions import ServiceBusQuotaExceededError

    from sbemulator.gateway.limits import DEFAULT_LIMITS
    from sbemulator.runtime.cli import limits_from, parse_args

    assert limits_from(parse_args(["--config", "x.json"])) == DEFAULT_LIMITS
    chosen = limits_from(parse_args(["--config", "x.json", "--max-connections", "7", "--auth-timeout", "2.5"]))
    assert (chosen.max_connections, chosen.auth_timeout_s, chosen.max_links_per_connection) == (7, 2.5, 5000)
    proc = start_emulator_process("--config", str(REPO_ROOT / "infra" / "servicebus.json"), "--in-memory",
                                  "--no-admin", "--max-receivers-per-entity", "1")
    try:
        with ServiceBusClient.from_connection_string(proc.connection_string, retry_total=0) as client:
            with client.get_queue_receiver("leveling", max_wait_time=1) as first:
                first.receive_messages(max_wait_time=0.2)
                with pytest.raises(ServiceBusQuotaExceededError):
                    with client.get_queue_receiver("leveling") as second:
                        second.receive_messages(max_wait_time=0.2)
                with client.get_queue_sender("leveling") as sender:
                    sender.send_messages(ServiceBusMessage("still served"))
                assert [str(m) for m in first.receive_messages(max_wait_time=5)] == ["still served"]
    finally:
        assert proc.terminate() == 0


@pytest.mark.parametrize(("given", "words"), [
    (["--port", "70000"], "--port must be a port number from 0 to 65535"),
    (["--admin-port", "-1"], "--admin-port must be a port number"),
    (["--websocket-port", "65536"], "--websocket-port must be a port number"),
    (["--max-connections", "0"], "--max-connections must be at least 1"),
    (["--channel-max", "70000"], "--channel-max must be at most 65535"),
    (["--auth-timeout", "0"], "--auth-timeout must be at least"),
    (["--write-high-water", "10", "--write-low-water", "100"], "--write-low-water (100) must be below"),
])
def test_values_that_make_no_sense_are_a_usage_error_naming_the_flag(given: list[str], words: str) -> None:
    """Each is one usage line and exit 2 before anything starts (a port above 65535 was a traceback from
    bind; a low-water mark above the high one, or no connection allowed at all, were taken)."""
    result = subprocess.run(
        [sys.executable, "-m", "sbemulator", "--config", str(REPO_ROOT / "infra" / "servicebus.json"),
         "--in-memory", *given],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert words in result.stderr.strip().splitlines()[-1], result.stderr
