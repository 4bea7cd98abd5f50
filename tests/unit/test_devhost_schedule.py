"""Timer schedules: NCRONTAB with seconds first, TimeSpan intervals, and the timer listener's firing."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import azure.functions as func
import pytest

from devhost.discovery import discover
from devhost.instances import InstanceId
from devhost.listeners import Outputs, TimerListener
from devhost.schedule import IntervalSchedule, NcrontabSchedule, parse_schedule
from devhost.stats import InvocationStats

T0 = datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)


def test_ncrontab_seconds_come_first() -> None:
    schedule = parse_schedule("0,30 * * * * *", T0)
    first = schedule.next_after(T0)
    assert first == datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)  # not every second, not every 30 minutes
    assert schedule.next_after(first) == datetime(2026, 1, 1, 0, 1, 0, tzinfo=UTC)


def test_ncrontab_step_and_hour_fields() -> None:
    every_two = parse_schedule("*/2 * * * * *", T0)
    assert every_two.next_after(T0) == T0 + timedelta(seconds=1)
    daily = parse_schedule("0 30 9 * * *", T0)
    assert daily.next_after(T0) == datetime(2026, 1, 1, 9, 30, 0, tzinfo=UTC)


@pytest.mark.parametrize("expression", ["* * * * *", "61 * * * * *", "a b c d e f"])
def test_bad_ncrontab_is_rejected(expression: str) -> None:
    with pytest.raises(ValueError):
        NcrontabSchedule(expression)


# "Timer trigger for Azure Functions", CRON expressions: months and days by number, English name or
# abbreviation, case-insensitive ("0 30 9 * Jan Mon": 9:30 AM every Monday in January); 0 is Sunday.
@pytest.mark.parametrize("expression", ["0 30 9 * Jan Mon", "0 30 9 * January Monday", "0 30 9 * jan MONDAY",
                                        "0 30 9 * 1 1"])
def test_ncrontab_month_and_day_names(expression: str) -> None:
    assert parse_schedule(expression, T0).next_after(T0) == datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def test_ncrontab_day_ranges_by_name_and_sunday_as_zero() -> None:
    weekdays = parse_schedule("0 30 9 * * Monday-Friday", T0)  # 2026-01-01 is a Thursday
    assert weekdays.next_after(datetime(2026, 1, 2, 10, tzinfo=UTC)) == datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    assert parse_schedule("0 0 0 * * 0", T0).next_after(T0) == datetime(2026, 1, 4, tzinfo=UTC)


def test_an_unknown_name_is_reported() -> None:
    with pytest.raises(ValueError, match="Funday"):
        parse_schedule("0 0 0 * * Funday", T0)


# Same page, TimeSpan: "When a function completes after running longer than the specified interval, the
# timer immediately invokes the function again"; a CRON schedule skips the occurrences the run overlapped.
def test_after_an_overlong_run_a_timespan_fires_at_once_and_ncrontab_skips() -> None:
    interval = parse_schedule("00:00:10", T0)
    assert interval.following(T0 + timedelta(seconds=10), T0 + timedelta(seconds=12)) == T0 + timedelta(seconds=20)
    assert interval.following(T0 + timedelta(seconds=10), T0 + timedelta(seconds=35)) == T0 + timedelta(seconds=35)
    cron = parse_schedule("*/10 * * * * *", T0)
    assert cron.following(T0 + timedelta(seconds=9), T0 + timedelta(seconds=35)) == T0 + timedelta(seconds=39)


def test_timespan_schedule_counts_from_the_start() -> None:
    schedule = parse_schedule("00:00:10", T0)
    assert isinstance(schedule, IntervalSchedule)
    assert schedule.next_after(T0) == T0 + timedelta(seconds=10)
    assert schedule.next_after(T0 + timedelta(seconds=10)) == T0 + timedelta(seconds=20)
    assert schedule.next_after(T0 + timedelta(seconds=25)) == T0 + timedelta(seconds=30)


def test_neither_form_is_an_error() -> None:
    with pytest.raises(ValueError, match="neither NCRONTAB"):
        parse_schedule("hourly", T0)
    with pytest.raises(ValueError, match="6 fields"):
        parse_schedule("every minute", T0)
    with pytest.raises(ValueError):
        parse_schedule("00:00:00", T0)


def _timer_app(run_on_startup: bool, work: float, calls: list[func.TimerRequest]) -> func.FunctionApp:
    app = func.FunctionApp()

    @app.function_name("tick")
    @app.timer_trigger(arg_name="timer", schedule="00:00:01", run_on_startup=run_on_startup)
    def tick(timer: func.TimerRequest) -> None:
        calls.append(timer)
        time.sleep(work)

    return app


def _run_timer(app: func.FunctionApp, interval: float, seconds: float) -> InvocationStats:
    (spec,) = discover(app, "timers")
    stats = InvocationStats()
    schedule = IntervalSchedule(timedelta(seconds=interval), datetime.now(UTC))
    listener = TimerListener(spec, InstanceId("timers", 0), stats, schedule, Outputs(None, None))  # type: ignore[arg-type]
    listener.start()
    time.sleep(seconds)
    listener.stop()
    listener.join(5)
    return stats


def test_timer_fires_on_schedule_and_on_startup() -> None:
    calls: list[func.TimerRequest] = []
    stats = _run_timer(_timer_app(True, 0.0, calls), 0.2, 0.7)
    assert 3 <= len(calls) <= 5  # startup + ~3 ticks
    assert not any(call.past_due for call in calls)
    assert stats.by_function()["tick"]["succeeded"] == len(calls)


def test_occurrences_missed_while_running_are_skipped() -> None:
    calls: list[func.TimerRequest] = []
    _run_timer(_timer_app(False, 1.3, calls), 0.2, 1.8)
    # the first tick (at 0.2 s) runs 1.3 s; the next is the first occurrence after it ended, not five
    # catch-up runs
    assert len(calls) == 2


class _MissedOnce:
    """A schedule whose first occurrence is already 5 s in the past (as after the host was down)."""

    def __init__(self) -> None:
        self.calls = 0

    def next_after(self, moment: datetime) -> datetime:
        self.calls += 1
        return moment - timedelta(seconds=5) if self.calls == 1 else moment + timedelta(hours=1)

    def following(self, scheduled: datetime, now: datetime) -> datetime:
        return now + timedelta(hours=1)


def test_a_late_occurrence_is_past_due() -> None:
    calls: list[func.TimerRequest] = []
    (spec,) = discover(_timer_app(False, 0.0, calls), "timers")
    listener = TimerListener(spec, InstanceId("timers", 0), InvocationStats(), _MissedOnce(),
                             Outputs(None, None))  # type: ignore[arg-type]
    listener.start()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    listener.stop()
    listener.join(5)
    assert [c.past_due for c in calls] == [True]


def test_a_failing_timer_is_counted_and_keeps_its_schedule() -> None:
    app = func.FunctionApp()
    fired = threading.Event()

    @app.function_name("broken")
    @app.timer_trigger(arg_name="timer", schedule="00:00:01")
    def broken(timer: func.TimerRequest) -> None:
        fired.set()
        raise RuntimeError("boom")

    stats = _run_timer(app, 0.2, 0.7)
    assert fired.is_set()
    assert stats.by_function()["broken"]["failed"] >= 2
