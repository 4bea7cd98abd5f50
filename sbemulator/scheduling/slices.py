"""The one settings object for work in slices: how much one slice of a job may do.

Why one object: each room that sliced its own work had its own module constants (some counting items,
some seconds), and tests patched them to make slices tiny. A :class:`Slices` is passed in where the work
is set up, like ``gateway.limits.Limits``; tests build one with small values instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Slices:
    """How large the slices of long work are (the defaults are what ``bench.canary_stall`` was tuned with)."""

    # The real time one slice of a job may take before it yields to the event loop (then its commit runs,
    # in a callback of its own). 10 ms keeps a canary's round trip under 50 ms while 100,000 locks lapse.
    slice_s: float = 0.01
    # A durable store's commit of what one slice changed can take several times the slice (each returned
    # or lapsed lock is a row to write): a job's budget halves while its slice and commit together take
    # longer than ``step_s``, down to ``slice_min_s``, and grows back (x1.5) to ``slice_s`` while they
    # take less than half of it.
    step_s: float = 0.015
    slice_min_s: float = 0.001
    # Messages a purge (or a deleted entity's cleanup) drops between two looks at the budget: the longest
    # slice of a purge of 100,000 (50,000 locked) took 4.5 ms of CPU in memory and 8.8 ms durable, its
    # rows' deletion included (bench.purge_hold).
    purge_items: int = 1024
    # The longest the broker's timer task sleeps before it looks at its deadlines again (seconds).
    timer_wait_s: float = 0.25

    def __post_init__(self) -> None:
        if not (self.slice_s >= 0 and self.step_s >= 0 and self.slice_min_s >= 0 and self.timer_wait_s > 0):
            raise ValueError(f"Slice times must be non-negative (the timer wait positive): {self!r}")
        if self.slice_min_s > self.slice_s:
            raise ValueError(f"slice_min_s ({self.slice_min_s}) is larger than slice_s ({self.slice_s})")
        if self.purge_items < 1:
            raise ValueError(f"purge_items must be at least 1, not {self.purge_items}")


DEFAULT_SLICES = Slices()

__all__ = ["DEFAULT_SLICES", "Slices"]
