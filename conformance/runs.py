"""What one suite's run was (its command, when, how long), kept beside its results so that the report can
be rendered again from them (``python -m conformance --report-only``) and hold the latest run of each
suite, each under its own command and date."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD = "run.json"
RERUN = ", then python -m conformance --suite python --files "


@dataclass
class Run:
    suite: str       # "python" or "go"
    command: str
    finished: str    # "YYYY-MM-DD HH:MM UTC"
    minutes: float


def save(out: Path, suite: str, command: str, seconds: float) -> Run:
    run = Run(suite, command, dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), round(seconds / 60, 1))
    out.mkdir(parents=True, exist_ok=True)
    (out / RECORD).write_text(json.dumps(asdict(run)))
    return run


def load(out: Path) -> Run | None:
    try:
        return Run(**json.loads((out / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def with_reruns(command: str, files: list[str]) -> str:
    """The command of a run whose ``files`` were run again since: every file re-run so far, once, after
    the run's own command (one line a reader can repeat)."""
    base, _, earlier = command.partition(RERUN)
    named = [*earlier.split(), *(f for f in files if f not in earlier.split())]
    return f"{base}{RERUN}{' '.join(named)}"
