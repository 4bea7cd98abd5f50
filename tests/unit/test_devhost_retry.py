"""Retry policies ("Azure Functions error handling and retries", Retries): fixed delay and exponential
backoff, the retry count (-1: without end), and a timer function rerun after it raised."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from itertools import islice

import azure.functions as func
import pytest

from devhost.discovery import DiscoveryError, discover
from devhost.instances import InstanceId
from devhost.listeners import Outputs, TimerListener
from devhost.retry import RetryPolicyError, retry_policy
from devhost.schedule import IntervalSchedule
from devhost.stats import InvocationStats


def test_fixed_delay_waits_the_same_before_each_of_max_retry_count_retries() -> None:
    policy = retry_policy({"strategy": "fixed_delay", "max_retry_count": "3", "delay_interval": "00:00:02"})
    assert list(policy.delays()) == [timedelta(seconds=2)] * 3


def test_exponential_backoff_doubles_from_the_minimum_up_to_the_maximum() -> None:
    policy = retry_policy({"strategy": "exponential_backoff", "max_retry_count": "5",
                           "minimum_interval": "00:00:01", "maximum_interval": "00:00:05"})
    assert [d.total_seconds() for d in policy.delays()] == [1, 2, 4, 5, 5]


def test_minus_one_retries_without_end() -> None:
    policy = retry_policy({"strategy": "fixed_delay", "max_retry_count": "-1", "delay_interval": "00:00:01"})
    assert len(list(islice(policy.delays(), 100))) == 100


@pytest.mark.parametrize(("raw", "named"), [
    ({"strategy": "linear", "max_retry_count": "1"}, "strategy"),
    ({"strategy": "fixed_delay", "max_retry_count": "x", "delay_interval": "00:00:01"}, "max_retry_count"),
    ({"strategy": "fixed_delay", "max_retry_count": "-2", "delay_interval": "00:00:01"}, "max_retry_count"),
    ({"strategy": "fixed_delay", "max_retry_count": "1"}, "delay_interval"),
    ({"strategy": "exponential_backoff", "max_retry_count": "1", "minimum_interval": "00:00:05",
      "maximum_interval": "00:00:01"}, "minimum_interval"),
])
def test_bad_policies_are_reported(raw: dict, named: str) -> None:
    with pytest.raises(RetryPolicyError, match=named):
        retry_policy(raw)


def test_discovery_rejects_a_bad_policy_by_function_name() -> None:
    app = func.FunctionApp()

    @app.function_name("tick")
    @app.timer_trigger(arg_name="timer", schedule="0 0 0 1 1 *")
    @app.retry(strategy="fixed_delay", max_retry_count="3", delay_interval="soon")
    def tick(timer: func.TimerRequest) -> None: ...

    with pytest.raises(DiscoveryError, match=r"function tick: .*delay_interval"):
        discover(app, "timers")


def test_a_service_bus_trigger_keeps_redelivery_and_ignores_a_policy() -> None:
    app = func.FunctionApp()

    @app.function_name("consume")
    @app.service_bus_queue_trigger(arg_name="message", queue_name="q", connection="ServiceBusConnection")
    @app.retry(strategy="fixed_delay", max_retry_count="3", delay_interval="00:00:01")
    def consume(message: func.ServiceBusMessage) -> None: ...

    (spec,) = discover(app, "consumers")
    assert spec.retry is None


def test_a_failing_timer_run_is_retried_by_its_policy_then_waits_for_the_schedule() -> None:
    app = func.FunctionApp()
    runs: list[float] = []

    @app.function_name("flaky_tick")
    @app.timer_trigger(arg_name="timer", schedule="00:01:00", run_on_startup=True)
    @app.retry(strategy="fixed_delay", max_retry_count="2", delay_interval="00:00:00.05")
    def flaky_tick(timer: func.TimerRequest) -> None:
        runs.append(time.monotonic())
        raise RuntimeError("boom")

    (spec,) = discover(app, "timers")
    stats = InvocationStats()
    schedule = IntervalSchedule(timedelta(minutes=1), datetime.now(UTC))  # no scheduled run during the test
    listener = TimerListener(spec, InstanceId("timers", 0), stats, schedule, Outputs(None, None))  # type: ignore[arg-type]
    listener.start()
    deadline = time.monotonic() + 5
    while len(runs) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # room for a fourth run, which must not come
    listener.stop()
    listener.join(5)
    assert len(runs) == 3  # the startup run and its two retries
    assert stats.by_function()["flaky_tick"]["failed"] == 3
