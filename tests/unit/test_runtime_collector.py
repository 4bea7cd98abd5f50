"""The collector policy (runtime/collector.py): full collections at idle moments, none on their own.

Real garbage collection on real objects: a reference cycle that became garbage is freed at the first
idle moment, not while the broker is busy; a busy broker still collects after ``full_after`` young
collections; what start-up left is frozen, and ``stop`` gives Python its own policy back.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sbemulator.runtime.collector import FREEZE_EVERY_S, Collector


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _old_garbage_cycle() -> weakref.ref:
    """A reference cycle that lived long enough to reach the oldest generation, then became garbage."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    gc.collect(1)  # survivors of a generation-1 collection move to generation 2
    ref = weakref.ref(a)
    del a, b
    return ref


def _young_collections(count: int) -> None:
    for _ in range(count):
        gc.collect(1)


@pytest.fixture
def collector() -> Iterator[Collector]:
    policy = Collector(idle_s=1.0, full_after=50)
    saved = gc.get_threshold()
    policy.start()
    try:
        yield policy
    finally:
        policy.stop()
        assert gc.get_threshold() == saved
        assert gc.get_freeze_count() == 0


def test_start_freezes_what_exists_and_turns_automatic_full_collections_off(collector: Collector) -> None:
    assert gc.get_freeze_count() > 0
    gen0, gen1, gen2 = gc.get_threshold()
    assert gen2 >= 1 << 30 and (gen0, gen1) != (0, 0)


def test_a_garbage_cycle_waits_while_busy_and_is_freed_at_the_next_idle_moment(collector: Collector) -> None:
    ref = _old_garbage_cycle()
    _young_collections(10)  # the young generations are collected; the oldest waits
    assert ref() is not None
    collector.tick(last_input=100.0, now=100.5)  # input half a second ago: busy
    assert ref() is not None
    collector.tick(last_input=100.0, now=101.5)  # a second without input: idle
    assert ref() is None
    assert collector.idle_collections == 1
    assert gc.get_freeze_count() > 0  # frozen again after the idle collection


def test_a_broker_that_is_never_idle_still_collects_after_full_after_young_collections(collector: Collector) -> None:
    ref = _old_garbage_cycle()
    _young_collections(collector.full_after)
    collector.tick(last_input=100.0, now=100.1)
    assert ref() is None
    assert collector.busy_collections == 1


def test_nothing_is_collected_without_young_collections_since_the_last_full_one(collector: Collector) -> None:
    collector.tick(last_input=0.0, now=100.0)
    assert collector.idle_collections == 0 and collector.busy_collections == 0


def test_a_busy_fallback_freezes_what_survived_so_the_next_one_does_not_scan_it_again(collector: Collector) -> None:
    survivors = [_Node() for _ in range(1000)]
    frozen_before = gc.get_freeze_count()
    _young_collections(collector.full_after)
    collector.tick(last_input=100.0, now=100.1)
    assert collector.busy_collections == 1 and collector.busy_full_collections == 0
    assert gc.get_freeze_count() >= frozen_before + len(survivors)
    assert not any(isinstance(o, _Node) for o in gc.get_objects(generation=2))  # none left to scan again


def _frozen_then_garbage_cycle(collector: Collector) -> weakref.ref:
    """A cycle alive at a busy fallback (so frozen by it) that became garbage afterwards."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    _young_collections(collector.full_after)
    collector.tick(last_input=100.0, now=100.1)
    ref = weakref.ref(a)
    del a, b
    return ref


def test_a_cycle_frozen_alive_waits_for_the_next_idle_moment(collector: Collector) -> None:
    ref = _frozen_then_garbage_cycle(collector)
    _young_collections(collector.full_after)
    collector.tick(last_input=100.0, now=100.2)  # busy: the fallback does not look at frozen objects
    assert ref() is not None and collector.busy_collections == 2
    collector.tick(last_input=100.0, now=101.5)
    assert ref() is None and collector.idle_collections == 1


def test_without_idle_moments_the_frozen_garbage_is_bounded_by_the_growth_floor() -> None:
    # why nothing leaks under traffic that never pauses: a full collection once the frozen objects grew
    policy = Collector(idle_s=1.0, full_after=5, growth_floor=0)
    policy.start()
    try:
        ref = _frozen_then_garbage_cycle(policy)
        assert ref() is not None
        grown = [_Node() for _ in range(2 * gc.get_freeze_count())]  # the frozen heap more than doubles
        _young_collections(policy.full_after)
        policy.tick(last_input=100.0, now=100.2)
        assert ref() is None and policy.busy_full_collections >= 1 and policy.idle_collections == 0
        del grown
    finally:
        policy.stop()


def test_on_the_event_loop_the_busy_fallback_runs_as_a_callback_of_its_own_without_a_tick() -> None:
    # why: the timer task ticks at most every 0.25 s when no timer is due, and a burst of work in
    # between left 100,000 objects for one fallback; the fallback now follows the young collections
    import asyncio

    async def scenario() -> tuple[int, bool, int]:
        policy = Collector(idle_s=1.0, full_after=3)
        policy.start()
        try:
            ref = _old_garbage_cycle()
            _young_collections(policy.full_after)  # the hook schedules the fallback; nothing ran yet
            before = policy.busy_collections
            for _ in range(3):
                await asyncio.sleep(0)
            return before, ref() is None, policy.busy_collections
        finally:
            policy.stop()

    before, freed, after = asyncio.run(scenario())
    assert before == 0 and freed and after == 1
    assert not any(getattr(cb, "__self__", None).__class__ is Collector for cb in gc.callbacks)


def test_tick_says_whether_it_collected_so_the_timer_task_yields_before_the_broker_timers(
        collector: Collector) -> None:
    assert collector.tick(last_input=100.0, now=100.1) is True  # busy: the first young freeze
    assert collector.tick(last_input=100.0, now=100.15) is False  # the next one waits FREEZE_EVERY_S
    _young_collections(collector.full_after)
    assert collector.tick(last_input=100.0, now=100.16) is True  # the busy fallback does not wait


def test_while_busy_a_container_made_since_the_last_freeze_is_frozen_while_it_is_small(
        collector: Collector) -> None:
    # why: a broker taking 100,000 locks allocates almost nothing that lives, so no young collection
    # came to promote a new receiver's lock set; it stayed young while it grew, and each collection
    # that came visited every key (the canary's expire phase, docs/benchmarks.md)
    collector.tick(last_input=100.0, now=100.0)
    lock_set: set[bytes] = set()
    assert any(o is lock_set for o in gc.get_objects(generation=0))
    collector.tick(last_input=100.0, now=100.0 + FREEZE_EVERY_S)
    assert not any(o is lock_set for g in range(3) for o in gc.get_objects(generation=g))  # frozen
    assert collector.young_freezes == 2 and collector.idle_collections == 0
