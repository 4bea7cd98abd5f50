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
    # A receiver granted much credit (100,000 at once) is served in slices: after a full take of
    # ``pump_take`` messages that ended ``pump_s`` after the pump began, the pump stops and goes on at the
    # next loop iteration, after what the connection produced is written and other connections are served.
    pump_take: int = 128
    pump_s: float = 0.01
    # Input that stands for more events than ``dispatch_events`` (a disposition over a range of deliveries)
    # is handled in slices of ``dispatch_s``, the time checked every ``dispatch_events`` events, with the
    # connection's reading paused meanwhile (gateway/backlog.py ``EventBacklog``, a job of the scheduler).
    dispatch_events: int = 256
    dispatch_s: float = 0.01
    # A large batch's messages decoded between two looks at the slice's time (~3 ms).
    batch_decode_items: int = 64
    # A batch transfer (message-format 0x80013700) larger than this many bytes is decoded in slices:
    # 256 KB of 100-byte messages is ~1,500 of them, 70-100 ms of decoding in one go.
    batch_slice_bytes: int = 32 * 1024
    # A disposition over more delivery ids than this becomes one range event that the gateway expands
    # ``dispatch_events`` at a time (a client can abandon 100,000 deliveries with one frame), and the
    # frames after it are held, up to ``hold_bytes`` (the reading is paused meanwhile), until it is
    # expanded; past that bound they are handled at once and the range is worked out whole.
    range_events: int = 256
    hold_bytes: int = 1 << 20
    # Paged-out messages read from the store in one range scan, however large the window (broker/
    # available.py): one read of 1,000 holds the event loop for a few milliseconds.
    page_in_rows: int = 1000
    # A durable store's buffered message writes at which work done in slices stops to let them be
    # committed (Store.commit_wanted): 512 delivery-state updates are one journal record of ~26 KB,
    # written in under a millisecond, where the 900-1,536 of a pump's 10 ms slice filled or overflowed the
    # journal and went to SQLite row by row with a fold first (up to 52 ms of CPU in one callback).
    commit_rows: int = 512
    # Rows of a deleted entity's containers deleted per transaction of the cleanup that follows the delete
    # (store/sqlite.py drop_slice): 100,000 rows in the delete's own commit held the event loop for ~167 ms.
    # 1,024 rows: ~4 ms of CPU, up to ~20 ms of wall time when the slice's commit checkpoints the WAL
    # (deleting rows rewrites the pages that held them); 2,048 rows: ~8 ms of CPU, up to ~30 ms of wall
    # (bench.delete_hold).
    drop_rows: int = 1024
    # The broker's timers (broker/timers.py, broker/flow.py): the locks a closing session receiver returns
    # per timer, the message heap's entries one compaction slice looks at, and the stale entries
    # next_deadline drops per call (4,096 pops from a heap of 100,000 took 10-15 ms).
    return_locks: int = 512
    compact_chunk: int = 4096
    stale_pops: int = 1024

    def __post_init__(self) -> None:
        if not (self.slice_s >= 0 and self.step_s >= 0 and self.slice_min_s >= 0 and self.timer_wait_s > 0):
            raise ValueError(f"Slice times must be non-negative (the timer wait positive): {self!r}")
        if self.slice_min_s > self.slice_s:
            raise ValueError(f"slice_min_s ({self.slice_min_s}) is larger than slice_s ({self.slice_s})")
        for name in ("purge_items", "pump_take", "dispatch_events", "batch_decode_items", "batch_slice_bytes",
                     "range_events", "hold_bytes", "page_in_rows", "commit_rows", "drop_rows", "return_locks",
                     "compact_chunk", "stale_pops"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.pump_s < 0 or self.dispatch_s < 0:
            raise ValueError(f"Slice times must be non-negative: {self!r}")


DEFAULT_SLICES = Slices()

__all__ = ["DEFAULT_SLICES", "Slices"]
