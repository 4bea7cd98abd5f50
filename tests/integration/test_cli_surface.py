"""What harnesses and users of the official emulator find on the command line (docs/emulator.md,
"Running it"; docs/migrating.md): ``--version``, a JSON ready line (``--ready-json``) and the ready file
tools beside the emulator read, the official image's environment (``CONFIG_PATH``,
``EMULATOR_HTTP_PORT``; its SQL Server settings accepted and ignored), and ``--host 0.0.0.0`` /
``--public-host``: the connection string names a host clients can reach and the generated certificate
covers it, checked by a TLS handshake that verifies the name against the CA, as the SDKs do.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from sbemulator.runtime.launcher import start_emulator_process
from sbemulator.runtime.ready import read_ready, version
from tests.fixtures.waiting import wait_until

from .test_namespaces import TWO_NAMESPACES

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "infra" / "servicebus.json")


@pytest.fixture(autouse=True)
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SBEMULATOR_RUN_DIR", str(tmp_path / "run"))
    for name in ("CONFIG_PATH", "EMULATOR_HTTP_PORT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "run"


def test_version_prints_the_package_version() -> None:
    result = subprocess.run([sys.executable, "-m", "sbemulator", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"sbemulator {version()}"


def test_ready_json_is_one_line_with_every_address() -> None:
    emulator = start_emulator_process("--config", CONFIG, "--in-memory", "--ready-json")
    try:
        assert emulator.admin_url is not None
        assert wait_until(lambda: any(line.startswith("{") for line in emulator.output), 30), emulator.output
        [line] = [line for line in emulator.output if line.startswith("{")]
        info = json.loads(line)
        assert info["event"] == "ready" and info["amqp_port"] == emulator.port
        assert info["connection_string"] == emulator.connection_string
        assert info["admin_url"] == emulator.admin_url and info["console_url"] == emulator.admin_url + "/console/"
        assert info["ca_path"] == emulator.ca_path and info["pid"] == emulator.pid
        assert info["websocket_url"].startswith("ws://127.0.0.1:")
        assert read_ready(emulator.port) == info  # the same facts in the ready file
    finally:
        assert emulator.terminate() == 0
    assert read_ready(emulator.port) is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_official_images_environment_names_the_config_and_the_management_port() -> None:
    """The official image reads its topology from /ServiceBus_Emulator/ConfigFiles/Config.json (the
    installer's CONFIG_PATH names the file mounted there) and its management port from
    EMULATOR_HTTP_PORT; its SQL Server settings mean nothing here and must not stop a start."""
    amqp, http = _free_port(), _free_port()
    env = dict(os.environ, CONFIG_PATH=CONFIG, EMULATOR_HTTP_PORT=str(http), ACCEPT_EULA="Y",
               SQL_SERVER="sqlserver", MSSQL_SA_PASSWORD="unused", SQL_WAIT_INTERVAL="0")
    process = subprocess.Popen([sys.executable, "-m", "sbemulator", "--in-memory", "--port", str(amqp),
                                "--no-websocket"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: read_ready(amqp) is not None or process.poll() is not None, 60)
        info = read_ready(amqp)
        assert info is not None and info["admin_url"] == f"https://127.0.0.1:{http}", info
    finally:
        process.terminate()
        process.wait(30)
    bad = subprocess.run([sys.executable, "-m", "sbemulator", "--in-memory", "--port", "0"], capture_output=True,
                         text=True, timeout=60, env=dict(env, EMULATOR_HTTP_PORT="99999"))
    assert bad.returncode == 2 and "EMULATOR_HTTP_PORT must be a port number" in bad.stderr
    missing = subprocess.run([sys.executable, "-m", "sbemulator", "--in-memory"], capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in os.environ.items() if k != "CONFIG_PATH"})
    assert missing.returncode == 2 and "--config FILE is required" in missing.stderr


def _handshake(port: int, ca: str, name: str) -> None:
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=name):
        pass


def test_host_0_0_0_0_prints_a_reachable_host_and_its_certificate_covers_it(tmp_path: Path) -> None:
    emulator = start_emulator_process("--config", CONFIG, "--in-memory", "--host", "0.0.0.0",
                                      "--public-host", "sb-emulator.test")
    try:
        assert "Endpoint=sb://sb-emulator.test:" in emulator.connection_string
        assert emulator.admin_url is not None and emulator.ca_path is not None
        assert emulator.admin_url.startswith("https://sb-emulator.test:")
        _handshake(emulator.admin_port or 0, emulator.ca_path, "sb-emulator.test")
        _handshake(emulator.admin_port or 0, emulator.ca_path, socket.gethostname())
        _handshake(emulator.admin_port or 0, emulator.ca_path, "localhost")
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(emulator.admin_port or 0, emulator.ca_path, "elsewhere.test")
    finally:
        emulator.terminate()
    two = tmp_path / "two.json"
    two.write_text(json.dumps(TWO_NAMESPACES))
    several = start_emulator_process("--config", str(two), "--in-memory", "--host", "0.0.0.0", "--public-host",
                                     "sb-emulator.test")
    try:  # every namespace's connection string names the public host
        assert several.namespaces and all("Endpoint=sb://sb-emulator.test:" in connection
                                          for connection in several.namespaces.values()), several.namespaces
    finally:
        several.terminate()
    plain = start_emulator_process("--config", CONFIG, "--in-memory", "--host", "0.0.0.0")
    try:  # no --public-host: this machine's name, not 127.0.0.1 that another machine cannot use
        assert f"Endpoint=sb://{socket.gethostname()}:" in plain.connection_string
    finally:
        plain.terminate()


def test_a_kept_certificate_is_renewed_when_it_does_not_cover_the_public_host(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_emulator_process("--config", CONFIG, "--data-dir", str(data))
    first.terminate()
    second = start_emulator_process("--config", CONFIG, "--data-dir", str(data), "--public-host", "sb.test")
    try:
        assert second.ca_path is not None
        _handshake(second.admin_port or 0, second.ca_path, "sb.test")
    finally:
        second.terminate()
