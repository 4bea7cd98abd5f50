"""``strict``: one pool that always takes high before low, the pattern's "check the high-priority
queue first".

A Functions trigger binds one entity, so a single function cannot "take from high, else from low".
The closest honest form: one app with both triggers, whose low-priority function waits, before it
works, until the high subscription has nothing in it (active or locked). It peeks the high
subscription for that (a peek is one Service Bus operation; an instance's waiting invocations share one
peek per ``interval``). Under sustained high load a low message can wait indefinitely (starvation, the
trade-off the pattern names); after ``max_hold`` seconds the invocation gives the message back
(abandoned, so its delivery count grows and after MaxDeliveryCount it is dead-lettered as
``MaxDeliveryCountExceeded``): the lock must not lapse while the invocation holds it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from shared.operations import OPERATIONS, PEEK


class StarvedError(RuntimeError):
    """High-priority work never paused for ``max_hold`` seconds; the low message goes back."""


class HighFirstGate:
    """Wait until ``high_pending()`` (a peek) says the high subscription is empty; peeks are shared."""

    def __init__(self, high_pending: Callable[[], bool], interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 close: Callable[[], None] | None = None) -> None:
        self._high_pending = high_pending
        self._close = close
        self.interval = interval
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._checked_at = -float("inf")
        self._pending = True
        self.waited_s = 0.0  # total time low invocations spent held back (for reports)

    def _pending_now(self) -> bool:
        with self._lock:
            if self._clock() - self._checked_at >= self.interval:
                OPERATIONS.add(PEEK)
                self._pending = self._high_pending()
                self._checked_at = self._clock()
            return self._pending

    def wait_for_high_idle(self, max_hold: float) -> float:
        """Seconds waited; raises :class:`StarvedError` after ``max_hold``."""
        started = self._clock()
        while self._pending_now():
            waited = self._clock() - started
            if waited >= max_hold:
                raise StarvedError(f"high-priority work kept the low message waiting {waited:.0f} s")
            self._sleep(self.interval)
        waited = self._clock() - started
        with self._lock:
            self.waited_s += waited
        return waited

    def close(self) -> None:
        """Close what peeks (the instance stops)."""
        if self._close is not None:
            with self._lock:
                self._close()
