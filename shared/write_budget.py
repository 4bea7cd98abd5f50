"""An app-wide write budget shared by every live instance: leases of write slots in Table Storage.

The leveler's cap (``LEVELER_MAX_WRITES_PER_SECOND``) protects the store across the whole app, and
the app runs on 0..maximumInstanceCount instances. Split statically, one running instance could
use only cap / maximumInstanceCount. Here time itself is the budget, in the spirit of the Rate
Limiting pattern (Azure Architecture Center: a durable shared store that hands out capacity to
many consumers): at a cap of C writes/s there is one *write slot* every 1 / C seconds, and a
slot belongs to whoever leased it. One entity in a table holds the budget's clock, ``NextFree``:
the first slot nobody has leased yet. An instance leases the next ``n`` slots by moving
``NextFree`` forward with a conditional update (``If-Match`` on the entity's ETag: optimistic
concurrency, so two instances can never lease the same slot), then starts one write at each of
its slots.

What follows:

- **the cap holds at the store for any number of instances**: slots are globally unique and
  1 / (0.95 C) apart, and a write starts at or after its slot. A write reaches the store somewhere
  between its start and its return, so a write that returns late may be counted in a later second
  than its slot; ``headroom`` (5 %) lets every write land up to h / (1 - h) seconds (53 ms) after its
  slot, and a write that returned later than that is paid for with a slot nobody uses, before its
  slot's second is over (:meth:`SharedWritePacer.slot` says why that keeps every 1-s window at the
  store at or under C);
- **one instance can use all of it**: alone, it leases every slot;
- **a killed instance's share comes back on its own**: a lease is a range of time, at most
  ``max_ahead`` + one batch beyond the moment it was taken, and it lapses with the time; nobody
  has to notice the death or release anything;
- **cost**: one conditional update per lease of up to ``batch`` slots, plus a read and a retry
  when another instance leased in between (412 Precondition Failed): about C / batch updates per
  second for one instance, more as instances contend (measured: 4.8 requests/s for one instance,
  21.7/s for four at a cap of 20, docs/benchmarks.md).

Works the same against Azurite (connection string) and Azure (``DefaultAzureCredential`` through
``shared.clients``). Instances' clocks must agree to well under a slot (NTP in Azure; one clock
locally).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.tables import TableCreatedOnFirstUse

log = logging.getLogger("pipeline.budget")

CLOCK_ROW = "clock"
#: Slots are handed out at 95 % of the cap: a write reaches the store a little after its slot, by a
#: varying amount (thread wake-up, HTTP), and the 5 % absorbs up to 1/20 s of that jitter per second,
#: so the store's own 1-s windows stay at or under the cap, not just the slots.
DEFAULT_HEADROOM = 0.05


@dataclass(frozen=True)
class Lease:
    """Slots ``first, first + interval, ...`` (``count`` of them), all this instance's."""

    first: float
    count: int
    interval: float

    def slots(self) -> list[float]:
        return [self.first + i * self.interval for i in range(self.count)]


class BudgetClock(TableCreatedOnFirstUse):
    """The shared ``NextFree`` entity: lease slots with ETag-conditional updates."""

    def __init__(self, table: TableClient, name: str, rate: float, *, headroom: float = DEFAULT_HEADROOM,
                 clock: Callable[[], float] = time.time) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        if not 0 <= headroom < 1:
            raise ValueError(f"headroom must be in [0, 1), got {headroom}")
        super().__init__(table)
        self.name = name
        self.cap = float(rate)
        self.interval = 1.0 / (rate * (1.0 - headroom))
        self.clock = clock
        self._cached: tuple[float, str | None] | None = None  # (NextFree, etag) from our last read or update
        self.updates = 0
        self.reads = 0
        self.conflicts = 0

    def _read(self) -> tuple[float, str | None]:
        self.ensure_table()
        self.reads += 1
        try:
            entity = self.table.get_entity(self.name, CLOCK_ROW)
        except ResourceNotFoundError:
            try:
                metadata = self.table.create_entity({"PartitionKey": self.name, "RowKey": CLOCK_ROW, "NextFree": 0.0})
                return 0.0, metadata["etag"]
            except ResourceExistsError:
                entity = self.table.get_entity(self.name, CLOCK_ROW)
        return float(entity["NextFree"]), entity.metadata["etag"]

    def lease(self, count: int, *, lead: float = 0.0, max_ahead: float = 0.5, attempts: int = 5) -> Lease | float:
        """Lease ``count`` slots starting at or after ``now + lead``.

        Returns the :class:`Lease`, or how many seconds to wait before asking again: when the next
        free slot is more than ``max_ahead`` seconds away (others hold the budget that far), or
        when ``attempts`` updates in a row lost the race to other instances.
        """
        for _ in range(attempts):
            if self._cached is None:
                self._cached = self._read()
            next_free, etag = self._cached
            now = self.clock()
            first = max(next_free, now + lead)
            if first > now + max_ahead:
                # keep what we read: after the wait the update is tried on it directly, and only a
                # lost race (412) costs a read; polling with reads would double the requests
                return first - max_ahead - now
            entity = {"PartitionKey": self.name, "RowKey": CLOCK_ROW, "NextFree": first + count * self.interval}
            try:
                metadata = self.table.update_entity(entity, mode=UpdateMode.REPLACE, etag=etag,
                                                    match_condition=MatchConditions.IfNotModified)
            except (ResourceModifiedError, ResourceNotFoundError):
                self.conflicts += 1
                self._cached = None
                continue
            finally:
                self.updates += 1
            self._cached = (first + count * self.interval, metadata["etag"])
            return Lease(first, count, self.interval)
        # lost every race: back off for a random part of a batch so the racers spread out
        log.info("write budget %s: no lease after %d attempts; backing off", self.name, attempts)
        return random.uniform(0.0, count * self.interval)


