"""The brokers ``bench.peers`` compares sbemulator with: how each is fetched, configured, started and stopped.

Each broker runs on its documented defaults for a durable queue, changed only where the benchmark must
(a free loopback port, one AMQP listener, no web console, a fresh data directory per start) and, for the
"no-fsync" rows, in the one setting its documentation gives for not syncing the journal:

- ActiveMQ Classic: KahaDB ``journalDiskSyncStrategy`` (``always`` by default; ``never``).
- ActiveMQ Artemis: ``journal-datasync`` (``true`` by default; ``artemis create --no-fsync`` sets false).
- RabbitMQ: no broker setting; a durable queue's persistent messages are synced before the publisher's
  confirmation (its "Reliability" guide), so it has a durable row only.
- sbemulator: ``process`` (SQLite WAL, ``synchronous=NORMAL``: survives a killed process) and, when
  the CLI has ``--durability``, ``full`` (synced before a send or settlement is confirmed).

The Java distributions come from Maven Central through Maven itself (``mvn dependency:copy``) into a
git-ignored cache (``.bench-cache/`` at the repository root); RabbitMQ is Debian's ``rabbitmq-server``.
Every broker is started as the leader of a session of its own and stopped by signalling that process
group (and, for RabbitMQ, the ``epmd`` daemon it started, found by the port it was given).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ._util import CLOCK_TICKS, REPO_ROOT

CACHE = REPO_ROOT / ".bench-cache" / "peers"
ACTIVEMQ_VERSION = "5.18.3"
ARTEMIS_VERSION = "2.56.0"
ACTIVEMQ_ARTIFACT = f"org.apache.activemq:apache-activemq:{ACTIVEMQ_VERSION}:tar.gz:bin"
ARTEMIS_ARTIFACT = f"org.apache.artemis:apache-artemis:{ARTEMIS_VERSION}:tar.gz:bin"
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
QUEUE = "bench"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def amqp_ready(port: int) -> bool:
    """True once ``port`` answers the AMQP SASL protocol header (the broker's listener is up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.settimeout(1.0)
            sock.sendall(b"AMQP\x03\x01\x00\x00")
            return sock.recv(8) == b"AMQP\x03\x01\x00\x00"
    except OSError:
        return False


def session_cpu_seconds(sid: int) -> float:
    """User + system CPU of every live process in session ``sid`` (a JVM, or beam.smp and its helpers)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[3]) == sid:  # field 6 of proc(5): session id
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def session_rss_mib(sid: int) -> float:
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                text = handle.read()
            if int(text[text.rindex(")") + 2:].split()[3]) != sid:
                continue
            with open(f"/proc/{entry}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except (OSError, ValueError):
            continue
    return total


def fsync_rate(directory: Path, seconds: float = 1.0) -> float:
    """4 KiB writes each followed by ``fsync`` per second, in ``directory`` (the brokers' data disk)."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block, count, end = b"x" * 4096, 0, time.perf_counter() + seconds
        start = time.perf_counter()
        while time.perf_counter() < end:
            os.pwrite(fd, block, (count % 256) * 4096)
            os.fsync(fd)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


def fetch_distribution(artifact: str, name: str) -> Path:
    """The unpacked distribution ``name`` under the cache, fetched with ``mvn dependency:copy`` once."""
    home = CACHE / name
    if home.is_dir():
        return home
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mvn", "-q", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={CACHE}"],
                   check=True, timeout=900, cwd=CACHE)
    archive = CACHE / f"{name}-bin.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    archive.unlink()
    for script in (home / "bin").iterdir():
        script.chmod(script.stat().st_mode | 0o111)
    return home


@dataclass
class Running:
    """A started broker: its session leader, port, start-up time and what to stop besides its group."""

    process: subprocess.Popen[bytes]
    port: int
    startup_s: float
    log: Path
    extra_pids: list[int] = field(default_factory=list)

    @property
    def sid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                # the JVM or beam.smp may outlive the launcher script by a moment
                deadline = time.monotonic() + wait
                while session_cpu_seconds(self.sid) and time.monotonic() < deadline and _session_alive(self.sid):
                    time.sleep(0.1)
                if not _session_alive(self.sid):
                    break
            except subprocess.TimeoutExpired:
                continue
        for pid in self.extra_pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass


