"""The local stand-ins for Azure: sbemulator and Azurite, started when no connection is configured.

The emulator runs as its own process (``python -m sbemulator``) so that it does not share the
host's interpreter lock with the functions it serves; Azurite runs from node_modules on loopback with
telemetry off. Both use free ports and keep nothing on disk, and both are stopped on exit.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

from sbemulator.launcher import EmulatorStartError, start_emulator_process

ROOT = Path(__file__).resolve().parents[1]
AZURITE_ACCOUNT = "devstoreaccount1"
# The well-known development storage key (public, documented with Azurite).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class LocalServiceError(RuntimeError):
    """A local stand-in could not start; the message says what to do."""


class Unreachable(RuntimeError):
    """A configured endpoint did not accept a TCP connection within the timeout."""


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def wait_for_port(host: str, port: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    last: OSError | None = None
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise LocalServiceError(f"process exited with code {process.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=min(1.0, timeout)):
                return
        except OSError as exc:
            last = exc
            time.sleep(0.05)
    raise Unreachable(f"{host}:{port} did not accept a connection within {timeout:g}s ({last})")


def _terminate(process: subprocess.Popen, timeout: float = 10.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


class LocalServices:
    """Start on demand, stop everything that was started."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.processes: list[subprocess.Popen] = []
        self.service_bus_connection: str | None = None
        self.storage_connection: str | None = None
        self.admin_url: str | None = None
        self.admin_ca: str | None = None

    @staticmethod
    def emulator_supports_admin() -> bool:
        """The HTTPS management endpoint is newer than the AMQP server; ask for it only when present."""
        import contextlib
        import io

        try:
            from sbemulator.cli import parse_args
        except ImportError:
            return False
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                parse_args(["--config", "x", "--admin-port", "0"])
            except SystemExit:
                return False
        return True

    @property
    def admin_connection_string(self) -> str | None:
        """For ServiceBusAdministrationClient: the emulator's keys with the admin port."""
        if not (self.admin_url and self.service_bus_connection):
            return None
        port = urlparse(self.admin_url).port
        return re.sub(r"Endpoint=sb://[^;]+", f"Endpoint=sb://127.0.0.1:{port}", self.service_bus_connection)

    def start_service_bus(self, topology: Path, timeout: float = 30.0) -> str:
        """Start ``python -m sbemulator`` through the launcher tests and benchmarks use.

        The launcher waits for the ready line (and the admin line after it) and keeps draining the
        emulator's output for the process's life, so a chatty emulator never blocks on a full pipe.
        """
        try:  # the launcher adds --port 0 and --admin-port 0 (free ports)
            emulator = start_emulator_process("--config", str(topology), "--host", "127.0.0.1", "--in-memory",
                                              timeout=timeout, cwd=self.root)
        except EmulatorStartError as exc:
            raise LocalServiceError(str(exc)) from None
        self.processes.append(emulator.process)
        self.admin_url, self.admin_ca = emulator.admin_url, emulator.ca_path
        self.service_bus_connection = emulator.connection_string
        return emulator.connection_string

    def azurite_command(self) -> list[str]:
        local = self.root / "node_modules" / ".bin" / "azurite"
        if local.exists():
            return [str(local)]
        found = shutil.which("azurite")
        if found:
            return [found]
        raise LocalServiceError("Azurite is not installed: run `npm install` in the repository root "
                                "(`make demo` does), or set TableStorageConnection")

    def start_azurite(self, timeout: float = 30.0) -> str:
        blob, queue, table = _free_ports(3)
        process = subprocess.Popen(
            [*self.azurite_command(), "--silent", "--disableTelemetry", "--inMemoryPersistence",
             "--skipApiVersionCheck", "--blobHost", "127.0.0.1", "--queueHost", "127.0.0.1",
             "--tableHost", "127.0.0.1", "--blobPort", str(blob), "--queuePort", str(queue),
             "--tablePort", str(table)],
            cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "AZURITE_ACCOUNTS"},
        )
        self.processes.append(process)
        try:
            for port in (blob, queue, table):
                wait_for_port("127.0.0.1", port, timeout, process)
        except (Unreachable, LocalServiceError) as exc:
            _terminate(process)
            raise LocalServiceError(f"Azurite did not start: {exc}") from None
        self.storage_connection = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{blob}/{AZURITE_ACCOUNT};"
            f"QueueEndpoint=http://127.0.0.1:{queue}/{AZURITE_ACCOUNT};"
            f"TableEndpoint=http://127.0.0.1:{table}/{AZURITE_ACCOUNT};"
        )
        return self.storage_connection

    def stop(self) -> None:
        for process in reversed(self.processes):
            _terminate(process)
        self.processes.clear()


def _connection_parts(connection_string: str) -> dict[str, str]:
    parts = {}
    for item in connection_string.split(";"):
        if "=" in item:
            key, _, value = item.partition("=")
            parts[key.strip().lower()] = value.strip()
    return parts


def service_bus_endpoint(connection_string: str | None, namespace: str | None) -> tuple[str, int]:
    """Host and AMQP port a Service Bus client will connect to."""
    if connection_string:
        parts = _connection_parts(connection_string)
        url = urlparse(parts.get("endpoint", ""))
        if not url.hostname:
            raise ValueError("the Service Bus connection string has no Endpoint=sb://...")
        emulator = parts.get("usedevelopmentemulator", "").lower() == "true"
        return url.hostname, url.port or (5672 if emulator else 5671)
    assert namespace
    return namespace, 5671


def table_endpoint(connection_string: str | None, service_uri: str | None) -> tuple[str, int]:
    if connection_string:
        parts = _connection_parts(connection_string)
        if parts.get("usedevelopmentstorage", "").lower() == "true":
            return "127.0.0.1", 10002
        if "tableendpoint" in parts:
            url = urlparse(parts["tableendpoint"])
        else:
            suffix = parts.get("endpointsuffix", "core.windows.net")
            url = urlparse(f"https://{parts.get('accountname', '')}.table.{suffix}")
    else:
        url = urlparse(service_uri or "")
    if not url.hostname:
        raise ValueError("cannot tell the table endpoint from the setting")
    return url.hostname, url.port or (443 if url.scheme == "https" else 80)
