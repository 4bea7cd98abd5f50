"""One cooperative scheduler for work that must not hold the event loop (no I/O, no asyncio).

Work that would take longer than a few milliseconds in one go (a purge of 100,000 messages, a deleted
entity's messages freed, the store's deferred folds, 100,000 lock timers coming due at once) is a
:class:`~.jobs.Job`: an object whose ``step(budget) -> done`` does one slice of it and says whether it has
finished. A :class:`~.jobs.Budget` says how much one slice may spend (real time, and whether the store
already holds enough to want a commit); :class:`~.slices.Slices` is the one settings object every
slice size and budget comes from (passed in like ``gateway.limits.Limits``, so a test sets it instead of
patching module constants); :class:`~.scheduler.Scheduler` is the pure round-robin queue of jobs that
picks whose slice is next and how large it may be. The driver that runs it on the event loop, one slice
per callback with a commit after each, is ``sbemulator.runtime.jobs``.

May import nothing of the emulator's other layers: every layer may import it (tests/unit/test_import_structure.py).
"""

from .jobs import Budget, InlineJobs, Job, JobRunner, JobStarter, run_to_end
from .scheduler import Scheduler, Turn
from .slices import DEFAULT_SLICES, Slices

__all__ = ["DEFAULT_SLICES", "Budget", "InlineJobs", "Job", "JobRunner", "JobStarter", "Scheduler", "Slices", "Turn",
           "run_to_end"]
