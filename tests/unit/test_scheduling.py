"""The cooperative scheduler's core (sbemulator/scheduling/): jobs take turns a slice at a time, each job's
budget adapts to what its slices cost and stays within the Slices bounds, and a budget ends a slice at
the first unit boundary after its time or when a commit is wanted. Pure: no event loop, a fake clock.

The rule followed is the project's own (DESIGN.md, "One scheduler for long work"; issue 35): round robin
between jobs, one slice per turn, the adaptive budget the broker's timer task had (halve while a slice
and its commit take longer than ``step_s``, grow back by half while they take less than half of it).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbemulator.scheduling import Budget, InlineJobs, Scheduler, Slices, run_to_end


class Units:
    """A job of ``units`` units of work, each costing ``cost`` seconds on ``clock`` (a list of one float)."""

    def __init__(self, name: str, units: int, clock: list[float], cost: float = 0.001) -> None:
        self.name, self.left, self.clock, self.cost = name, units, clock, cost
        self.steps = 0

    def step(self, budget: Budget) -> bool:
        self.steps += 1
        while self.left:
            self.left -= 1
            self.clock[0] += self.cost
            if budget.spent():
                break
        return not self.left


def _drive(scheduler: Scheduler, clock: list[float], log: list[str], commit_cost: float = 0.0) -> None:
    """What the runtime's driver does, without an event loop: one slice per turn, then its 'commit'."""
    while (turn := scheduler.next()) is not None:
        started = clock[0]
        job = turn.job
        assert isinstance(job, Units)
        done = job.step(Budget(turn.budget_s, slices=scheduler.slices, clock=lambda: clock[0]))
        clock[0] += commit_cost
        log.append(job.name)
        scheduler.finished(turn, done, clock[0] - started)


def test_jobs_take_turns_a_slice_at_a_time() -> None:
    clock = [0.0]
    scheduler = Scheduler(Slices(slice_s=0.0, slice_min_s=0.0))  # one unit a slice
    a, b, c = Units("a", 3, clock), Units("b", 1, clock), Units("c", 2, clock)
    for job in (a, b, c):
        assert scheduler.add(job)
    log: list[str] = []
    _drive(scheduler, clock, log)
    assert log == ["a", "b", "c", "a", "c", "a"]
    assert len(scheduler) == 0 and scheduler.next() is None


def test_a_job_added_twice_is_scheduled_once() -> None:
    clock = [0.0]
    scheduler = Scheduler(Slices(slice_s=0.0, slice_min_s=0.0))
    job = Units("a", 2, clock)
    assert scheduler.add(job)
    assert not scheduler.add(job)
    turn = scheduler.next()
    assert turn is not None
    assert not scheduler.add(job)  # its slice runs: still scheduled
    scheduler.finished(turn, turn.job.step(Budget(0.0)), 0.0)
    assert scheduler.waiting == 1 and job in scheduler


def test_a_job_removed_while_its_slice_runs_is_not_queued_again() -> None:
    scheduler = Scheduler()
    job = Units("a", 5, [0.0])
    scheduler.add(job)
    turn = scheduler.next()
    assert turn is not None
    assert scheduler.remove(job)
    scheduler.finished(turn, False, 0.0)
    assert scheduler.next() is None and job not in scheduler
    assert not scheduler.remove(job)


def test_the_budget_halves_while_slices_and_commits_are_slow_and_grows_back() -> None:
    slices = Slices(slice_s=0.01, step_s=0.015, slice_min_s=0.001)
    scheduler = Scheduler(slices)
    job = Units("a", 1000, [0.0])
    scheduler.add(job)
    budgets = []
    for spent in (0.05, 0.05, 0.05, 0.05, 0.05, 0.001, 0.001, 0.01):
        turn = scheduler.next()
        assert turn is not None
        budgets.append(turn.budget_s)
        scheduler.finished(turn, False, spent)
    assert budgets[:6] == pytest.approx([0.01, 0.005, 0.0025, 0.00125, 0.001, 0.001])
    assert budgets[6:] == pytest.approx([0.0015, 0.00225])
    turn = scheduler.next()
    assert turn is not None and turn.budget_s == pytest.approx(0.00225)  # between step_s / 2 and step_s: kept


