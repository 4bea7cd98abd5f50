"""Timer schedules as the Functions host reads them: NCRONTAB with seconds, or a TimeSpan interval.

NCRONTAB puts seconds first (``"0,30 * * * * *"``); croniter reads that only with
``second_at_beginning=True`` (without it, the same text fires every second). Month and day-of-week
names may be written in full or abbreviated, in any case ("Timer trigger for Azure Functions", CRON
expressions: ``Monday``, ``Jan``); croniter knows only the three-letter forms, so names are shortened
first, matched by prefix as NCrontab does. A TimeSpan (``"00:00:30"``) means "every interval", counted
from the host start; when a run outlasts the interval the next one starts at once (same page, TimeSpan),
whereas NCRONTAB occurrences missed during a run are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from croniter import croniter

from devhost.config import parse_timespan

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_WORD = re.compile(r"[A-Za-z]+")


class Schedule(Protocol):
    def next_after(self, moment: datetime) -> datetime: ...

    def following(self, scheduled: datetime, now: datetime) -> datetime:
        """The occurrence to run after the one ``scheduled`` has finished at ``now``."""
        ...


def _abbreviate(field: str, names: tuple[str, ...]) -> str:
    """``Monday``/``mon``/``Mo`` -> ``Mon``: the first name the word begins, as NCrontab matches."""

    def short(match: re.Match[str]) -> str:
        word = match.group(0)
        for name in names:
            if name.lower().startswith(word.lower()):
                return name[:3]
        raise ValueError(f"unknown name {word!r} in NCRONTAB field {field!r}")

    return _WORD.sub(short, field)


def normalize_ncrontab(expression: str) -> str:
    """Six fields with month and day-of-week names in the three-letter form croniter reads."""
    fields = expression.split()
    if len(fields) != 6:
        raise ValueError(
            f"NCRONTAB needs 6 fields ({{second}} {{minute}} {{hour}} {{day}} {{month}} {{day-of-week}}), "
            f"got {expression!r}"
        )
    fields[4] = _abbreviate(fields[4], MONTHS)
    fields[5] = _abbreviate(fields[5], DAYS)
    return " ".join(fields)


@dataclass(frozen=True)
class NcrontabSchedule:
    expression: str

    def __post_init__(self) -> None:
        try:
            valid = croniter.is_valid(self.croniter_expression, second_at_beginning=True)
        except ValueError as exc:
            raise ValueError(f"invalid NCRONTAB expression {self.expression!r}: {exc}") from None
        if not valid:
            raise ValueError(f"invalid NCRONTAB expression {self.expression!r}")

    @property
    def croniter_expression(self) -> str:
        return normalize_ncrontab(self.expression)

    def next_after(self, moment: datetime) -> datetime:
        return croniter(self.croniter_expression, moment, second_at_beginning=True).get_next(datetime)

    def following(self, scheduled: datetime, now: datetime) -> datetime:
        return self.next_after(max(now, scheduled))  # occurrences missed during the run are skipped


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

    def following(self, scheduled: datetime, now: datetime) -> datetime:
        return max(scheduled + self.interval, now)  # a run that outlasted the interval is followed at once


def parse_schedule(expression: str, start: datetime) -> Schedule:
    """NCRONTAB when the text has spaces, TimeSpan when it looks like ``hh:mm:ss``."""
    text = expression.strip()
    if " " in text:
        return NcrontabSchedule(text)
    try:
        return IntervalSchedule(parse_timespan(text), start)
    except ValueError:
        raise ValueError(f"schedule {expression!r} is neither NCRONTAB (6 fields) nor a TimeSpan") from None
