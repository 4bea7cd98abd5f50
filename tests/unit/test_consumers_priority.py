from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from consumers.priority import process_message
from shared.contract import ContractMessage, parse_message
from shared.telemetry import LatencyRecorder, end_to_end_latency_ms

CREATED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _body(priority: str = "High") -> str:
    return ContractMessage("m-1", "tenant-1", priority, CREATED, {"index": 1}).to_json()


def test_processing_keeps_identity_adds_result_and_records_latency() -> None:
    slept: list[float] = []
    recorder = LatencyRecorder()
    done = CREATED + timedelta(milliseconds=250)
    processed = process_message(_body(), consumer="consumer_high", work_ms=40, recorder=recorder,
                                sleep=slept.append, now=lambda: done)
    assert slept == [0.04]
    out = parse_message(processed.body)
    identity = (out.message_id, out.tenant_id, out.priority, out.created_at)
    assert identity == ("m-1", "tenant-1", "High", CREATED)
    assert out.result == {"consumer": "consumer_high",
                          "processed_at": done.isoformat(timespec="microseconds"),
                          "work_ms": 40, "latency_ms": 250.0}
    stats = recorder.stats()["High"]
    assert stats.count == 1 and stats.max_ms == pytest.approx(250.0)


def test_poison_is_forwarded_unchanged_for_the_leveler_to_dead_letter() -> None:
    processed = process_message(b'{"broken": ', consumer="consumer_low",
                                sleep=lambda s: pytest.fail("worked"))
    assert processed.message is None
    assert processed.body == '{"broken": '


def test_latency_falls_back_to_enqueued_time_and_accepts_naive_utc() -> None:
    now = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert end_to_end_latency_ms(None, datetime(2026, 1, 1), now) == pytest.approx(1000.0)
    with pytest.raises(ValueError):
        end_to_end_latency_ms(None, None, now)


def test_latency_stats_percentiles_are_observed_samples() -> None:
    recorder = LatencyRecorder()
    for value in range(1, 101):
        recorder.record("Low", float(value))
    stats = recorder.stats()["Low"]
    assert (stats.p50_ms, stats.p95_ms, stats.p99_ms, stats.max_ms) == (50.0, 95.0, 99.0, 100.0)
    assert stats.mean_ms == pytest.approx(50.5)
    assert json.dumps(stats.__dict__)
