"""The round-robin queue of jobs: whose slice is next, and how large it may be (pure: no clock, no I/O).

The driver (``runtime.jobs``) asks :meth:`Scheduler.next` for a :class:`Turn`, runs that job's step with a
budget of ``turn.budget_s``, commits, and reports what the slice and its commit cost with
:meth:`Scheduler.finished`. A job that is not done goes to the back of the queue, so jobs take turns slice
by slice (a purge and a deleted entity's cleanup alternate instead of one waiting for the other), and a
job's budget adapts to what its slices cost: it halves while slice and commit together take longer than
``Slices.step_s`` (a durable commit of many rows) and grows back while they are quick.
"""

from __future__ import annotations

from collections import deque

from .jobs import Job
from .slices import DEFAULT_SLICES, Slices


class Turn:
    """One job's place in the queue: its budget for the next slice, and whether a commit follows its slices."""

    __slots__ = ("budget_s", "commit", "job", "slices_run")

    def __init__(self, job: Job, budget_s: float, commit: bool) -> None:
        self.job = job
        self.budget_s = budget_s
        self.commit = commit
        self.slices_run = 0


class Scheduler:
    """Jobs in turn, one slice each (see the module docstring)."""

    def __init__(self, slices: Slices = DEFAULT_SLICES) -> None:
        self.slices = slices
        self._queue: deque[Turn] = deque()  # waiting for their next slice, in order
        self._turns: dict[Job, Turn] = {}  # every job not finished: queued, or the one whose slice runs

    def __len__(self) -> int:
        return len(self._turns)

    def __contains__(self, job: object) -> bool:
        return job in self._turns

    @property
    def waiting(self) -> int:
        """Jobs queued for a slice (a job whose slice is running is not counted)."""
        return len(self._queue)

    def add(self, job: Job, *, commit: bool = True) -> bool:
        """Queue ``job`` behind the others; False (nothing changes) when it is already scheduled.
        ``commit``: the driver commits after each of its slices (False for work that writes nothing
        buffered, such as folding the store's journal)."""
        if job in self._turns:
            return False
        turn = Turn(job, self.slices.slice_s, commit)
        self._turns[job] = turn
        self._queue.append(turn)
        return True

    def next(self) -> Turn | None:
        """The turn whose slice runs now (taken off the queue until :meth:`finished`), or None."""
        if not self._queue:
            return None
        return self._queue.popleft()

    def finished(self, turn: Turn, done: bool, spent_s: float) -> None:
        """``turn``'s slice ran: ``done`` when its job has nothing left, ``spent_s`` what the slice and its
        commit took. A job not done is queued again behind the others, with its budget adapted."""
        turn.slices_run += 1
        if done:
            self._turns.pop(turn.job, None)
            return
        if turn.job not in self._turns:
            return  # removed while its slice ran
        slices = self.slices
        if spent_s > slices.step_s:
            turn.budget_s = max(slices.slice_min_s, turn.budget_s / 2)
        elif spent_s < slices.step_s / 2:
            turn.budget_s = min(slices.slice_s, turn.budget_s * 1.5)
        self._queue.append(turn)

    def remove(self, job: Job) -> bool:
        """Take ``job`` out (a driver that stops); whether it was scheduled."""
        turn = self._turns.pop(job, None)
        if turn is None:
            return False
        try:
            self._queue.remove(turn)
        except ValueError:
            pass  # its slice is running: finished() will not queue it again
        return True

    def jobs(self) -> list[Job]:
        """Every job not finished, in no particular order."""
        return list(self._turns)


__all__ = ["Scheduler", "Turn"]