def test_a_budget_ends_a_slice_on_time_or_when_a_commit_is_wanted() -> None:
    now = [0.0]
    wanted = [False]
    budget = Budget(0.01, clock=lambda: now[0], commit_wanted=lambda: wanted[0])
    assert budget.bounded and not budget.spent()
    wanted[0] = True
    assert budget.spent() and not budget.time_spent()
    wanted[0] = False
    now[0] = 0.01
    assert budget.spent() and budget.time_spent()
    endless = Budget.unbounded()
    assert not endless.bounded and not endless.spent()


def test_run_to_end_runs_a_job_in_one_step() -> None:
    job = Units("a", 10_000, [0.0])
    run_to_end(job)
    assert job.left == 0 and job.steps == 1


def test_slices_refuse_settings_that_cannot_work() -> None:
    with pytest.raises(ValueError):
        Slices(slice_s=0.001, slice_min_s=0.01)
    with pytest.raises(ValueError):
        Slices(purge_items=0)
    with pytest.raises(ValueError):
        Slices(slice_s=-1.0)


@settings(max_examples=200, deadline=None)
@given(
    units=st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=6),
    costs=st.lists(st.sampled_from([0.0001, 0.001, 0.004, 0.02]), min_size=6, max_size=6),
    commit_cost=st.sampled_from([0.0, 0.002, 0.03]),
    slice_s=st.sampled_from([0.0, 0.001, 0.01]),
)
def test_every_job_finishes_in_turns_within_its_budget(units: list[int], costs: list[float], commit_cost: float,
                                                        slice_s: float) -> None:
    slices = Slices(slice_s=slice_s, slice_min_s=min(slice_s, 0.001))
    scheduler = Scheduler(slices)
    clock = [0.0]
    jobs = [Units(str(i), n, clock, costs[i]) for i, n in enumerate(units)]
    for job in jobs:
        scheduler.add(job)
    log: list[str] = []
    budgets: list[float] = []
    while (turn := scheduler.next()) is not None:
        budgets.append(turn.budget_s)
        started = clock[0]
        running = turn.job
        assert isinstance(running, Units)
        done = running.step(Budget(turn.budget_s, slices=slices, clock=lambda: clock[0]))
        # a slice ends at the first unit after its budget: at most one unit past it
        assert clock[0] - started <= turn.budget_s + running.cost + 1e-12
        clock[0] += commit_cost
        log.append(running.name)
        scheduler.finished(turn, done, clock[0] - started)
    assert all(job.left == 0 for job in jobs)
    assert all(slices.slice_min_s <= b <= slices.slice_s for b in budgets)
    # round robin: while two jobs are unfinished, neither gets two slices in a row
    remaining = {job.name: job.steps for job in jobs}
    for first, second in itertools.pairwise(log):
        remaining[first] -= 1
        if first == second:
            assert all(left == 0 for name, left in remaining.items() if name != first)


def test_inline_jobs_run_each_job_to_its_end_at_once_and_a_job_started_meanwhile_after_it() -> None:
    """A gateway without a server (unit tests) runs its jobs inline: never nested, in the order started."""
    log: list[str] = []
    pauses: list[str] = []
    jobs = InlineJobs()

    class Inner:
        def step(self, budget: Budget) -> bool:
            log.extend(["inner", "inner"])
            return True

    class Starting:
        def __init__(self) -> None:
            self.started = False

        def step(self, budget: Budget) -> bool:
            log.append("outer")
            if not self.started:
                self.started = True
                jobs.start(Inner(), pause=lambda paused: pauses.append(f"inner {paused}"))
                log.append("outer goes on")
            return True

    assert jobs.start(Starting(), pause=lambda paused: pauses.append(f"outer {paused}"))
    assert log == ["outer", "outer goes on", "inner", "inner"]
    assert pauses == ["outer True", "inner True", "outer False", "inner False"]
