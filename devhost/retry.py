"""Function retry policies (``@app.retry``): how long to wait before each new run of a failed execution.

"Azure Functions error handling and retries", Retries: a policy reruns an execution that raised, up to
``maxRetryCount`` times (-1: without end), after a fixed ``delayInterval`` or, for exponential backoff,
after ``minimumInterval`` doubled on each retry up to ``maximumInterval``. Timer triggers support it;
Service Bus triggers (extension 5.x) do not: their retries are redeliveries, counted by the message's
delivery count, so the host ignores a policy on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from devhost.config import parse_timespan

STRATEGIES = ("fixed_delay", "exponential_backoff")


class RetryPolicyError(ValueError):
    """A retry policy that cannot be applied; the message names the setting."""


@dataclass(frozen=True)
class RetryPolicy:
    strategy: str
    max_retry_count: int  # -1: retry without end
    delay: timedelta  # fixed delay, or the first (minimum) exponential one
    maximum: timedelta

    def delays(self) -> Iterator[timedelta]:
        """The wait before each retry, in order; ends after ``max_retry_count`` of them."""
        attempt = 0
        while self.max_retry_count < 0 or attempt < self.max_retry_count:
            if self.strategy == "fixed_delay":
                yield self.delay
            else:
                yield min(self.maximum, self.delay * (2 ** attempt))
            attempt += 1


def _interval(raw: Mapping[str, Any], key: str) -> timedelta:
    value = raw.get(key)
    if value is None:
        raise RetryPolicyError(f"retry policy {raw.get('strategy')!r} needs {key}")
    try:
        return parse_timespan(str(value))
    except ValueError as exc:
        raise RetryPolicyError(f"retry policy {key}: {exc}") from None


def retry_policy(raw: Mapping[str, Any]) -> RetryPolicy:
    """A policy from the settings ``@app.retry`` records (``get_setting('retry_policy')``)."""
    strategy = str(raw.get("strategy", "")).lower()
    if strategy not in STRATEGIES:
        raise RetryPolicyError(f"retry policy strategy {raw.get('strategy')!r} is not one of {', '.join(STRATEGIES)}")
    try:
        count = int(str(raw.get("max_retry_count")))
    except ValueError:
        count_text = raw.get("max_retry_count")
        raise RetryPolicyError(f"retry policy max_retry_count {count_text!r} is not an integer") from None
    if count < -1:
        raise RetryPolicyError(f"retry policy max_retry_count must be -1 or more, got {count}")
    if strategy == "fixed_delay":
        delay = _interval(raw, "delay_interval")
        return RetryPolicy(strategy, count, delay, delay)
    minimum, maximum = _interval(raw, "minimum_interval"), _interval(raw, "maximum_interval")
    if minimum > maximum:
        raise RetryPolicyError("retry policy minimum_interval must not exceed maximum_interval")
    return RetryPolicy(strategy, count, minimum, maximum)