def _session_alive(sid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    text = handle.read()
            except OSError:
                continue
            rest = text[text.rindex(")") + 2:].split()
            if int(rest[3]) == sid and rest[0] != "Z":
                return True
    return False


def launch(argv: list[str], port: int, run_dir: Path, env: dict[str, str] | None = None,
           cwd: Path | None = None) -> Running:
    """Start ``argv`` in a session of its own and wait until ``port`` speaks AMQP."""
    log = run_dir / "broker.log"
    started = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env=dict(os.environ, **(env or {})), cwd=cwd or run_dir,
                                   start_new_session=True)
    running = Running(process, port, 0.0, log)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not amqp_ready(port):
        if process.poll() is not None or time.monotonic() > deadline:
            running.stop()
            raise RuntimeError(f"{argv[0]} did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.02)
    running.startup_s = time.perf_counter() - started
    return running


@dataclass(frozen=True)
class Broker:
    """One row's broker: its name, version, sync setting and how to start it fresh in ``run_dir``."""

    name: str
    mode: str  # "durable" (syncs before confirming) or "no-fsync"
    setting: str  # the sync setting, as its configuration spells it
    user: str
    password: str
    kind: str
    extra: tuple[str, ...] = ()

    def version(self) -> str:
        if self.kind == "sbemulator":
            from importlib.metadata import version
            return version("sbemulator")
        if self.kind == "rabbitmq":
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"],
                                 capture_output=True, text=True, timeout=10)
            return out.stdout.strip() or "unknown"
        return ACTIVEMQ_VERSION if self.kind == "activemq" else ARTEMIS_VERSION

    def prepare(self) -> None:
        """Fetch what the broker needs before any timed start."""
        if self.kind == "activemq":
            fetch_distribution(ACTIVEMQ_ARTIFACT, f"apache-activemq-{ACTIVEMQ_VERSION}")
        elif self.kind == "artemis":
            fetch_distribution(ARTEMIS_ARTIFACT, f"apache-artemis-{ARTEMIS_VERSION}")
        elif self.kind == "rabbitmq" and not RABBITMQ_SERVER.exists():
            raise RuntimeError("RabbitMQ is not installed (Debian package rabbitmq-server)")

    def start(self, run_dir: Path) -> Running:
        """Start fresh; a port another process took between choosing and binding it costs a retry."""
        start = {"sbemulator": _start_sbemulator, "rabbitmq": _start_rabbitmq, "activemq": _start_activemq,
                 "artemis": _start_artemis}[self.kind]
        for attempt in range(3):
            attempt_dir = run_dir / f"start-{attempt}"
            attempt_dir.mkdir()
            try:
                return start(self, attempt_dir)
            except RuntimeError as error:
                if "in use" not in str(error) or attempt == 2:
                    raise
        raise AssertionError("unreachable")


def _start_sbemulator(broker: Broker, run_dir: Path) -> Running:
    config = run_dir / "config.json"
    from ._util import topology
    config.write_text(json.dumps(topology([QUEUE])))
    port = free_port()
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return launch([sys.executable, "-m", "sbemulator", "--config", str(config), "--port", str(port),
                   "--no-admin", "--no-websocket", "--data-dir", str(run_dir / "data"), *broker.extra],
                  port, run_dir, env)


