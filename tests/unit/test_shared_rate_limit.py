from __future__ import annotations

import threading

import pytest

from shared.rate_limit import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def test_burst_up_to_capacity_then_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10, capacity=5, clock=clock, sleep=clock.sleep)
    assert [bucket.try_acquire() for _ in range(6)] == [True] * 5 + [False]
    clock.now += 0.1
    assert bucket.try_acquire() and not bucket.try_acquire()


def test_acquire_paces_a_long_run_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=20, capacity=1, clock=clock, sleep=clock.sleep)
    for _ in range(101):
        bucket.acquire()
    # 1 token up front, then 100 more at 20/s: 5 seconds, not less
    assert clock.now == pytest.approx(5.0)


def test_idle_time_does_not_save_more_than_capacity() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=1, capacity=3, clock=clock, sleep=clock.sleep)
    clock.now += 1000
    assert sum(bucket.try_acquire() for _ in range(10)) == 3


def test_reservations_queue_up_in_order() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2, capacity=1, clock=clock)
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.5, 1.0, 1.5]


async def test_async_acquire_uses_the_async_sleep() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=4, capacity=1, clock=clock, sleep=lambda s: pytest.fail("blocking sleep"),
                         async_sleep=clock.async_sleep)
    for _ in range(5):
        await bucket.acquire_async()
    assert clock.now == pytest.approx(1.0)


def test_threads_never_exceed_the_rate() -> None:
    """Real threads against a fake clock: no token may be handed out twice."""
    clock = FakeClock()
    lock = threading.Lock()
    bucket = TokenBucket(rate=10, capacity=10, clock=clock)
    delays: list[float] = []

    def worker() -> None:
        for _ in range(50):
            delay = bucket.reserve()
            with lock:
                delays.append(delay)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    # 400 tokens at 10/s with 10 up front: the last waits exactly (400 - 10) / 10 seconds
    assert len(delays) == 400
    assert max(delays) == pytest.approx(39.0)
    assert sorted(delays) == pytest.approx([max(0.0, (i - 9) / 10) for i in range(400)])


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0)
    with pytest.raises(ValueError):
        TokenBucket(rate=1, capacity=2).reserve(3)
