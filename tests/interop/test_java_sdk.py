"""The official Java SDK (azure-messaging-servicebus, on azure-core-amqp and Proton-J) against sbemulator.

The scenarios are JUnit 5 tests in tests/interop/java (see docs/interop.md for which covers what); this
module starts the emulator they talk to, runs them in one Maven build and reports Surefire's counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology
from tests.interop.java_sdk import requires_java_sdk, run_maven

pytestmark = [*requires_java_sdk, pytest.mark.slow]

JAVA_TOPOLOGY = topology(
    queues=[
        queue("java-send"),
        queue("java-settle"),
        queue("java-rd"),
        queue("java-schedule"),
        queue("java-sessions", RequiresSession=True, LockDuration="PT10S"),
        queue("java-session-proc", RequiresSession=True),
        queue("java-processor", LockDuration="PT2S"),
    ],
)


@pytest.fixture
def java_emulator() -> Iterator[Emulator]:
    with Emulator(config=JAVA_TOPOLOGY, in_memory=True) as emu:
        yield emu


def test_java_sdk_suite(java_emulator: Emulator) -> None:
    assert java_emulator.admin_url is not None and java_emulator.ca_path is not None
    env = {
        "SB_CONNECTION_STRING": java_emulator.connection_string,
        "SB_ADMIN_URL": java_emulator.admin_url,
        "SB_CA_PATH": java_emulator.ca_path,
    }
    # The first run on a machine downloads the SDK and Maven's plugins (~60 MB); later runs are offline.
    result, output = run_maven(env, timeout=600)
    print(result.summary())
    assert not result.problems, result.summary() + "\n\n" + "\n\n".join(result.problems) + "\n\n" + output[-3000:]
