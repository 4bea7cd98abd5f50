"""Timer schedules as the Functions host reads them: NCRONTAB with seconds, or a TimeSpan interval.

NCRONTAB puts seconds first (``"0,30 * * * * *"``); croniter reads that only with
``second_at_beginning=True`` (without it, the same text fires every second). A TimeSpan
(``"00:00:30"``) means "every interval", counted from the host start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from croniter import croniter

from devhost.config import parse_timespan


class Schedule(Protocol):
    def next_after(self, moment: datetime) -> datetime: ...


@dataclass(frozen=True)
class NcrontabSchedule:
    expression: str

    def __post_init__(self) -> None:
        if len(self.expression.split()) != 6:
            raise ValueError(
                f"NCRONTAB needs 6 fields ({{second}} {{minute}} {{hour}} {{day}} {{month}} {{day-of-week}}), "
                f"got {self.expression!r}"
            )
        if not croniter.is_valid(self.expression, second_at_beginning=True):
            raise ValueError(f"invalid NCRONTAB expression {self.expression!r}")

    def next_after(self, moment: datetime) -> datetime:
        return croniter(self.expression, moment, second_at_beginning=True).get_next(datetime)


@dataclass(frozen=True)
class IntervalSchedule:
    interval: timedelta
    start: datetime

    def __post_init__(self) -> None:
        if self.interval <= timedelta(0):
            raise ValueError("a TimeSpan schedule needs a positive interval")

    def next_after(self, moment: datetime) -> datetime:
        if moment < self.start:
            return self.start + self.interval
        periods = (moment - self.start) // self.interval + 1
        return self.start + periods * self.interval


def parse_schedule(expression: str, start: datetime) -> Schedule:
    """NCRONTAB when the text has spaces, TimeSpan when it looks like ``hh:mm:ss``."""
    text = expression.strip()
    if " " in text:
        return NcrontabSchedule(text)
    try:
        return IntervalSchedule(parse_timespan(text), start)
    except ValueError:
        raise ValueError(f"schedule {expression!r} is neither NCRONTAB (6 fields) nor a TimeSpan") from None
