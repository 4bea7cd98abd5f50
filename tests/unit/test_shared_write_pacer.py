"""WritePacer on a fake clock: writes of one instance never land closer than 1/rate apart."""

from __future__ import annotations

import itertools
import threading

import pytest

from shared.rate_limit import WritePacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_first_write_does_not_wait_and_the_next_waits_a_full_interval_after_the_return():
    clock = FakeClock()
    pacer = WritePacer(5, clock=clock, sleep=clock.sleep)
    starts = []
    for _ in range(4):
        with pacer.slot():
            starts.append(clock.now)
            clock.now += 0.05  # the write itself takes 50 ms
    assert starts[0] == 100.0
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([0.25, 0.25, 0.25])  # 0.2 s interval + the 50 ms write


def test_no_one_second_window_holds_more_than_rate_writes():
    clock = FakeClock()
    pacer = WritePacer(5, clock=clock, sleep=clock.sleep)
    landed = []
    for i in range(50):
        with pacer.slot():
            duration = 0.01 if i % 3 else 0.12  # uneven write times
            landed.append(clock.now + duration * (i % 2))  # lands anywhere between start and return
            clock.now += duration
    busiest = max(sum(1 for t in landed if start <= t < start + 1.0) for start in landed)
    assert busiest <= 5


def test_an_idle_spell_saves_nothing_up():
    clock = FakeClock()
    pacer = WritePacer(10, clock=clock, sleep=clock.sleep)
    with pacer.slot():
        pass
    clock.now += 60  # long idle
    times = []
    for _ in range(3):
        with pacer.slot():
            times.append(clock.now)
    assert times[1] - times[0] == pytest.approx(0.1) and times[2] - times[1] == pytest.approx(0.1)


def test_concurrent_callers_are_serialised():
    pacer = WritePacer(1000)
    active = 0
    most = 0
    lock = threading.Lock()

    def write() -> None:
        nonlocal active, most
        with pacer.slot():
            with lock:
                active += 1
                most = max(most, active)
            with lock:
                active -= 1

    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert most == 1


def test_rate_must_be_positive():
    with pytest.raises(ValueError):
        WritePacer(0)
