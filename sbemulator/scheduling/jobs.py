"""A job (work done a slice at a time) and the budget of one slice.

The shape every long piece of work already had (``PurgeJob.step``, the store's folds, the broker's timer
run) named once: ``step(budget)`` does at least one unit of work (so every job makes progress, whatever the
budget), stops at the first unit boundary after the budget is spent, and returns True once nothing is
left. Between two steps the driver commits and lets the event loop serve connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from .slices import DEFAULT_SLICES, Slices


def _never() -> bool:
    return False


class Budget:
    """What one slice may spend: real time (``seconds`` from its making, on ``clock``), cut short once
    ``commit_wanted`` says the store holds enough that a commit should run first. ``slices`` gives the
    item counts a job works in between two looks at the budget."""

    __slots__ = ("_clock", "_deadline", "commit_wanted", "seconds", "slices")

    def __init__(self, seconds: float | None, *, slices: Slices = DEFAULT_SLICES,
                 commit_wanted: Callable[[], bool] = _never,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.seconds = seconds  # None: unbounded (a caller that cannot let the event loop run between slices)
        self.slices = slices
        self.commit_wanted = commit_wanted
        self._clock = clock
        self._deadline = None if seconds is None else clock() + seconds

    @classmethod
    def unbounded(cls, slices: Slices = DEFAULT_SLICES) -> Budget:
        """A budget that is never spent: the whole job in one step."""
        return cls(None, slices=slices)

    @property
    def bounded(self) -> bool:
        return self._deadline is not None

    def time_spent(self) -> bool:
        """Whether the slice's time is up (never for an unbounded budget)."""
        return self._deadline is not None and self._clock() >= self._deadline

    def spent(self) -> bool:
        """Whether the slice should end at the next unit boundary: its time is up, or a commit is wanted."""
        return self._deadline is not None and (self._clock() >= self._deadline or self.commit_wanted())


class Job(Protocol):
    """Work done a slice at a time (see the module docstring)."""

    def step(self, budget: Budget) -> bool:
        """Do one slice (at least one unit of work); True once the job has nothing left to do."""
        ...


class JobStarter(Protocol):
    """What schedules a job and returns at once (``runtime.jobs.JobDriver``); a connection's gateway is
    given one for its receivers' pumps and its input handled in slices."""

    def start(self, job: Job, *, commit: bool = True, pause: Callable[[bool], None] | None = None) -> bool:
        """Schedule ``job`` (False, nothing changes, when it already is). ``commit``: a commit follows each
        of its slices. ``pause``: called with True now and with False once the job is over, to hold what
        feeds it meanwhile (a connection's reading)."""
        ...


class InlineJobs:
    """A JobStarter that runs each job to its end at once, jobs started meanwhile after it (never nested):
    for a gateway driven without a server (unit tests), where no event loop runs between slices."""

    def __init__(self, slices: Slices = DEFAULT_SLICES) -> None:
        self.slices = slices
        self._queue: list[tuple[Job, Callable[[bool], None] | None]] = []
        self._running = False

    def start(self, job: Job, *, commit: bool = True, pause: Callable[[bool], None] | None = None) -> bool:
        if any(queued is job for queued, _ in self._queue):
            return False
        if pause is not None:
            pause(True)
        self._queue.append((job, pause))
        if not self._running:
            self._running = True
            try:
                while self._queue:
                    job, pause = self._queue.pop(0)
                    run_to_end(job, self.slices)
                    if pause is not None:
                        pause(False)
            finally:
                self._running = False
        return True


class JobRunner(Protocol):
    """What runs jobs to their end with the event loop served between slices (``runtime.jobs.JobDriver``);
    the admin plane is given one."""

    async def run(self, job: Job) -> None:
        """Every slice of ``job``, each followed by a commit; returns once the last slice is committed."""
        ...


def run_to_end(job: Job, slices: Slices = DEFAULT_SLICES) -> None:
    """Every remaining slice of ``job`` in one go, for a caller that cannot let the event loop run."""
    while not job.step(Budget.unbounded(slices)):
        pass


__all__ = ["Budget", "InlineJobs", "Job", "JobRunner", "JobStarter", "run_to_end"]
