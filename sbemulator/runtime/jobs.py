"""The scheduler's driver: runs the jobs of sbemulator/scheduling/ on the event loop.

One slice per event-loop callback, jobs in turn (round robin), and after each slice of a job that
writes, a commit in a callback of its own, so connections are read and written between any two slices
and what a slice changed is durable before the next one runs. What a slice and its commit cost sets that
job's next budget (``Scheduler.finished``). ``run(job)`` resolves once the job's last slice is committed:
the admin plane answers a purge with it, the broker's timer task waits on its timer run with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..scheduling import DEFAULT_SLICES, Budget, Job, Scheduler, Slices, Turn

log = logging.getLogger("sbemulator")


def _never() -> bool:
    return False


class JobDriver:
    """The one driver of long work for a namespace (see the module docstring). ``commit`` makes what a
    slice buffered durable (the server's commit, which logs a store that cannot write rather than raise);
    ``commit_wanted`` is the store's, so a slice stops early when much is buffered."""

    def __init__(self, commit: Callable[[], object], *, slices: Slices = DEFAULT_SLICES,
                 commit_wanted: Callable[[], bool] = _never, clock: Callable[[], float] = time.perf_counter) -> None:
        self.scheduler = Scheduler(slices)
        self.slices = slices
        self._commit = commit
        self._commit_wanted = commit_wanted
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.Handle | None = None  # the next slice's (or commit's) callback
        self._waiters: dict[Job, list[asyncio.Future[None]]] = {}
        # What each job holds while it is scheduled (a connection's reading, for its input in slices):
        # called with False once the job is over, or the driver closes.
        self._pauses: dict[Job, Callable[[bool], None]] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the slices run on (the server's, once it starts); jobs started before wait for it."""
        self._loop = loop
        self._wake()

    def start(self, job: Job, *, commit: bool = True, pause: Callable[[bool], None] | None = None) -> bool:
        """Schedule ``job`` (no-op, False, when it already is). ``commit=False`` for work that buffers
        nothing to write (the store's folds, freeing a deleted entity's messages) or commits and writes
        itself (a connection's flush: a receiver's pump, input in slices). ``pause``: called with True
        now and with False once the job is over (a connection's reading, paused while its input waits
        for its next slice)."""
        added = self.scheduler.add(job, commit=commit)
        if added and pause is not None:
            self._pauses[job] = pause
            pause(True)
        self._wake()
        return added

    def __contains__(self, job: object) -> bool:
        return job in self.scheduler

    async def run(self, job: Job, *, commit: bool = True) -> None:
        """Every slice of ``job``, each followed by a commit; returns once the last is committed (raises
        what a slice raised)."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        future: asyncio.Future[None] = loop.create_future()
        self._waiters.setdefault(job, []).append(future)
        self.start(job, commit=commit)
        await future

    def close(self) -> None:
        """Stop: nothing more runs; whoever waits on a job is cancelled."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        for job in self.scheduler.jobs():
            self.scheduler.remove(job)
        pauses, self._pauses = self._pauses, {}
        for pause in pauses.values():
            pause(False)
        waiters, self._waiters = self._waiters, {}
        for futures in waiters.values():
            for future in futures:
                if not future.done():
                    future.cancel()

    def _wake(self) -> None:
        # call_later(0), not call_soon: a due timer runs after the I/O callbacks of its loop iteration, so
        # a connection whose input arrived meanwhile is served before the next slice, not after it (with
        # call_soon the slice would run first; bench.canary_stall's round trips in the take phases grew by
        # a slice's time).
        if self._handle is None and self._loop is not None and self.scheduler.waiting:
            self._handle = self._loop.call_later(0, self._slice)

    def _slice(self) -> None:
        self._handle = None
        turn = self.scheduler.next()
        if turn is None:
            return
        clock = self._clock
        started = clock()
        error: BaseException | None = None
        try:
            done = turn.job.step(Budget(turn.budget_s, slices=self.slices, commit_wanted=self._commit_wanted,
                                        clock=clock))
        except Exception as exc:  # a job's failure ends that job, never the driver
            log.exception("a job of the scheduler failed: %r", turn.job)
            done, error = True, exc
        ran = clock() - started
        if turn.commit and self._loop is not None:
            # the commit is a step of its own: what the slice did stays buffered meanwhile (a connection's
            # flush commits before it writes), and its cost counts toward the job's next budget
            self._handle = self._loop.call_soon(self._commit_after, turn, done, ran, error)
        else:
            self._finish(turn, done, ran, error)

    def _commit_after(self, turn: Turn, done: bool, ran: float, error: BaseException | None) -> None:
        self._handle = None
        started = self._clock()
        try:
            self._commit()
        except Exception:
            log.exception("the commit after a job's slice failed")
        self._finish(turn, done, ran + (self._clock() - started), error)

    def _finish(self, turn: Turn, done: bool, spent: float, error: BaseException | None) -> None:
        self.scheduler.finished(turn, done, spent)
        if done:
            pause = self._pauses.pop(turn.job, None)
            if pause is not None:
                pause(False)
            for future in self._waiters.pop(turn.job, ()):
                if future.done():
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(None)
        self._wake()


__all__ = ["JobDriver"]