class WriteBudgetTimeout(TimeoutError):
    """No write slot within the pacer's ``max_wait``: the write was not made, and may be retried.

    Under contention a wait lasts about (writers waiting) / cap; far longer means the budget cannot
    serve this instance, most likely because the instances' clocks disagree (see the module's note).
    """


class SharedWritePacer:
    """Drop-in for :class:`shared.rate_limit.WritePacer`: ``with pacer.slot(): write()``.

    Each write waits for a slot this instance leased; a lease is for as many slots as this instance
    has writers (waiting or writing: its demand), at most ``batch``. A slot missed by more than ``grace`` (a thread woke
    late) is dropped, not used late: using it would squeeze two writes closer than 1 / C.

    A write that returns more than ``late_after`` seconds after its slot may have reached the store
    in a later second than its slot's: it is paid for by leaving one more slot unused (see
    :meth:`slot`).

    A wait ends after ``max_wait`` seconds with :class:`WriteBudgetTimeout`, never with a write
    outside the budget. Without that bound, clocks that disagree would keep a writer waiting for
    ever: on a clock running ahead of the budget's, every slot leased is already past and dropped
    (each one lost to the whole app); on the others, the next free slot that such a clock wrote
    stays out of reach. The default (60 s) is far above a wait under contention (1,200 writers
    at a cap of 20/s) and below the leveler's function timeout and lock renewal (5 min, host.json),
    so the message is abandoned and retried rather than its invocation killed.
    """

    def __init__(self, budget: BudgetClock, *, batch: int | None = None, max_ahead: float = 0.5,
                 grace: float | None = None, max_wait: float = 60.0, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if max_wait <= 0:
            raise ValueError(f"max_wait must be > 0, got {max_wait}")
        self.budget = budget
        self.rate = budget.cap  # the app-wide cap; slots come at (1 - headroom) x cap
        self.batch = batch or max(1, math.ceil(0.25 / budget.interval))  # a quarter of a second of slots
        self.max_ahead = max_ahead
        self.grace = budget.interval / 2 if grace is None else grace
        self.max_wait = max_wait
        self._clock = clock
        self._sleep = sleep
        self._slots: deque[float] = deque()
        self._lock = threading.Lock()
        self._lease_lock = threading.Lock()
        self._active = 0  # writers inside slot(), waiting or writing: this instance's demand
        self._round_trip = 0.0  # smoothed lease latency: slots are leased that far in the future
        self.dropped = 0
        #: how late after its slot a write may return and still be within the headroom: the slots of
        #: 1 + late_after seconds number at most the cap (h / (1 - h) s: 53 ms at the default 5 %)
        self.late_after = max(0.0, self.rate * budget.interval - 1.0)
        self.compensated = 0  # late writes paid for with an unused slot
        self.uncompensated = 0  # late writes no slot could be left unused for in time (logged)

    def _next_slot(self, deadline: float) -> float:
        dropped_before = self.dropped
        next_free_in: float | None = None  # the budget's last answer: its next free slot is this far away
        while True:
            with self._lock:
                now = self._clock()
                while self._slots and self._slots[0] + self.grace < now:
                    self._slots.popleft()
                    self.dropped += 1
                if self._slots:
                    return self._slots.popleft()
            if now >= deadline:
                raise self._timeout(self.dropped - dropped_before, next_free_in)
            with self._lease_lock:  # one lease at a time per instance; the others wait for its slots
                with self._lock:
                    if self._slots:
                        continue
                    want = max(1, min(self.batch, self._active))
                started = self._clock()
                result = self.budget.lease(want, lead=self._round_trip, max_ahead=self.max_ahead)
                took = self._clock() - started
                self._round_trip = 0.8 * self._round_trip + 0.2 * took
                if isinstance(result, Lease):
                    with self._lock:
                        self._slots.extend(result.slots())
                    continue
            next_free_in = result + self.max_ahead
            # a little random extra, so instances told to wait the same time do not all race again
            # at once; it costs nothing: whoever holds the next half second of slots is still writing
            self._sleep(min(result, 1.0, max(deadline - self._clock(), 0.0)) + random.uniform(0.0, 0.05))

    def _timeout(self, missed: int, next_free_in: float | None) -> WriteBudgetTimeout:
        seen = []
        if missed:
            seen.append(f"{missed} leased slots were already past on this instance's clock")
        if next_free_in is not None and next_free_in > self.max_wait:
            seen.append(f"the next free slot is {next_free_in:.1f} s ahead of this instance's clock")
        cause = "; ".join(seen) + ": do the instances' clocks agree?" if seen else "the budget is contended"
        return WriteBudgetTimeout(f"write budget {self.budget.name}: no write slot within {self.max_wait:g} s "
                                  f"({cause})")

    @contextmanager
    def slot(self) -> Iterator[float]:
        """Wait for a leased slot, then hold it for one write; yields the time waited.

        Raises :class:`WriteBudgetTimeout` when no slot comes within ``max_wait``.

        Why the cap holds at the store, not only at the slots: the store counts a write when it
        arrives, at some moment L between the write's start (at or after its slot s) and its return
        R. Take any 1-s window [x, x + 1). A write counted in it either has its slot within the
        1 + late_after seconds (x - late_after, x + 1), or returned more than late_after after its
        slot with s <= x - late_after < x <= L. Each write of the second kind left a slot k unused
        with R <= k < s + 1 (so x <= L <= R <= k < s + 1 <= x + 1: k lies in the window too), one slot
        per write. So the writes the window counts are at most the slots, used or unused, of an
        interval of 1 + late_after seconds: at most (1 + late_after) x 0.95 C = C. The unused slot is
        the earliest of this instance's own leased slots at or after R (no request), else one more
        leased from the budget; a write that took so long that no slot before s + 1 can be had (about
        a second) is logged, and counted in ``uncompensated``.
        """
        with self._lock:
            self._active += 1
        used: float | None = None
        try:
            started = self._clock()
            deadline = started + self.max_wait
            at = self._next_slot(deadline)
            if at > deadline + self.grace:  # a slot beyond the wait allowed: this clock lags the budget's
                raise WriteBudgetTimeout(
                    f"write budget {self.budget.name}: no write slot within {self.max_wait:g} s (the slot leased "
                    f"is {at - self._clock():.1f} s ahead of this instance's clock: do the instances' clocks agree?)")
            delay = at - self._clock()
            if delay > 0:
                self._sleep(delay)
            used = at
            yield self._clock() - started
        finally:
            with self._lock:
                self._active -= 1
            if used is not None:  # the write may have reached the store even if it raised
                self._pay_if_late(used)

    def _pay_if_late(self, slot: float) -> None:
        """Leave one slot in [now, slot + 1) unused when the write returned more than ``late_after``
        after ``slot`` (see :meth:`slot`)."""
        returned = self._clock()
        if returned - slot < self.late_after:
            return
        before = slot + 1.0
        with self._lock:
            for held in self._slots:  # ascending: slots are leased in order
                if held >= returned:
                    if held < before:
                        self._slots.remove(held)
                        self.compensated += 1
                        return
                    break
        while (left := before - self._clock()) > 0:
            with self._lease_lock:  # the budget's cached ETag is shared by this instance's leases
                # no refusal for distance (a slot past `before` is only a wasted one): a wait means
                # lost races, so try again while a slot before the end of the second can still be had
                result = self.budget.lease(1, max_ahead=left + 60.0)
            if isinstance(result, Lease):
                if result.first < before:
                    with self._lock:
                        self.compensated += 1
                    return
                break
            self._sleep(min(result, max(0.0, before - self._clock())))
        with self._lock:
            self.uncompensated += 1
        log.warning("write budget %s: a write returned %.2f s after its slot and no slot before the end of its "
                    "second could be left unused: the store may have counted more than %g writes in that second",
                    self.budget.name, returned - slot, self.rate)

    def stats(self) -> dict[str, Any]:
        return {"updates": self.budget.updates, "reads": self.budget.reads, "conflicts": self.budget.conflicts,
                "dropped": self.dropped, "compensated": self.compensated, "uncompensated": self.uncompensated}
