"""Micro-benchmark for compiled filters: ``python -m sbemulator.filters.bench``."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from .rule import compile_rule, compile_sql_filter


def measure_us_per_eval(expression: str, message: Any, repeat: int = 200_000) -> float:
    """Best-of-three microseconds per evaluation of ``expression`` against ``message``."""
    match = compile_sql_filter(expression)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            match(message)
        best = min(best, time.perf_counter() - start)
    return best / repeat * 1e6


def _sample_message() -> Any:
    return SimpleNamespace(
        message_id="m", correlation_id="c", subject="bus stop", to=None, reply_to=None,
        reply_to_session_id=None, session_id=None, content_type=None, partition_key=None,
        sequence_number=1, enqueued_time_ms=1_700_000_000_000, time_to_live_ms=60_000,
        scheduled_enqueue_time_ms=None, delivery_count=0, size=100,
        application_properties={"Priority": "High", "quantity": 10, "color": "red"},
    )


EXPRESSIONS = [
    "Priority = 'High'",
    "Priority = 'Low'",
    "priority = 'High'",
    "Priority IN ('High', 'Urgent')",
    "quantity > 5 AND color = 'red'",
    "sys.Label LIKE '%bus%'",
    "sys.Label LIKE 'b_s%p'",
    "missing = 1 OR quantity * 2 >= 20",
]


def main() -> None:
    message = _sample_message()
    empty = compile_rule("noop", "True")
    start = time.perf_counter()
    for _ in range(200_000):
        empty.matches(message)
    baseline = (time.perf_counter() - start) / 200_000 * 1e6
    print(f"{'TrueFilter (call overhead)':45s} {baseline:6.2f} us/eval")
    for expression in EXPRESSIONS:
        print(f"{expression:45s} {measure_us_per_eval(expression, message):6.2f} us/eval")


if __name__ == "__main__":
    main()