def _start_rabbitmq(broker: Broker, run_dir: Path) -> Running:
    """RabbitMQ with the AMQP 1.0 plugin, its node, distribution and epmd ports all free ones."""
    port, dist, epmd = free_port(), free_port(), free_port()
    (run_dir / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
    # The queue exists before the first attach (durable, as the definitions file says), so the client
    # addresses it as /amq/queue/bench on every broker run.
    (run_dir / "definitions.json").write_text(json.dumps({
        "rabbit_version": "3.10.8", "vhosts": [{"name": "/"}],
        "users": [{"name": broker.user, "password": broker.password, "tags": "administrator"}],
        "permissions": [{"user": broker.user, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
        "queues": [{"name": QUEUE, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}],
    }))
    (run_dir / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{port}\nloopback_users = none\n"
        f"definitions.import_backend = local_filesystem\ndefinitions.local.path = {run_dir}/definitions.json\n")
    env = {"HOME": str(run_dir), "RABBITMQ_NODENAME": f"bench{port}@localhost", "RABBITMQ_DIST_PORT": str(dist),
           "ERL_EPMD_PORT": str(epmd), "RABBITMQ_MNESIA_BASE": str(run_dir / "mnesia"),
           "RABBITMQ_LOG_BASE": str(run_dir / "log"), "RABBITMQ_ENABLED_PLUGINS_FILE": str(run_dir / "enabled_plugins"),
           "RABBITMQ_CONFIG_FILE": str(run_dir / "rabbitmq"), "RABBITMQ_PID_FILE": str(run_dir / "pid")}
    running = launch([str(RABBITMQ_SERVER)], port, run_dir, env)
    running.extra_pids = _epmd_on(epmd)
    return running


def _epmd_on(port: int) -> list[int]:
    """The epmd daemon the node started for ``ERL_EPMD_PORT=port`` (it leaves the node's session)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"epmd" in cmd and f"ERL_EPMD_PORT={port}".encode() in environ:
            found.append(int(entry))
    return found


def _start_activemq(broker: Broker, run_dir: Path) -> Running:
    home = CACHE / f"apache-activemq-{ACTIVEMQ_VERSION}"
    conf = run_dir / "conf"
    shutil.copytree(home / "conf", conf)
    port = free_port()
    xml = (conf / "activemq.xml").read_text()
    xml = re.sub(r"<transportConnectors>.*?</transportConnectors>",
                 f'<transportConnectors><transportConnector name="amqp" uri="amqp://127.0.0.1:{port}'
                 '?maximumConnections=1000&amp;wireFormat.maxFrameSize=104857600"/></transportConnectors>',
                 xml, flags=re.S)
    xml = xml.replace('<import resource="jetty.xml"/>', "")
    if broker.mode == "no-fsync":
        xml = xml.replace('<kahaDB directory="${activemq.data}/kahadb"/>',
                          '<kahaDB directory="${activemq.data}/kahadb" journalDiskSyncStrategy="never"/>')
    (conf / "activemq.xml").write_text(xml)
    env = {"ACTIVEMQ_CONF": str(conf), "ACTIVEMQ_DATA": str(run_dir / "data"), "ACTIVEMQ_TMP": str(run_dir / "tmp")}
    return launch([str(home / "bin" / "activemq"), "console"], port, run_dir, env, cwd=home)


def _start_artemis(broker: Broker, run_dir: Path) -> Running:
    home = CACHE / f"apache-artemis-{ARTEMIS_VERSION}"
    instance = run_dir / "instance"
    port = free_port()
    create = [str(home / "bin" / "artemis"), "create", str(instance), "--user", broker.user, "--password",
              broker.password, "--allow-anonymous", "--silent", "--no-web", "--host", "127.0.0.1",
              "--default-port", str(port), "--no-amqp-acceptor", "--no-stomp-acceptor",
              "--no-hornetq-acceptor", "--no-mqtt-acceptor", "--queues", f"{QUEUE}:anycast"]
    if broker.mode == "no-fsync":
        create.append("--no-fsync")
    subprocess.run(create, check=True, timeout=120, capture_output=True, cwd=run_dir)
    return launch([str(instance / "bin" / "artemis"), "run"], port, run_dir, cwd=instance)


def brokers(sbemulator_full: tuple[str, ...] | None) -> list[Broker]:
    """Every row's broker, durable rows first; ``sbemulator_full`` is its sync-before-confirm flag."""
    rows = []
    if sbemulator_full is not None:
        rows.append(Broker("sbemulator", "durable", " ".join(sbemulator_full), "RootManageSharedAccessKey",
                           "SAS_KEY_VALUE", "sbemulator", sbemulator_full))
    rows += [
        Broker("RabbitMQ", "durable", "durable queue, persistent messages (default)", "bench", "bench", "rabbitmq"),
        Broker("ActiveMQ Classic", "durable", "journalDiskSyncStrategy=always (default)", "bench", "bench",
               "activemq"),
        Broker("ActiveMQ Artemis", "durable", "journal-datasync=true (default)", "bench", "bench", "artemis"),
        Broker("sbemulator", "no-fsync", "WAL, synchronous=NORMAL (default; --durability process)",
               "RootManageSharedAccessKey", "SAS_KEY_VALUE", "sbemulator"),
        Broker("ActiveMQ Classic", "no-fsync", "journalDiskSyncStrategy=never", "bench", "bench", "activemq"),
        Broker("ActiveMQ Artemis", "no-fsync", "journal-datasync=false (--no-fsync)", "bench", "bench", "artemis"),
    ]
    return rows


def address(broker: Broker) -> str:
    """The queue's AMQP address on ``broker``."""
    return f"/amq/queue/{QUEUE}" if broker.kind == "rabbitmq" else QUEUE
