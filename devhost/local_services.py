"""The local stand-ins for Azure: sbemulator and Azurite, started when no connection is configured,
or when the configured one is a local emulator's loopback address where nothing listens.

The emulator runs as its own process (``python -m sbemulator``) so that it does not share the
host's interpreter lock with the functions it serves; Azurite runs from node_modules on loopback with
telemetry off. Both use free ports and keep nothing on disk, and both are stopped on exit.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from azure.servicebus import parse_connection_string

from sbemulator import connection_string
from sbemulator.runtime.launcher import START_TIMEOUT, EmulatorStartError, start_emulator_process

ROOT = Path(__file__).resolve().parents[1]
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_LISTENING = re.compile(r"Azurite (Blob|Queue|Table) service is successfully listening at \S+:(\d+)")
# The well-known development storage key (public, documented with Azurite).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class LocalServiceError(RuntimeError):
    """A local stand-in could not start; the message says what to do."""


class Unreachable(RuntimeError):
    """A configured endpoint did not accept a TCP connection within the timeout."""


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


def _listening_ports(process: subprocess.Popen[str], pattern: re.Pattern[str], names: set[str],
                     timeout: float) -> tuple[dict[str, int], list[str]]:
    """Read ``process``'s output until ``pattern`` (groups: name, port) has named every one of ``names``.

    Returns the ports found (fewer if the process exited or ``timeout`` passed) and the lines read. A
    daemon thread keeps draining the output afterwards so the process never blocks on a full pipe.
    """
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, name="local-service-output", daemon=True).start()
    ports: dict[str, int] = {}
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while set(ports) < names:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        output.append(line)
        match = pattern.search(line)
        if match:
            ports[match.group(1)] = int(match.group(2))
    return ports, output


def emulator_admin_connection_string(data_connection_string: str, admin_url: str) -> str:
    """The connection string ``ServiceBusAdministrationClient`` takes for an emulator started as a process.

    The launcher reports the data plane's connection string and the admin URL separately; the admin
    one has the same keys with the admin endpoint's host and port. sbemulator's own
    ``connection_string`` builds it, so its format is written in one place.
    """
    keys = parse_connection_string(data_connection_string)
    admin = urlparse(admin_url)
    if not (admin.hostname and admin.port and keys.shared_access_key_name and keys.shared_access_key):
        raise ValueError(f"no emulator admin endpoint in {admin_url!r} with a key in the connection string")
    return connection_string(admin.hostname, admin.port, keys.shared_access_key_name, keys.shared_access_key)


class LocalServices:
    """Start on demand, stop everything that was started."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.processes: list[subprocess.Popen] = []
        self.service_bus_connection: str | None = None
        self.storage_connection: str | None = None
        self.admin_url: str | None = None
        self.admin_ca: str | None = None

    @property
    def admin_connection_string(self) -> str | None:
        """For ServiceBusAdministrationClient: the emulator's keys with the admin port."""
        if not (self.admin_url and self.service_bus_connection):
            return None
        return emulator_admin_connection_string(self.service_bus_connection, self.admin_url)

    def start_service_bus(self, topology: Path, timeout: float = START_TIMEOUT) -> str:
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

    def start_azurite(self, timeout: float = START_TIMEOUT) -> str:
        """Start Azurite on loopback with data in memory, on ports the system picks.

        Port 0 lets the system choose and Azurite prints the ports it got, so two Azurites started at
        once (parallel test workers) can never race for a port picked in advance.
        """
        process = subprocess.Popen(
            [*self.azurite_command(), "--silent", "--disableTelemetry", "--inMemoryPersistence",
             "--skipApiVersionCheck", "--blobHost", "127.0.0.1", "--queueHost", "127.0.0.1",
             "--tableHost", "127.0.0.1", "--blobPort", "0", "--queuePort", "0", "--tablePort", "0"],
            cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={k: v for k, v in os.environ.items() if k != "AZURITE_ACCOUNTS"},
        )
        self.processes.append(process)  # stop() ends it even if the wait below is interrupted
        ports, output = _listening_ports(process, AZURITE_LISTENING, {"Blob", "Queue", "Table"}, timeout)
        if len(ports) < 3:
            _terminate(process)
            self.processes.remove(process)
            raise LocalServiceError("Azurite did not start:\n" + "".join(output[-20:]))
        self.storage_connection = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{ports['Blob']}/{AZURITE_ACCOUNT};"
            f"QueueEndpoint=http://127.0.0.1:{ports['Queue']}/{AZURITE_ACCOUNT};"
            f"TableEndpoint=http://127.0.0.1:{ports['Table']}/{AZURITE_ACCOUNT};"
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


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


def is_local_service_bus(connection_string: str | None) -> bool:
    """An emulator's connection string on loopback (``UseDevelopmentEmulator=true``, the example settings').

    Only those are stood in for: a connection string to a real namespace that does not answer is an
    error to report, not something to paper over with a local emulator.
    """
    if not connection_string:
        return False
    parts = _connection_parts(connection_string)
    host = urlparse(parts.get("endpoint", "")).hostname
    return parts.get("usedevelopmentemulator", "").lower() == "true" and (host or "") in LOOPBACK_HOSTS


def is_local_storage(connection_string: str | None) -> bool:
    """``UseDevelopmentStorage=true`` or an explicit loopback TableEndpoint (Azurite's forms)."""
    if not connection_string:
        return False
    parts = _connection_parts(connection_string)
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return True
    return "tableendpoint" in parts and (urlparse(parts["tableendpoint"]).hostname or "") in LOOPBACK_HOSTS


def accepts_connections(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
