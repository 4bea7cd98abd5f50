"""Leader election with a Service Bus session lock (ActiveMQ's exclusive consumer as a distributed lock).

Every replica asks for the same well-known session on a session-enabled queue. The broker grants a
session to one receiver at a time, so the holder is the leader; the others keep retrying and one of
them takes over when the holder's lock is released (clean stop) or expires (crash).

Fencing: a lock can be lost without the holder noticing (a paused process, a partition), so the
holder must stop acting as leader *before* the broker could give the session to someone else. The
lease is trusted only until ``start_of_last_successful_renewal + lock_duration - safety_margin`` on a
monotonic clock: the broker's expiry is at least ``lock_duration`` after it saw the request, which is
after we sent it. The margin absorbs clock-rate drift and the time a callback needs to stand down.
A watchdog thread fences at that deadline even if a renewal call is stuck.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("pipeline.leader")

DEFAULT_SESSION_ID = "leader"


class Lease:
    """The fencing arithmetic, separate from I/O so it can be tested on a fake clock."""

    def __init__(
        self, lock_duration: float, safety_margin: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if lock_duration <= 0:
            raise ValueError("lock_duration must be > 0")
        if not 0 <= safety_margin < lock_duration:
            raise ValueError("safety_margin must be >= 0 and smaller than lock_duration")
        self.lock_duration = lock_duration
        self.safety_margin = safety_margin
        self._clock = clock
        self._valid_until: float | None = None

    def renewed(self, requested_at: float) -> None:
        """Record a successful acquire/renew whose request was sent at ``requested_at``."""
        candidate = requested_at + self.lock_duration - self.safety_margin
        if self._valid_until is None or candidate > self._valid_until:
            self._valid_until = candidate

    def clear(self) -> None:
        self._valid_until = None

    @property
    def valid_until(self) -> float | None:
        return self._valid_until

    def valid(self) -> bool:
        return self._valid_until is not None and self._clock() < self._valid_until

    def remaining(self) -> float:
        if self._valid_until is None:
            return 0.0
        return max(0.0, self._valid_until - self._clock())


class LeaderElector:
    """Compete for ``session_id`` on ``queue``; call ``on_elected`` / ``on_lost`` as leadership changes.

    ``client`` is an ``azure.servicebus.ServiceBusClient`` (anything with ``get_queue_receiver``).
    ``lock_duration`` is the queue's LockDuration in seconds; when the broker reports a shorter
    remaining lock at acquisition, the shorter value is used. ``run()`` blocks until ``stop()``.
    """

    def __init__(
        self,
        client: Any,
        queue: str,
        session_id: str,
        on_elected: Callable[[], None],
        on_lost: Callable[[], None],
        *,
        lock_duration: float = 30.0,
        safety_margin: float | None = None,
        renew_fraction: float = 1 / 3,
        retry_interval: float = 1.0,
        acquire_wait: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
        watchdog: bool = True,
    ) -> None:
        self._client = client
        self.queue = queue
        self.session_id = session_id
        self._on_elected = on_elected
        self._on_lost = on_lost
        self.lock_duration = lock_duration
        self.safety_margin = safety_margin if safety_margin is not None else max(1.0, lock_duration / 6)
        self.renew_fraction = renew_fraction
        self.retry_interval = retry_interval
        self.acquire_wait = acquire_wait
        self._clock = clock
        self._sleep = sleep
        self._use_watchdog = watchdog
        self._stop = threading.Event()
        self._state_lock = threading.Lock()
        self._leader = False
        self._lease = Lease(lock_duration, self.safety_margin, clock)
        self._lease_changed = threading.Condition()

    # ---- public -------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        """True only while the lease is valid: check this right before acting as leader."""
        with self._state_lock:
            return self._leader and self._lease.valid()

    @property
    def lease(self) -> Lease:
        return self._lease

    def stop(self) -> None:
        self._stop.set()
        with self._lease_changed:
            self._lease_changed.notify_all()

    def run(self) -> None:
        while not self._stop.is_set():
            requested_at = self._clock()
            try:
                receiver = self._client.get_queue_receiver(
                    self.queue, session_id=self.session_id, max_wait_time=self.acquire_wait
                )
                receiver.__enter__()
            except Exception as exc:  # another replica holds the session, or the broker is unreachable
                log.debug("session %s not acquired: %s", self.session_id, exc)
                self._wait(self.retry_interval)
                continue
            try:
                if getattr(receiver.session, "locked_until_utc", None) is None:
                    # The SDK can return from open even though the broker refused the session link
                    # (the refusal surfaces only on the next operation): no lock time, no leadership.
                    log.debug("session %s: link opened without a lock", self.session_id)
                    self._wait(self.retry_interval)
                    continue
                self.lead(receiver.session, requested_at)
            finally:
                try:
                    receiver.__exit__(None, None, None)  # releases the session if we still hold it
                except Exception as exc:
                    log.debug("closing the session receiver failed: %s", exc)

    # ---- leadership ---------------------------------------------------------------------------
    def effective_lock_duration(self, session: Any) -> float:
        """The configured duration, or less if the broker's locked_until says less is left."""
        duration = self.lock_duration
        locked_until = getattr(session, "locked_until_utc", None)
        if isinstance(locked_until, datetime):
            if locked_until.tzinfo is None:
                locked_until = locked_until.replace(tzinfo=UTC)
            reported = (locked_until - datetime.now(UTC)).total_seconds()
            if self.safety_margin < reported < duration:
                duration = reported
        return duration

    def lead(self, session: Any, requested_at: float) -> None:
        """Hold the session: renew every lock/3, fence at the lease deadline. Returns when not leader."""
        duration = self.effective_lock_duration(session)
        margin = min(self.safety_margin, duration / 2)
        with self._state_lock:
            self._lease = Lease(duration, margin, self._clock)
            self._lease.renewed(requested_at)
            if not self._lease.valid():
                return  # acquiring took so long that the lease is already untrustworthy
            self._leader = True
        log.info("elected leader of session %s (lock %.1fs, margin %.1fs)", self.session_id, duration, margin)
        self._call(self._on_elected)
        watchdog = None
        if self._use_watchdog:
            watchdog = threading.Thread(target=self._watch, name="leader-watchdog", daemon=True)
            watchdog.start()
        interval = duration * self.renew_fraction
        next_renewal = requested_at + interval
        try:
            while not self._stop.is_set() and self.is_leader():
                deadline = self._lease.valid_until or 0.0
                self._wait(max(0.0, min(next_renewal, deadline) - self._clock()))
                if self._stop.is_set() or not self.is_leader():
                    break
                now = self._clock()
                if now < next_renewal:
                    continue
                try:
                    session.renew_lock(timeout=max(0.1, self._lease.remaining()))
                except Exception as exc:
                    log.warning("renewing session %s failed: %s", self.session_id, exc)
                    next_renewal = now + min(self.retry_interval, interval)
                    continue
                with self._state_lock:
                    self._lease.renewed(now)
                with self._lease_changed:
                    self._lease_changed.notify_all()
                next_renewal = now + interval
        finally:
            self._fence("stopped" if self._stop.is_set() else "lease expired")
            with self._lease_changed:
                self._lease_changed.notify_all()
            if watchdog is not None:
                watchdog.join(timeout=5)

    def _watch(self) -> None:
        """Fence at the deadline even when the main loop is stuck in a network call."""
        with self._lease_changed:
            while self._leader and not self._stop.is_set():
                remaining = self._lease.remaining()
                if remaining <= 0:
                    break
                self._lease_changed.wait(timeout=remaining)
        if not self._stop.is_set():
            self._fence("lease expired (watchdog)")

    def _fence(self, why: str) -> None:
        with self._state_lock:
            was_leader = self._leader
            self._leader = False
            self._lease.clear()
        if was_leader:
            log.info("no longer leader of session %s: %s", self.session_id, why)
            self._call(self._on_lost)

    def _call(self, callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:
            log.exception("leadership callback failed")

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        else:
            self._stop.wait(seconds)
