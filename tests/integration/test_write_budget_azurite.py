"""The shared write budget against a real Azurite: leases of write slots with ETag concurrency.

What it must do (docs/devhost.md, "The shared write budget"): one instance alone can use the whole
cap; any number of instances together never exceed it; two leases never overlap however the
updates race (optimistic concurrency: If-Match on the ETag, 412 on a race); a dead instance's
share comes back when its leases lapse, at most ``max_ahead`` + one batch after it took them.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from devhost.demo.metrics import peak_sliding
from shared.write_budget import BudgetClock, Lease, SharedWritePacer, WriteBudgetTimeout
from tests.fixtures.azurite import Azurite  # the `azurite` fixture is registered by tests/conftest.py

# func_only: the bound is on the test, not on the session's Azurite start that the first test of a
# worker waits for (over 20 s on a loaded machine; the start has a deadline of its own).
pytestmark = pytest.mark.timeout(60, func_only=True)
RATE = 50.0


def _clock(azurite: Azurite, table: str, name: str, rate: float = RATE, **kwargs: Any) -> BudgetClock:
    service = TableServiceClient.from_connection_string(azurite.connection_string)
    return BudgetClock(service.get_table_client(table), name, rate, **kwargs)


def _table() -> str:
    return "budget" + uuid.uuid4().hex[:12]


class _RecordingClock(BudgetClock):
    """A BudgetClock that keeps every lease it was granted: the slots are what the budget promises
    (a write starts within ``grace`` of one of them), whereas a writer thread's own timestamp of its
    start also holds however long a loaded machine kept the thread from running."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leases: list[Lease] = []

    def lease(self, count: int, **kwargs: Any) -> Lease | float:
        result = super().lease(count, **kwargs)
        if isinstance(result, Lease):
            self.leases.append(result)
        return result


def _recording(azurite: Azurite, table: str, name: str) -> _RecordingClock:
    service = TableServiceClient.from_connection_string(azurite.connection_string)
    return _RecordingClock(service.get_table_client(table), name, RATE)


def test_one_instance_alone_uses_the_whole_cap(azurite: Azurite) -> None:
    """On a clock that moves only when the pacer sleeps (the Azurite round trips take no time on it),
    so what is measured is the budget's arithmetic, not how fast a loaded machine runs the writer: a
    static split over the app's 4 instances would give this one 0.25 x RATE; alone it gets every
    slot, 0.95 x RATE (the headroom). The rate on real time is a benchmark figure
    (bench/load_leveling.py, docs/benchmarks.md)."""
    clocks = _Clocks(skew=0.0)
    pacer = SharedWritePacer(_clock(azurite, _table(), "leveler", clock=clocks.budget_now),
                             clock=clocks.pacer_now, sleep=clocks.sleep)
    starts = []
    for _ in range(60):
        with pacer.slot():
            starts.append(clocks.pacer_now())
    rate = (len(starts) - 1) / (starts[-1] - starts[0])
    assert rate == pytest.approx(0.95 * RATE, rel=0.05), pacer.stats()
    assert peak_sliding(starts) <= RATE and pacer.dropped == 0


def test_four_instances_together_stay_within_the_cap(azurite: Azurite) -> None:
    table = _table()
    clocks = [_recording(azurite, table, "leveler") for _ in range(4)]
    pacers = [SharedWritePacer(clock) for clock in clocks]
    writes = [0] * len(pacers)
    lock = threading.Lock()
    enough = threading.Event()
    give_up_at = time.monotonic() + 30  # the joins below wait as long; a thread must not outlive them

    def writer(i: int) -> None:
        while not enough.is_set() and time.monotonic() < give_up_at:
            with pacers[i].slot():
                with lock:
                    writes[i] += 1
                    if sum(writes) >= 100:
                        enough.set()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(pacers)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    stats = [p.stats() for p in pacers]
    assert sum(writes) >= 100, (writes, stats)
    slots = sorted(t for clock in clocks for lease in clock.leases for t in lease.slots())
    # Every write used a slot of its instance's, and slots of all instances together are 1 / (0.95 RATE)
    # apart: no 1-second window holds more than RATE of them, however the instances raced.
    assert len(slots) >= sum(writes) + sum(p.dropped for p in pacers) - 1e-9, stats
    assert all(b - a >= clocks[0].interval - 1e-6 for a, b in itertools.pairwise(slots)), stats
    assert peak_sliding(slots) <= RATE, stats
    assert sum(len(clock.leases) for clock in clocks) < len(slots), stats  # leases batched several slots


