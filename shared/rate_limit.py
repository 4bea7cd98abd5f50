"""A token bucket that protects a fragile store from bursts (Queue-Based Load Leveling).

Callers *reserve* tokens under a lock and then sleep outside it, so many threads or coroutines can
wait at once without serialising on the lock, and the order of reservations is the order of service.
The clock and the sleeps are injectable so tests run on a fake clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager


class TokenBucket:
    """``rate`` tokens per second, at most ``capacity`` saved up (the largest burst allowed)."""

    def __init__(
        self,
        rate: float,
        capacity: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.rate = float(rate)
        self.capacity = float(capacity if capacity is not None else max(1.0, rate))
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")
        self._clock = clock
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._updated = clock()

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
        self._updated = now

    def try_acquire(self, tokens: float = 1.0) -> bool:
        """Take tokens only if they are available now."""
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= tokens:
                self._tokens -= tokens
                return True
            return False

    def reserve(self, tokens: float = 1.0) -> float:
        """Take tokens now (possibly going into debt) and return how long to wait before using them."""
        if tokens > self.capacity:
            raise ValueError(f"cannot take {tokens} tokens from a bucket of capacity {self.capacity}")
        with self._lock:
            self._refill(self._clock())
            self._tokens -= tokens
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def acquire(self, tokens: float = 1.0) -> float:
        """Block until the tokens may be used; return the time waited."""
        delay = self.reserve(tokens)
        if delay > 0:
            self._sleep(delay)
        return delay

    async def acquire_async(self, tokens: float = 1.0) -> float:
        delay = self.reserve(tokens)
        if delay > 0:
            await self._async_sleep(delay)
        return delay


class WritePacer:
    """At most one write per ``1 / rate`` seconds, counted from when the previous write *returned*.

    A token bucket bounds the average, but its saved-up tokens let several instances burst into the
    same second, and a store sees writes when they land, not when they are issued. Spacing each write
    from the end of the previous one keeps the landing times of one instance at least ``1 / rate``
    apart (a write lands between its start and its return), so no one-second window ever holds more
    than ``rate`` writes of an instance, and the app-wide cap holds in every window, not just on
    average. The price is a little throughput: the write's own duration is added to each gap.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.rate = float(rate)
        self.interval = 1.0 / self.rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_start = float("-inf")

    @contextmanager
    def slot(self) -> Iterator[float]:
        """Hold the instance's write slot for one write; yields the time waited."""
        with self._lock:  # one write at a time per instance: its share is only `rate` per second anyway
            waited = max(0.0, self._next_start - self._clock())
            if waited > 0:
                self._sleep(waited)
            try:
                yield waited
            finally:
                self._next_start = self._clock() + self.interval
