"""The scheduler's driver on a real event loop (sbemulator/runtime/jobs.py): one slice per callback, jobs in
turn, a commit after each slice of a job that writes (none for one that does not), ``run`` answered once
the last slice is committed, other callbacks served between slices, a failing job's error given to whoever
waits for it, and ``close`` cancelling what waits. The rule is the project's (issue 35; DESIGN.md, "One
scheduler for long work"); no timing is asserted.
"""

from __future__ import annotations

import asyncio

import pytest

from sbemulator.runtime.jobs import JobDriver
from sbemulator.scheduling import Budget, Slices

ONE_UNIT = Slices(slice_s=0.0, slice_min_s=0.0)  # every slice one unit


class Counted:
    def __init__(self, name: str, units: int, log: list[str]) -> None:
        self.name, self.left, self.log = name, units, log

    def step(self, budget: Budget) -> bool:
        while self.left:
            self.left -= 1
            self.log.append(self.name)
            if budget.spent():
                break
        return not self.left


class Failing:
    def step(self, budget: Budget) -> bool:
        raise RuntimeError("broken job")


def test_jobs_take_turns_with_a_commit_after_each_slice_and_other_callbacks_between() -> None:
    log: list[str] = []

    async def main() -> None:
        driver = JobDriver(lambda: log.append("commit"), slices=ONE_UNIT)
        driver.bind(asyncio.get_running_loop())
        writes, folds = Counted("w", 3, log), Counted("f", 2, log)
        driver.start(folds, commit=False)
        ticks = 0

        async def other() -> None:
            nonlocal ticks
            for _ in range(20):
                ticks += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(other())
        await driver.run(writes)
        assert log[-1] == "commit"  # answered once its last slice is committed
        await counter
        assert ticks == 20
        assert folds not in driver and writes not in driver

    asyncio.run(main())
    assert log == ["f", "w", "commit", "f", "w", "commit", "w", "commit"]


def test_a_failing_job_raises_in_whoever_waits_and_the_driver_goes_on() -> None:
    log: list[str] = []

    async def main() -> None:
        driver = JobDriver(lambda: None, slices=ONE_UNIT)
        with pytest.raises(RuntimeError, match="broken job"):
            await driver.run(Failing())
        await driver.run(Counted("a", 2, log))

    asyncio.run(main())
    assert log == ["a", "a"]


def test_close_cancels_what_waits_and_runs_nothing_more() -> None:
    log: list[str] = []

    async def main() -> None:
        driver = JobDriver(lambda: None, slices=ONE_UNIT)
        driver.bind(asyncio.get_running_loop())
        job = Counted("a", 1000, log)
        waiting = asyncio.ensure_future(driver.run(job))
        for _ in range(5):
            await asyncio.sleep(0)
        driver.close()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        done = len(log)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(log) == done and 0 < done < 1000 and job not in driver

    asyncio.run(main())


def test_a_job_started_with_a_pause_holds_it_until_its_last_slice_and_a_closing_driver_releases_it() -> None:
    """A connection's input in slices (gateway/backlog.py): its reading is paused while the job waits for
    its next slice, and resumed once the job is over (or the driver stops) - the driver's part of it."""
    log: list[str] = []
    pauses: list[bool] = []

    async def main() -> None:
        driver = JobDriver(lambda: log.append("commit"), slices=ONE_UNIT)
        driver.bind(asyncio.get_running_loop())
        job = Counted("j", 3, log)
        assert driver.start(job, commit=False, pause=pauses.append)
        assert pauses == [True]  # paused at once, before its first slice
        assert not driver.start(job, commit=False, pause=pauses.append)  # scheduled already: paused once
        for _ in range(50):
            if job not in driver:
                break
            assert pauses == [True]  # still paused while slices remain
            await asyncio.sleep(0)
        assert job not in driver and log == ["j", "j", "j"]  # no commit: the job's own flush commits
        assert pauses == [True, False]
        held = Counted("h", 100, log)
        driver.start(held, pause=pauses.append)
        driver.close()
        assert pauses == [True, False, True, False]  # released when the driver stops

    asyncio.run(asyncio.wait_for(main(), 10))
