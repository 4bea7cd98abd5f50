"""Shared helpers for the emulator benchmarks: a real emulator process, its CPU and memory, results.

CPU and RSS are read from ``/proc`` (Linux) rather than psutil so the benchmarks need no dependency
beyond what the project already installs. The emulator is always measured as a separate process, so
its CPU is never confused with the SDK client's (the benchmark's own process).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import socket
import struct
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sbemulator.amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import Begin, Open, SaslInit
from sbemulator.amqp.types import Symbol, UInt
from sbemulator.runtime.launcher import EmulatorProcess, start_emulator_process

if TYPE_CHECKING:
    from azure.servicebus import ServiceBusMessage, ServiceBusSender

REPO_ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = REPO_ROOT / "docs" / "benchmarks.md"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

DOC_INTRO = """# Benchmarks

Numbers measured on this project's own code, by the scripts in `bench/` (`make bench` runs them all).
Each section says which command produced it, on which machine and when; rerun the command to refresh
it. They are meant to catch regressions and to show where time goes, not to predict Azure's numbers.
"""


class PhaseTimeout(RuntimeError):
    """A benchmark phase took longer than its budget: fail fast instead of hanging a CI job."""


# --------------------------------------------------------------------------- process measurements

def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads), from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as handle:
        text = handle.read()
    # The command name (field 2) may contain spaces; everything after the last ')' is fixed-format.
    fields = text[text.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / CLOCK_TICKS


def process_rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB, from ``VmRSS`` in ``/proc/<pid>/status``."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def own_cpu_seconds() -> float:
    """CPU seconds of this process, all threads included (the SDK's I/O threads count too)."""
    return time.process_time()


@dataclass
class Sample:
    """Wall time and CPU of the emulator and of this (client) process over one phase."""

    wall: float = 0.0
    emulator_cpu: float = 0.0
    client_cpu: float = 0.0

    def __add__(self, other: Sample) -> Sample:
        return Sample(self.wall + other.wall, self.emulator_cpu + other.emulator_cpu,
                      self.client_cpu + other.client_cpu)


@contextmanager
def measure(emulator_pid: int, into: list[Sample]) -> Iterator[None]:
    """Record one :class:`Sample` covering the ``with`` body and append it to ``into``."""
    wall0, emu0, cli0 = time.perf_counter(), process_cpu_seconds(emulator_pid), own_cpu_seconds()
    yield
    into.append(Sample(time.perf_counter() - wall0, process_cpu_seconds(emulator_pid) - emu0,
                       own_cpu_seconds() - cli0))


class Deadline:
    """A per-phase time budget; :meth:`check` raises :class:`PhaseTimeout` once it has passed."""

    def __init__(self, phase: str, seconds: float) -> None:
        self.phase, self.seconds = phase, seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def check(self, progress: str = "") -> None:
        if time.monotonic() > self.end:
            raise PhaseTimeout(f"phase {self.phase!r} exceeded {self.seconds:.0f}s {progress}".rstrip())


# --------------------------------------------------------------------------- emulator process

def start_emulator(config: str | Path, *args: str, timeout: float = 20, cwd: Path | None = None) -> EmulatorProcess:
    """Start the CLI (``--port 0 --config config`` plus ``args``) and wait for its ready line.

    Benchmarks of the AMQP path pass ``--no-admin``. ``measured_startup`` runs from just before
    ``Popen`` to the moment the ready line is read, so it includes interpreter start and imports,
    which the emulator's own figure cannot see. ``cwd``: another source tree whose ``sbemulator`` runs
    (``python -m`` imports from the working directory first): an earlier version, measured in the same run.
    """
    return start_emulator_process("--config", str(config), *args, timeout=timeout, cwd=cwd or REPO_ROOT)


@contextmanager
def emulator(config: str | Path, *args: str, cwd: Path | None = None) -> Iterator[EmulatorProcess]:
    """A fresh emulator process for the ``with`` body; always stopped afterwards."""
    proc = start_emulator(config, *args, cwd=cwd)
    try:
        yield proc
    finally:
        proc.terminate()


def fsync_rate(directory: str | Path, seconds: float = 1.0) -> float:
    """fsyncs per second of a 4 KiB write on the file system of ``directory``: the ceiling of any commit
    that waits for the disk (a durable mode that fsyncs before it confirms)."""
    path = Path(directory) / ".fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            os.pwrite(fd, b"x" * 4096, 0)
            os.fsync(fd)
            count += 1
        return count / elapsed
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


@contextmanager
def config_file(document: dict[str, Any]) -> Iterator[Path]:
    """Write a topology (official emulator Config.json schema) to a temporary file."""
    with tempfile.TemporaryDirectory(prefix="sbbench-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(document, indent=2))
        yield path


def queue_entry(name: str) -> dict[str, Any]:
    """A plain queue with a lock long enough that a slow benchmark never sees redeliveries."""
    return {"Name": name, "Properties": {
        "DeadLetteringOnMessageExpiration": False, "DefaultMessageTimeToLive": "PT1H",
        "DuplicateDetectionHistoryTimeWindow": "PT20S", "ForwardDeadLetteredMessagesTo": "",
        "ForwardTo": "", "LockDuration": "PT5M", "MaxDeliveryCount": 10,
        "RequiresDuplicateDetection": False, "RequiresSession": False}}


def subscription_entry(name: str, sql: str | None) -> dict[str, Any]:
    """A subscription with one SQL rule, or with no rule (``$Default``, a TrueFilter) when ``sql`` is None."""
    entry: dict[str, Any] = {"Name": name, "Properties": {
        "DeadLetteringOnMessageExpiration": False, "DefaultMessageTimeToLive": "PT1H",
        "LockDuration": "PT5M", "MaxDeliveryCount": 10, "ForwardDeadLetteredMessagesTo": "",
        "ForwardTo": "", "RequiresSession": False}}
    if sql is not None:
        entry["Rules"] = [{"Name": "BenchFilter", "Properties": {
            "FilterType": "Sql", "SqlFilter": {"SqlExpression": sql}}}]
    return entry


def topology(queues: Sequence[str] = (), topics: dict[str, list[dict[str, Any]]] | None = None) -> dict:
    """A whole config document with the given queues and topics (name -> subscription entries)."""
    return {"UserConfig": {"Namespaces": [{
        "Name": "sbemulatorns",
        "Queues": [queue_entry(q) for q in queues],
        "Topics": [{"Name": name, "Properties": {
            "DefaultMessageTimeToLive": "PT1H", "DuplicateDetectionHistoryTimeWindow": "PT20S",
            "RequiresDuplicateDetection": False}, "Subscriptions": subs}
            for name, subs in (topics or {}).items()],
    }], "Logging": {"Type": "File"}}}


# --------------------------------------------------------------------------- reporting

def machine() -> str:
    """One line naming the machine: CPU count, CPU model, Python and OS."""
    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    cpu = f"{os.cpu_count()} CPUs" + (f" ({model})" if model else "")
    return f"{cpu}, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` shows them (the machine may be shared)."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def prose(text: str, width: int = 110) -> str:
    """Paragraphs wrapped for docs/ (no prose line there is over 120 characters:
    tests/unit/test_doc_line_length.py); a paragraph is what blank lines separate."""
    return "\n\n".join(textwrap.fill(paragraph, width, break_long_words=False, break_on_hyphens=False)
                       for paragraph in text.split("\n\n"))


def command_line() -> str:
    """How this benchmark was invoked, as a user would type it (module form, no local paths)."""
    module = sys.modules["__main__"].__spec__
    name = module.name if module else Path(sys.argv[0]).stem
    return " ".join(["python -m", name, *map(shlex.quote, sys.argv[1:])])


# The sections this package owns, in document order: marker key -> heading lines placed before it.
SECTIONS = {
    "emulator": "## Emulator\n\n### Queue throughput",
    "startup": "### Start-up",
    "fanout": "## Topic fan-out",
    "priority": "## Priority",
    "priority-strategies": "## Priority strategies side by side",
    "leveling": "## Load leveling",
}


def write_section(key: str, body: str, path: Path = DOC_PATH) -> None:
    """Replace the text between ``<!-- bench:KEY:start -->`` and ``<!-- bench:KEY:end -->``.

    Everything outside the markers (other benchmarks' sections included) is left byte-for-byte
    alone. A missing file gets the intro; missing sections of :data:`SECTIONS` are laid out together
    in their order (so "Start-up" always sits under "Emulator", whichever benchmark runs first); any
    other missing key is appended under a heading named after it.
    """
    text = path.read_text() if path.exists() else DOC_INTRO
    if key in SECTIONS:
        previous = None
        for name, heading in SECTIONS.items():
            if _markers(name)[0] not in text:
                placeholder = f"{heading}\n\n{_block(name, '_Not measured yet._')}"
                anchor = _markers(previous)[1] if previous else None
                if anchor and anchor in text:
                    before, after = text.split(anchor, 1)
                    text = f"{before}{anchor}\n\n{placeholder}{after}"
                else:
                    text = text.rstrip("\n") + f"\n\n{placeholder}\n"
            previous = name
    start, end = _markers(key)
    if start in text and end in text:
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        text = before + _block(key, body) + after
    else:
        text = text.rstrip("\n") + f"\n\n## {key}\n\n{_block(key, body)}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _markers(key: str) -> tuple[str, str]:
    return f"<!-- bench:{key}:start -->", f"<!-- bench:{key}:end -->"


def _block(key: str, body: str) -> str:
    start, end = _markers(key)
    return f"{start}\n{body.strip()}\n{end}"


def read_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a raw AMQP connection (the socket's own timeout bounds each read)."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the emulator closed the connection")
        data += chunk
    return data


def read_frame(sock: socket.socket) -> bytes:
    """One AMQP frame, without its 4-byte size field."""
    size = struct.unpack(">I", read_exactly(sock, 4))[0]
    return read_exactly(sock, size - 4)


KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"  # the emulator's default key
UINT_MAX = 0xFFFFFFFF


def raw_connection(port: int, container_id: str, *, sessions: int = 1, channel_max: int | None = None,
                   timeout: float = 30.0, nodelay: bool = False) -> socket.socket:
    """A raw AMQP connection, signed in with SASL PLAIN and the default key, with ``sessions`` sessions
    begun on channels 0, 1, ...: the set-up of the benchmarks that drive the emulator below the SDK
    (a stalled reader, idle receivers, a canary), so each of them only adds its own links. The socket's
    ``timeout`` bounds every read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(SASL_HEADER)
    read_exactly(sock, 8)
    read_frame(sock)  # sasl-mechanisms
    sock.sendall(build_frame(0, SaslInit(Symbol("PLAIN"), f"\0{KEY_NAME}\0{KEY}".encode()), frame_type=FRAME_SASL))
    read_frame(sock)  # sasl-outcome
    sock.sendall(AMQP_HEADER)
    read_exactly(sock, 8)
    open_fields: dict[str, Any] = {} if channel_max is None else {"channel_max": channel_max}
    sock.sendall(build_frame(0, Open(container_id, max_frame_size=UInt(65536), **open_fields)))
    read_frame(sock)  # open
    for channel in range(sessions):
        sock.sendall(build_frame(channel, Begin(None, UInt(0), UInt(UINT_MAX), UInt(UINT_MAX))))
        read_frame(sock)  # begin
    return sock


def send_in_batches(sender: ServiceBusSender, messages: Iterable[ServiceBusMessage],
                    deadline: Deadline | None = None) -> int:
    """Send ``messages`` in as few ``ServiceBusMessageBatch`` transfers as fit (a new batch when the next
    message does not fit); ``deadline`` is checked after each full batch. Returns the batches sent."""
    from azure.servicebus.exceptions import MessageSizeExceededError  # the SDK only where a benchmark uses it

    batches = 0
    batch = sender.create_message_batch()
    for i, message in enumerate(messages):
        try:
            batch.add_message(message)
        except MessageSizeExceededError:
            sender.send_messages(batch)
            batches += 1
            if deadline is not None:
                deadline.check(f"after {i} messages")
            batch = sender.create_message_batch()
            batch.add_message(message)
    sender.send_messages(batch)
    return batches + 1
