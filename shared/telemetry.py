"""End-to-end latency per priority: the number the Priority Queue pattern is judged by.

Latency is measured from the producer's ``created_at`` (falls back to the broker's enqueued time)
to the moment a consumer finishes. Each sample is also logged with structured dimensions so that,
in Azure, Application Insights can chart it (the Functions host forwards the logs).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

log = logging.getLogger("pipeline.latency")


@dataclass(frozen=True)
class LatencyStats:
    count: int
    mean_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


def end_to_end_latency_ms(
    created_at: datetime | None, enqueued_at: datetime | None, now: datetime | None = None
) -> float:
    """Milliseconds since ``created_at`` (or ``enqueued_at`` when the body had none)."""
    start = created_at or enqueued_at
    if start is None:
        raise ValueError("need created_at or enqueued_at to measure latency")
    if start.tzinfo is None:  # the Functions binding hands out naive UTC datetimes
        start = start.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return (now - start).total_seconds() * 1000.0


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile: always one of the observed samples."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


class LatencyRecorder:
    """Thread-safe in-process latency samples keyed by priority."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._samples: dict[str, list[float]] = defaultdict(list)
        self._lock = threading.Lock()
        self._log = logger or log

    def record(
        self, priority: str, latency_ms: float, *, stage: str = "consumer", message_id: str = ""
    ) -> None:
        with self._lock:
            self._samples[priority].append(latency_ms)
        self._log.info(
            "latency stage=%s priority=%s ms=%.1f message_id=%s",
            stage, priority, latency_ms, message_id,
            extra={"custom_dimensions": {"stage": stage, "priority": priority, "latency_ms": latency_ms,
                                         "message_id": message_id}},
        )

    def stats(self) -> dict[str, LatencyStats]:
        with self._lock:
            snapshot = {key: sorted(values) for key, values in self._samples.items() if values}
        return {
            key: LatencyStats(
                count=len(values),
                mean_ms=sum(values) / len(values),
                p50_ms=_percentile(values, 0.50),
                p95_ms=_percentile(values, 0.95),
                p99_ms=_percentile(values, 0.99),
                max_ms=values[-1],
            )
            for key, values in snapshot.items()
        }

    def clear(self) -> None:
        with self._lock:
            self._samples.clear()
