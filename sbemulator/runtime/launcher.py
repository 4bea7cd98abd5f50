"""Run the emulator as its own process (``python -m sbemulator``) and wait until it is ready.

Tests that kill it, benchmarks that measure its CPU and the local Functions host (devhost), which
must not share its interpreter lock, all need the same thing: start the CLI on a free port, read its
``ready`` line (and the admin line after it), and keep draining its output so it never blocks on a
full pipe.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE_PARENT = Path(__file__).resolve().parents[1]
READY = re.compile(r"ready on [^:]+:(\d+) in ([\d.]+)s; connection string: (\S+)")
ADMIN = re.compile(r"admin on (https://\S+?):(\d+); CA certificate: (.+)$")
WEBSOCKET = re.compile(r"websocket on ws://\S+?:(\d+)/")
NAMESPACE = re.compile(r" \| namespace (\S+): (\S+)")  # the ready line's other namespaces
NAMESPACE_ADMIN = re.compile(r"namespace (\S+) admin on (https://\S+)$")


class EmulatorStartError(RuntimeError):
    """The emulator process exited or stayed silent before printing its ready line(s); the message holds its output."""


@dataclass
class EmulatorProcess:
    """A running emulator process and what its start-up lines said."""

    process: subprocess.Popen[str]
    port: int
    connection_string: str
    startup_seconds: float  # the emulator's own figure (after imports)
    measured_startup: float  # from just before Popen to reading the ready line
    admin_port: int | None = None  # the HTTPS management endpoint (None with --no-admin)
    admin_url: str | None = None
    ca_path: str | None = None
    websocket_port: int | None = None  # AMQP over WebSockets on a port of its own (None with --no-websocket)
    # The config file's other namespaces (docs/emulator.md, "Several namespaces"): name -> connection
    # string, and name -> management URL (same CA as ``ca_path``).
    namespaces: dict[str, str] = field(default_factory=dict)
    namespace_admin_urls: dict[str, str] = field(default_factory=dict)
    output: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout: float = 10) -> int:
        """SIGTERM and the exit code; SIGKILL if it does not exit within ``timeout``."""
        if self.process.poll() is not None:
            return self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)
            raise


# How long a start may take before it is given up. Only a process that hangs silently waits this long:
# one that exits ends the wait at once, one that gets ready ends it at its ready line. On a loaded
# machine (a test suite on eight workers, browsers and JVMs beside it) a start that takes a second
# idle took over 20 s; a start is not a speed test.
START_TIMEOUT = 120.0


def start_emulator_process(*args: str, timeout: float = START_TIMEOUT, cwd: Path | None = None) -> EmulatorProcess:
    """Start ``python -m sbemulator --port 0 [--admin-port 0] *args`` and wait for it to be ready.

    The admin endpoint gets a free port unless ``args`` names one or says ``--no-admin`` (its default,
    5300, cannot be shared by two emulators).
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_PARENT), env.get("PYTHONPATH")]))
    admin_args = [] if "--no-admin" in args or "--admin-port" in args else ["--admin-port", "0"]
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "sbemulator", "--port", "0", *admin_args, *args],
        cwd=cwd or PACKAGE_PARENT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    incoming: queue.Queue[str | None] = queue.Queue()
    # One reader thread for the process's life: it feeds the start-up loop below, then keeps draining
    # the pipe so a chatty emulator never blocks on it. The loop waits on the queue with a timeout,
    # so an emulator that hangs silently cannot hang its caller.
    waiting = threading.Event()
    waiting.set()
    threading.Thread(target=_read_output, args=(process, incoming, waiting, lines), daemon=True).start()
    deadline = time.monotonic() + timeout
    result: EmulatorProcess | None = None
    while True:
        remaining = deadline - time.monotonic()
        try:
            line = incoming.get(timeout=max(0.0, remaining)) if remaining > 0 else None
        except queue.Empty:
            line = None
        if line is None:
            result = None
            break
        match = READY.search(line)
        if match and result is None:
            result = EmulatorProcess(
                process, int(match.group(1)), match.group(3), float(match.group(2)),
                time.perf_counter() - started, output=lines,
                namespaces=dict(NAMESPACE.findall(line)),
            )
            if "--no-admin" in args:
                break
            continue
        websocket = WEBSOCKET.search(line)
        if websocket and result is not None:
            result.websocket_port = int(websocket.group(1))
            continue
        namespace_admin = NAMESPACE_ADMIN.search(line.strip())
        if namespace_admin and result is not None:
            result.namespace_admin_urls[namespace_admin.group(1)] = namespace_admin.group(2)
            continue
        admin = ADMIN.search(line.strip())
        if admin and result is not None:
            result.admin_url = f"{admin.group(1)}:{admin.group(2)}"
            result.admin_port = int(admin.group(2))
            result.ca_path = admin.group(3)
            break
    waiting.clear()  # from here on the reader only keeps the last lines
    if result is None or (result.admin_port is None and "--no-admin" not in args):
        process.kill()
        process.wait(5)
        raise EmulatorStartError("sbemulator did not become ready:\n" + "".join(lines))
    return result


def _read_output(process: subprocess.Popen[str], incoming: queue.Queue[str | None], waiting: threading.Event,
                 lines: list[str], keep: int = 200) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if len(lines) > keep:
            del lines[: len(lines) - keep]
        if waiting.is_set():
            incoming.put(line)
    incoming.put(None)  # the process closed its output (it exited)
