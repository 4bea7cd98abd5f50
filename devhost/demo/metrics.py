"""What the demo and the benchmarks measure, taken from the pipeline's own telemetry.

``shared.telemetry.LatencyRecorder`` logs every sample on the ``pipeline.latency`` logger with
structured dimensions (the way Application Insights receives them in Azure); a logging handler here
collects them, so the measurement needs no hook in the function code. A sample with stage ``stored``
is one write to the table (the leveler records it after the upsert).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

LATENCY_LOGGER = "pipeline.latency"
STORED = "stored"


@dataclass(frozen=True)
class Sample:
    at: float  # time.time() of the log record
    stage: str
    priority: str
    latency_ms: float
    message_id: str = ""


def percentile(values: list[float], q: float) -> float:
    """Nearest rank, like shared.telemetry: always an observed value; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


class TelemetryCollector(logging.Handler):
    """Install with ``with TelemetryCollector() as collector:``; samples accumulate in ``samples``."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.samples: list[Sample] = []
        self._lock_samples = threading.Lock()
        self._saved: tuple[int, bool] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        dims = getattr(record, "custom_dimensions", None)
        if not dims:
            return
        sample = Sample(record.created, str(dims.get("stage")), str(dims.get("priority")),
                        float(dims.get("latency_ms", math.nan)), str(dims.get("message_id", "")))
        with self._lock_samples:
            self.samples.append(sample)

    def __enter__(self) -> TelemetryCollector:
        logger = logging.getLogger(LATENCY_LOGGER)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # one line per message would drown the dashboard
        logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger(LATENCY_LOGGER)
        logger.removeHandler(self)
        if self._saved is not None:
            logger.setLevel(self._saved[0])
            logger.propagate = self._saved[1]

    def snapshot(self, since: float = 0.0) -> list[Sample]:
        with self._lock_samples:
            return [s for s in self.samples if s.at >= since]

    def consumer_samples(self, since: float = 0.0) -> dict[str, list[Sample]]:
        """Samples of the priority consumers (every stage but ``stored``), by priority."""
        result: dict[str, list[Sample]] = defaultdict(list)
        for sample in self.snapshot(since):
            if sample.stage != STORED:
                result[sample.priority].append(sample)
        return result

    def stored_times(self, since: float = 0.0) -> list[float]:
        return [s.at for s in self.snapshot(since) if s.stage == STORED]


def per_second(times: list[float], start: float, end: float) -> list[int]:
    """Counts in consecutive 1-second windows [start + i, start + i + 1)."""
    buckets = [0] * max(0, math.ceil(end - start))
    for moment in times:
        index = int(moment - start)
        if 0 <= index < len(buckets):
            buckets[index] += 1
    return buckets


def peak_sliding(times: list[float], window: float = 1.0) -> int:
    """Most events in any half-open window of ``window`` seconds (stricter than fixed buckets)."""
    return busiest_window(times, window)[0]


def busiest_window(times: list[float], window: float = 1.0) -> tuple[int, float]:
    """(most events in any half-open window of ``window`` seconds, when the first such window starts);
    (0, nan) for no events."""
    ordered = sorted(times)
    best, at, left = 0, math.nan, 0
    for right, moment in enumerate(ordered):
        while moment - ordered[left] >= window:
            left += 1
        if right - left + 1 > best:
            best, at = right - left + 1, ordered[left]
    return best, at


def rate_last(times: list[float], seconds: float, now: float | None = None) -> float:
    now = time.time() if now is None else now
    return sum(1 for t in times if now - seconds <= t < now) / seconds
