"""The priority benchmark's split of a stream into its cold start and its steady state.

The cold start is every message that queued behind the start from zero: those sent before the first
one was processed, and those sent while the new instance was still working through them. The
steady-state p99 (the benchmark's goals) covers only the rest.
"""

from bench.priority_latency import Stream, split_cold
from devhost.demo.metrics import Sample


class Samples:
    """What split_cold reads from a TelemetryCollector: ``snapshot()``."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def snapshot(self, since: float | None = None) -> list[Sample]:
        return list(self.samples)


def processed(message_id: str, sent: float, done: float, stage: str = "consumer_high") -> Sample:
    return Sample(done, stage, "High", (done - sent) * 1000, message_id)


def test_messages_queued_behind_the_first_instance_are_the_cold_start() -> None:
    # sent every 0.1 s; the first instance is live at 2.0 s and works through the queue until 2.4 s
    sent = {f"m{i}": 100.0 + i / 10 for i in range(40)}
    done = {f"m{i}": 102.0 + i * 0.02 for i in range(21)}  # m0..m20 (sent before 102.0) done by 102.4
    done.update({f"m{i}": sent[f"m{i}"] + 0.05 for i in range(21, 40)})
    collector = Samples([processed(mid, sent[mid], at) for mid, at in done.items()])

    cold, steady = split_cold(collector, Stream(dict(sent)))

    assert cold.waited == 20  # m0..m19 were sent before m0 was processed at 102.0
    assert round(cold.first_ms) == 2000
    assert round(cold.caught_up_s, 2) == 2.38  # m19, the last of those, was processed at 102.38
    assert cold.catching_up == 24  # m20..m23 were sent while the instance was catching up
    assert round(cold.max_ms) == 2000
    assert set(steady.sent) == {f"m{i}" for i in range(24, 40)}


def test_a_warm_pool_sets_apart_only_the_first_message() -> None:
    sent = {f"m{i}": 100.0 + i / 10 for i in range(10)}
    collector = Samples([processed(mid, t, t + 0.05) for mid, t in sent.items()])

    cold, steady = split_cold(collector, Stream(dict(sent)))

    assert (cold.waited, cold.catching_up) == (1, 1)
    assert round(cold.first_ms) == 50
    assert len(steady.sent) == 9


def test_other_stages_and_nothing_processed_leave_the_stream_whole() -> None:
    sent = {"a": 100.0, "b": 100.1}
    collector = Samples([processed("a", 100.0, 100.2, stage="consumer_low")])

    cold, steady = split_cold(collector, Stream(dict(sent)))

    assert cold.waited == 0
    assert steady.sent == sent
