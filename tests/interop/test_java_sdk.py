"""The official Java SDK (azure-messaging-servicebus, on azure-core-amqp and Proton-J) against sbemulator.

The scenarios are JUnit 5 tests in tests/interop/java (see docs/interop.md for which covers what); this
module starts the emulator they talk to, runs them in one Maven build and reports Surefire's counts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology
from tests.fixtures.process import EmulatorProcess, start_emulator_process
from tests.interop.java_sdk import requires_java_sdk, run_maven

# One Maven build runs every class (about 90 s on an idle machine, more on the first run, which
# downloads the dependencies): the suite-wide per-test timeout is far too short for it.
pytestmark = [*requires_java_sdk, pytest.mark.slow, pytest.mark.timeout(900)]

JAVA_TOPOLOGY = topology(
    queues=[
        queue("java-send"),
        queue("java-settle"),
        queue("java-rd"),
        queue("java-schedule"),
        queue("java-sessions", RequiresSession=True, LockDuration="PT10S"),
        queue("java-session-proc", RequiresSession=True),
        # 5 s: the processor renews about half the remaining lock before it ends; with 2 s that left a
        # JVM on a loaded machine about one second to get the renewal in
        queue("java-processor", LockDuration="PT10S"),
        queue("java-tx"),
        queue("java-tx-rollback", LockDuration="PT2S"),
        queue("java-tx-settle"),
        queue("java-tx-in", LockDuration="PT2S"),
        queue("java-tx-out"),
        queue("java-tx-via-in"),
        queue("java-tx-via-out"),
        queue("java-tx-deferred"),
        queue("java-tx-schedule"),
    ],
)


CRASH_TOPOLOGY = topology(queues=[queue("java-crash")])


@pytest.fixture
def java_emulator() -> Iterator[Emulator]:
    with Emulator(config=JAVA_TOPOLOGY, in_memory=True) as emu:
        yield emu


class KilledOnRequest:
    """The durable emulator process of TransactionCrashTest: when the test writes ``kill-now`` into
    the control directory, the process gets SIGKILL, a new one starts on the same data directory, and
    its connection string is written to ``restarted`` (renamed into place, so it is read whole)."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = tmp_path / "crash-config.json"
        self.config.write_text(json.dumps(CRASH_TOPOLOGY))
        self.data_dir = tmp_path / "crash-data"
        self.control = tmp_path / "crash-control"
        self.control.mkdir()
        self.first = self._start()
        self.second: EmulatorProcess | None = None
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _start(self) -> EmulatorProcess:
        return start_emulator_process("--config", str(self.config), "--data-dir", str(self.data_dir), "--no-admin")

    def _watch(self) -> None:
        deadline = time.monotonic() + 600
        while not self._stop.is_set() and time.monotonic() < deadline:
            if (self.control / "kill-now").exists():
                self.first.kill()  # SIGKILL: no shutdown, no last commit
                self.killed = True
                self.second = self._start()
                staged = self.control / "restarted.tmp"
                staged.write_text(self.second.connection_string)
                staged.rename(self.control / "restarted")
                return
            self._stop.wait(0.1)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for process in (self.first, self.second):
            if process is not None and process.process.poll() is None:
                process.terminate()


@pytest.fixture
def crash_emulator(tmp_path: Path) -> Iterator[KilledOnRequest]:
    harness = KilledOnRequest(tmp_path)
    try:
        yield harness
    finally:
        harness.close()


def test_java_sdk_suite(java_emulator: Emulator, crash_emulator: KilledOnRequest,
                        record_property: Callable[[str, object], None]) -> None:
    assert java_emulator.admin_url is not None and java_emulator.ca_path is not None
    env = {
        "SB_CONNECTION_STRING": java_emulator.connection_string,
        "SB_ADMIN_URL": java_emulator.admin_url,
        "SB_CA_PATH": java_emulator.ca_path,
        "SB_CRASH_CONNECTION_STRING": crash_emulator.first.connection_string,
        "SB_CRASH_CONTROL_DIR": str(crash_emulator.control),
    }
    # The first run on a machine downloads the SDK and Maven's plugins (~60 MB); later runs are offline.
    result, output = run_maven(env, timeout=780)
    print(result.summary())
    record_property("sdk_suite", result.summary())  # shown in the run's "sdk suites" section
    assert not result.problems, result.summary() + "\n\n" + "\n\n".join(result.problems) + "\n\n" + output[-3000:]
    # TransactionCrashTest ran, and its emulator really was killed with SIGKILL and restarted.
    assert "TransactionCrashTest.killBeforeDischargeKeepsTheCommittedAndDropsTheOpen" in result.passed_names
    assert crash_emulator.killed and crash_emulator.second is not None