def test_racing_leases_never_overlap(azurite: Azurite) -> None:
    table = _table()
    clocks = [_clock(azurite, table, "race") for _ in range(6)]
    # A race for certain first: clocks[0] read the entity, clocks[1] moved it on, and clocks[0]'s
    # update on its stale ETag is turned away (412) and retried on a fresh read.
    first = clocks[0].lease(3, max_ahead=60.0)
    second = clocks[1].lease(3, max_ahead=60.0)
    third = clocks[0].lease(3, max_ahead=60.0)
    assert clocks[0].conflicts == 1
    leases: list[Lease] = [lease for lease in (first, second, third) if isinstance(lease, Lease)]
    assert len(leases) == 3
    lock = threading.Lock()

    give_up_at = time.monotonic() + 30  # the joins below wait as long; a thread must not outlive them

    def lease_many(clock: BudgetClock) -> None:
        got = 0
        while got < 10 and time.monotonic() < give_up_at:
            result = clock.lease(3, max_ahead=60.0)
            if isinstance(result, Lease):
                got += 1
                with lock:
                    leases.append(result)
            else:  # lost every race in a row: told to back off
                time.sleep(result)

    threads = [threading.Thread(target=lease_many, args=(c,)) for c in clocks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    spans = sorted((lease.first, lease.first + lease.count * lease.interval) for lease in leases)
    assert len(spans) == 63
    assert all(end <= next_start + 1e-9 for (_, end), (next_start, _) in itertools.pairwise(spans))


def test_a_dead_instance_share_returns_when_its_leases_lapse(azurite: Azurite) -> None:
    """On a clock that moves only when the survivor sleeps: "right after the lapse" is then the budget's
    arithmetic, not how soon a loaded machine ran the survivor's thread again."""
    clocks = _Clocks(skew=0.0)
    table = _table()
    dead = _clock(azurite, table, "leveler", clock=clocks.budget_now)
    held: list[Lease] = []
    while True:  # take everything this instance may hold ahead, then "die" without releasing
        result = dead.lease(12, max_ahead=0.5)
        if not isinstance(result, Lease):
            break
        held.append(result)
    died_at = clocks.budget_now()
    lapses_at = max(lease.first + lease.count * lease.interval for lease in held)
    assert lapses_at <= died_at + 0.5 + 12 * dead.interval  # the documented bound: max_ahead + one batch
    survivor = _clock(azurite, table, "leveler", clock=clocks.budget_now)
    result = survivor.lease(1, max_ahead=0.5)
    waits = 0
    while not isinstance(result, Lease):
        waits += 1
        assert waits < 1000, "the survivor never got a slot"
        clocks.sleep(result)
        result = survivor.lease(1, max_ahead=0.5)
    assert result.first >= lapses_at - 1e-6  # the dead one's slots were never handed out twice
    assert result.first <= lapses_at + 0.5  # ...and the survivor got the budget back right after


def test_writes_held_up_together_are_paid_for_so_no_second_at_the_store_goes_over_the_cap(azurite: Azurite) -> None:
    """The store counts a write when it arrives, anywhere between its start and its return, and writes
    held up together (the store or the machine stalls for 300 ms) arrive together when it ends: on top
    of the next second's own slots. Four instances write through stalls of 300 ms every 1.5 s; a
    write that starts in a stall returns and arrives when it ends, the others arrive a random moment
    within their few milliseconds. No 1-s window of arrivals holds more than the cap (without the
    slots left unused for late writes it held 61 and 62 of 50 in two runs), because each write that returned more
    than ``late_after`` after its slot left a slot unused (SharedWritePacer.slot has the argument).
    Nothing here is timed: the bound holds however the threads are scheduled, except for a write
    that returned about a second late, which the pacer counts as uncompensated."""
    table = _table()
    pacers = [SharedWritePacer(_clock(azurite, table, "leveler")) for _ in range(4)]
    arrivals: list[float] = []
    lock = threading.Lock()
    chooser = random.Random(36)
    began = time.time()
    give_up_at = time.monotonic() + 30

    def writer(pacer: SharedWritePacer) -> None:
        while time.monotonic() < give_up_at:
            with lock:
                if len(arrivals) >= 200:
                    return
                share = chooser.random()
            with pacer.slot():
                started = time.time()
                into_cycle = (started - began) % 1.5
                time.sleep(0.3 - into_cycle if into_cycle < 0.3 else 0.005)
                returned = time.time()
            with lock:
                arrivals.append(returned if into_cycle < 0.3 else started + share * (returned - started))

    threads = [threading.Thread(target=writer, args=(pacer,)) for pacer in pacers for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    stats = [p.stats() for p in pacers]
    assert len(arrivals) >= 200, stats
    assert sum(s["compensated"] for s in stats) > 0, stats  # the late writes were paid for
    assert peak_sliding(arrivals) <= RATE + sum(s["uncompensated"] for s in stats), stats


class _Clocks:
    """Two fake clocks ``skew`` seconds apart that advance together when anything sleeps."""

    def __init__(self, skew: float) -> None:
        self.budget = 1_000_000.0
        self.skew = skew

    def budget_now(self) -> float:
        return self.budget

    def pacer_now(self) -> float:
        return self.budget + self.skew

    def sleep(self, seconds: float) -> None:
        self.budget += max(seconds, 0.0)


def test_a_pacer_whose_clock_runs_ahead_of_the_budget_gives_up_with_a_clear_error(azurite: Azurite) -> None:
    """Every slot leased is already past on a clock an hour ahead, so each is dropped unused (using one
    late could put two writes closer than 1 / cap). The pacer must not lease and drop for ever: after
    ``max_wait`` seconds it raises, naming the budget and the clocks, and nothing has been written."""
    clocks = _Clocks(skew=3600.0)
    service = TableServiceClient.from_connection_string(azurite.connection_string)
    budget = BudgetClock(service.get_table_client(_table()), "skewed", RATE, clock=clocks.budget_now)
    pacer = SharedWritePacer(budget, max_wait=2.0, clock=clocks.pacer_now, sleep=clocks.sleep)
    writes = 0
    with pytest.raises(WriteBudgetTimeout, match=r"skewed.*2(\.0)? s.*clock") as raised:
        with pacer.slot():
            writes += 1
    assert writes == 0
    assert isinstance(raised.value, TimeoutError)
    assert pacer.dropped > 0 and clocks.budget - 1_000_000.0 <= 2.0 + 1.05  # at most one wait past the deadline


def test_a_budget_pushed_far_ahead_by_another_instance_ends_the_wait_with_a_clear_error(azurite: Azurite) -> None:
    """An instance whose clock runs an hour ahead leases from its own now: the budget's next free slot
    is then an hour ahead of everyone else, who would wait for it in one-second naps without end."""
    clocks = _Clocks(skew=0.0)
    table = _table()
    service = TableServiceClient.from_connection_string(azurite.connection_string)
    ahead = BudgetClock(service.get_table_client(table), "pushed", RATE, clock=lambda: clocks.budget + 3600.0)
    assert isinstance(ahead.lease(5), Lease)
    budget = BudgetClock(service.get_table_client(table), "pushed", RATE, clock=clocks.budget_now)
    pacer = SharedWritePacer(budget, max_wait=2.0, clock=clocks.pacer_now, sleep=clocks.sleep)
    with pytest.raises(WriteBudgetTimeout, match=r"pushed.*2(\.0)? s"):
        with pacer.slot():
            pytest.fail("no slot should be handed out")
    assert clocks.budget - 1_000_000.0 <= 2.0 + 1.05


def test_a_pacer_whose_clock_lags_the_budget_does_not_sleep_past_its_wait(azurite: Azurite) -> None:
    """On a clock an hour behind, the slot leased lies an hour ahead: the pacer raises instead of
    sleeping that long, and the slot goes unused (an unused slot never breaks the cap)."""
    clocks = _Clocks(skew=-3600.0)
    service = TableServiceClient.from_connection_string(azurite.connection_string)
    budget = BudgetClock(service.get_table_client(_table()), "lagging", RATE, clock=clocks.budget_now)
    pacer = SharedWritePacer(budget, max_wait=2.0, clock=clocks.pacer_now, sleep=clocks.sleep)
    with pytest.raises(WriteBudgetTimeout, match=r"lagging.*2(\.0)? s.*clock"):
        with pacer.slot():
            pytest.fail("no slot should be handed out")
    assert clocks.budget - 1_000_000.0 <= 2.0 + 1.05
