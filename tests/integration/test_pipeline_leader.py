"""Leader election across processes: three ``python -m shared.leader`` replicas against sbemulator.

SIGKILL closes the leader's connection, so the broker releases the session and another replica takes
over quickly. SIGSTOP keeps the connection open: the session lock must run out (LockDuration of
``leader-election``: 30 s in infra/servicebus.json, 10 s here so the test waits less) before anyone
else is elected, and the paused leader must not claim
leadership after its lease ran out (fencing). In both cases the leadership intervals never overlap.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sbemulator import Emulator
from shared.leader_cli import LeaderInterval, leader_intervals
from shared.topology import QUEUE_LEADER_ELECTION

ROOT = Path(__file__).resolve().parents[2]
LOCK_DURATION = 10.0  # the leader-election queue's LockDuration in this test's topology (seconds)


def _topology() -> dict:
    """infra/servicebus.json with a shorter leader-election lock: the paused-leader test waits it out."""
    config = json.loads((ROOT / "infra" / "servicebus.json").read_text())
    (leader_queue,) = [queue for namespace in config["UserConfig"]["Namespaces"] for queue in namespace["Queues"]
                       if queue["Name"] == QUEUE_LEADER_ELECTION]
    leader_queue["Properties"]["LockDuration"] = f"PT{LOCK_DURATION:.0f}S"
    return config


@pytest.fixture
def connection_string() -> Iterator[str]:
    with Emulator(config=_topology(), in_memory=True) as emu:
        yield emu.connection_string


def _start(connection_string: str, log: Path, n: int = 3) -> dict[str, subprocess.Popen]:
    return {
        f"r{i}": subprocess.Popen(
            [sys.executable, "-m", "shared.leader", "--connection-string", connection_string, "--replica",
             f"r{i}", "--log-file", str(log), "--heartbeat", "0.2", "--lock-duration", str(LOCK_DURATION)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    }


def _intervals(log: Path) -> list[LeaderInterval]:
    return leader_intervals(log.read_text().splitlines()) if log.exists() else []


def _wait_for(log: Path, count: int, timeout: float) -> list[LeaderInterval]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        intervals = _intervals(log)
        if len(intervals) >= count:
            return intervals
        time.sleep(0.2)
    raise AssertionError(f"expected {count} leadership interval(s), got {_intervals(log)}")


def _stop_all(procs: dict[str, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
    for proc in procs.values():
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _assert_no_overlap(intervals: list[LeaderInterval]) -> None:
    ordered = sorted(intervals, key=lambda i: i.start_mono)
    for before, after in itertools.pairwise(ordered):
        assert before.end_mono < after.start_mono, (before, after)


def test_sigkill_of_the_leader_hands_over_without_overlap(connection_string: str, tmp_path: Path) -> None:
    log = tmp_path / "leader.log"
    procs = _start(connection_string, log)
    try:
        (first,) = _wait_for(log, 1, timeout=20)
        time.sleep(1.0)
        killed_at = time.monotonic()
        procs[first.replica].send_signal(signal.SIGKILL)
        intervals = _wait_for(log, 2, timeout=LOCK_DURATION + 15)
    finally:
        _stop_all(procs)
    assert intervals[1].replica != first.replica
    # another replica takes over within one lock duration + 2 s (CLOCK_MONOTONIC is system-wide)
    assert intervals[1].start_mono - killed_at <= LOCK_DURATION + 2
    _assert_no_overlap(_intervals(log))


@pytest.mark.slow
def test_a_paused_leader_is_fenced_before_its_lock_expires(connection_string: str, tmp_path: Path) -> None:
    log = tmp_path / "leader.log"
    procs = _start(connection_string, log)
    try:
        (first,) = _wait_for(log, 1, timeout=20)
        time.sleep(1.0)
        paused_at = time.monotonic()
        procs[first.replica].send_signal(signal.SIGSTOP)
        intervals = _wait_for(log, 2, timeout=LOCK_DURATION + 15)
        procs[first.replica].send_signal(signal.SIGCONT)
        time.sleep(2.0)  # the woken replica must see its lease expired and write no heartbeat
    finally:
        _stop_all(procs)
    successor = intervals[1]
    assert successor.replica != first.replica
    # the lock was held until it expired: nobody took over while the paused leader's lock was valid
    assert successor.start_mono - paused_at > LOCK_DURATION * 2 / 3 - 1
    final = _intervals(log)
    _assert_no_overlap(final)
    assert next(i for i in final if i.replica == first.replica).end_mono < paused_at
