"""Start-up on a data directory that cannot hold the store: one line that says which problem and what
to do, exit status 2, no traceback (issue #19: a second emulator on the same directory used to wait
five seconds and die with ``sqlite3.OperationalError: database is locked``; a full or read-only disk
ended in a traceback, once as a misleading "cannot listen ... Read-only file system"). And a shutdown
on a full disk says what it could not write instead of a traceback.

The full and read-only cases mount a small tmpfs, which needs root; they are skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from sbemulator.runtime.launcher import PACKAGE_PARENT, start_emulator_process
from tests.fixtures.filesystem import fill_filesystem

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(REPO_ROOT / "infra" / "servicebus.json")


def _start(data_dir: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_PARENT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "sbemulator", "--config", CONFIG, "--port", "0", "--admin-port", "0",
         "--no-websocket", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )


def _one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "ready" not in result.stdout
    return lines[0]


def _mount(target: Path, options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    target.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                             capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[list[Path]]:
    mounted: list[Path] = []
    yield mounted
    for target in reversed(mounted):
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


def test_a_data_directory_in_use_names_the_process_holding_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_emulator_process("--config", CONFIG, "--data-dir", str(data), "--no-websocket")
    try:
        line = _one_line(_start(data))
    finally:
        assert first.terminate() == 0
    assert line == (f"sbemulator: data directory {data} is in use by process {first.pid}: "
                    "use --data-dir or --in-memory")


def test_a_read_only_data_directory_says_so(tmp_path: Path, mounts: list[Path]) -> None:
    ro = tmp_path / "ro"
    _mount(ro, "ro,size=1m")
    mounts.append(ro)
    line = _one_line(_start(ro / "data"))
    assert line.startswith(f"sbemulator: data directory {ro / 'data'} is read-only (")
    assert line.endswith("make it writable, or use --data-dir or --in-memory")


def test_a_full_data_directory_says_so(tmp_path: Path, mounts: list[Path]) -> None:
    fs = tmp_path / "fs"
    _mount(fs, "size=256k")
    mounts.append(fs)
    fill_filesystem(fs / "filler")
    line = _one_line(_start(fs / "data"))
    assert line.startswith(f"sbemulator: data directory {fs / 'data'} is on a full file system (")
    assert line.endswith("free space there, or use --data-dir or --in-memory")


@pytest.mark.slow
def test_a_shutdown_on_a_full_disk_says_what_it_could_not_write_and_loses_no_acknowledged_send(
    tmp_path: Path, mounts: list[Path]
) -> None:
    fs = tmp_path / "fs"
    _mount(fs, "size=3m")
    mounts.append(fs)
    data = fs / "data"
    proc = start_emulator_process("--config", CONFIG, "--data-dir", str(data), "--no-websocket", "--no-admin")
    acknowledged = 0
    try:
        with ServiceBusClient.from_connection_string(proc.connection_string, retry_total=0) as client, \
                client.get_queue_sender("leveling") as sender:
            for _ in range(400):
                try:
                    sender.send_messages(ServiceBusMessage("x" * 16384))
                except Exception:
                    break
                acknowledged += 1
            assert 0 < acknowledged < 400
            with client.get_queue_receiver("leveling") as receiver:  # completions go to the journal
                got: list[ServiceBusReceivedMessage] = []
                while len(got) < 5 and (batch := receiver.receive_messages(5 - len(got), max_wait_time=5)):
                    got += batch
                for m in got:
                    receiver.complete_message(m)
        fill_filesystem(fs / "filler")  # nothing left for SQLite when the emulator folds the journal at shutdown
    finally:
        status = proc.terminate()
    output = "".join(proc.output) + (proc.process.stdout.read() if proc.process.stdout else "")
    assert status == 0, output
    assert "Traceback" not in output
    assert "sbemulator stopped" in output
    warning = [line for line in output.splitlines() if "could not write" in line]
    assert len(warning) == 1, output
    assert "the delivery journal stays and is applied at the next start" in warning[0]
    assert "every acknowledged send is stored" in warning[0]
    (fs / "filler").unlink()
    subprocess.run(["mount", "-o", "remount,size=64m", str(fs)], check=True, timeout=30)
    again = start_emulator_process("--config", CONFIG, "--data-dir", str(data), "--no-websocket", "--no-admin")
    try:
        with ServiceBusClient.from_connection_string(again.connection_string) as client, \
                client.get_queue_receiver("leveling") as receiver:
            peeked: list[ServiceBusReceivedMessage] = []
            while batch := receiver.peek_messages(
                    max_message_count=250, sequence_number=(peeked[-1].sequence_number or 0) + 1 if peeked else 0):
                peeked += batch
        assert len(peeked) == acknowledged - len(got)  # what was sent is there, what was completed is not
    finally:
        assert again.terminate() == 0
