"""``python -m shared.leader``: one replica of the leader election, for demos and failover tests.

Writes one JSON line per event (``started``, ``elected``, ``leader`` heartbeats, ``lost``, ``stopped``)
to stdout and, with ``--log-file``, appends it to a file. Each line carries the wall-clock time and the
system-wide monotonic time, so logs of several replicas on one machine can be merged and checked for
overlapping leadership with :func:`leader_intervals`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from shared.leader import DEFAULT_SESSION_ID, LeaderElector
from shared.topology import QUEUE_LEADER_ELECTION


@dataclass(frozen=True)
class LeaderInterval:
    replica: str
    start_mono: float
    end_mono: float


class EventLog:
    def __init__(self, replica: str, streams: list[IO[str]]) -> None:
        self.replica = replica
        self._streams = streams
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({
            "ts": datetime.now(UTC).isoformat(timespec="microseconds"),
            "mono": time.monotonic(),
            "replica": self.replica,
            "event": event,
            **fields,
        })
        with self._lock:
            for stream in self._streams:
                stream.write(line + "\n")
                stream.flush()


def leader_intervals(lines: Iterable[str]) -> list[LeaderInterval]:
    """Leadership intervals per replica: from ``elected`` to its last ``leader`` heartbeat.

    A replica killed with SIGKILL has no ``lost`` line; one paused with SIGSTOP writes ``lost`` late.
    Either way the interval in which it acted as leader ends at its last heartbeat.
    """
    open_at: dict[str, float] = {}
    last_seen: dict[str, float] = {}
    intervals: list[LeaderInterval] = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by SIGKILL
        replica, event, mono = record.get("replica"), record.get("event"), record.get("mono")
        if replica is None or mono is None:
            continue
        if event == "elected":
            open_at[replica] = mono
            last_seen[replica] = mono
        elif event == "leader" and replica in open_at:
            last_seen[replica] = mono
        elif event in ("lost", "stopped") and replica in open_at:
            # The claim ends with the last heartbeat: a paused process writes 'lost' only when it wakes,
            # possibly after someone else was elected, but it never claimed leadership in between.
            intervals.append(LeaderInterval(replica, open_at.pop(replica), last_seen.pop(replica)))
    for replica, start in open_at.items():
        intervals.append(LeaderInterval(replica, start, last_seen.get(replica, start)))
    return sorted(intervals, key=lambda interval: interval.start_mono)


def _client(args: argparse.Namespace) -> Any:
    from shared.clients import service_bus_client
    from shared.settings import ServiceBusSettings, load_service_bus

    if args.connection_string:
        settings = ServiceBusSettings(connection_string=args.connection_string)
    else:
        settings = load_service_bus()
    return service_bus_client(settings, retry_total=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.leader", description=__doc__)
    parser.add_argument("--replica", default=f"pid-{os.getpid()}", help="name written into every line")
    parser.add_argument("--connection-string", help="default: the ServiceBusConnection setting")
    parser.add_argument("--queue", default=QUEUE_LEADER_ELECTION)
    parser.add_argument("--session-id", default=DEFAULT_SESSION_ID)
    parser.add_argument("--lock-duration", type=float, default=30.0, help="the queue's LockDuration, seconds")
    parser.add_argument("--safety-margin", type=float, default=None, help="seconds; default lock/6, min 1")
    parser.add_argument("--heartbeat", type=float, default=0.5, help="seconds between 'leader' lines")
    parser.add_argument("--retry-interval", type=float, default=1.0)
    parser.add_argument("--log-file", help="append the JSON lines to this file too")
    parser.add_argument("--duration", type=float, default=None, help="exit after this many seconds")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s")

    streams: list[IO[str]] = [sys.stdout]
    log_file = open(args.log_file, "a", encoding="utf-8") if args.log_file else None  # noqa: SIM115
    if log_file is not None:
        streams.append(log_file)
    events = EventLog(args.replica, streams)
    client = _client(args)
    elector = LeaderElector(
        client, args.queue, args.session_id,
        on_elected=lambda: events.write("elected", message="I am leader"),
        on_lost=lambda: events.write("lost", message="I am no longer leader"),
        lock_duration=args.lock_duration, safety_margin=args.safety_margin,
        retry_interval=args.retry_interval,
    )
    done = threading.Event()

    def _shutdown(*_: Any) -> None:
        done.set()
        elector.stop()

    signal.signal(signal.SIGTERM, _shutdown)
    signal.signal(signal.SIGINT, _shutdown)
    runner = threading.Thread(target=elector.run, name="leader-elector", daemon=True)
    events.write("started")
    runner.start()
    deadline = None if args.duration is None else time.monotonic() + args.duration
    while not done.is_set():
        if elector.is_leader():
            events.write("leader", message="I am leader", lease_remaining=round(elector.lease.remaining(), 3))
        if deadline is not None and time.monotonic() >= deadline:
            _shutdown()
            break
        done.wait(args.heartbeat)
    runner.join(timeout=10)
    events.write("stopped")
    client.close()
    if log_file is not None:
        log_file.close()
    return 0
