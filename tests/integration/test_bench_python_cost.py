"""bench.emulator_python_cost records what the SDK sends and replays it into an in-process server: the
replay must reproduce the peek-lock phase (every message delivered and its completion answered), or the
figure it prints would time something else."""

from __future__ import annotations

import pytest

from bench._util import config_file, topology
from bench.emulator_python_cost import PEEK, record, replay
from bench.emulator_throughput import QUEUE

MESSAGES = 300
BODY = 200


@pytest.fixture(scope="module")
def recorded():
    with config_file(topology([QUEUE])) as config:
        yield config, record(config, MESSAGES, BODY, timeout=60)


@pytest.mark.parametrize("in_memory", [True, False], ids=["in-memory", "durable"])
def test_the_replay_delivers_and_settles_every_recorded_message(recorded, in_memory):
    config, recording = recorded
    assert sum(1 for phase, _, _ in recording.chunks if phase == PEEK) >= MESSAGES  # a completion per read
    spent, transport = replay(config, recording, in_memory=in_memory)
    assert spent > 0
    # Every completion is answered (one write each) and every message went out with its body.
    assert transport.writes >= MESSAGES
    assert transport.bytes >= MESSAGES * BODY
