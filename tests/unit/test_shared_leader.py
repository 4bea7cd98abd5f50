"""Leader election fencing on a fake clock; a stand-in session replaces the broker's session lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.leader import LeaderElector, Lease
from shared.leader_cli import leader_intervals


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


class FakeSession:
    """renew_lock succeeds until ``fail_from`` (clock time); ``on_renew`` can simulate a slow call."""

    def __init__(self, clock: FakeClock, fail_from: float = float("inf"),
                 on_renew: Callable[[], None] | None = None) -> None:
        self.clock = clock
        self.fail_from = fail_from
        self.on_renew = on_renew
        self.renewals: list[float] = []
        # set once the broker has granted the lock; far enough ahead not to shorten lock_duration
        self.locked_until_utc: datetime | None = datetime.now(UTC) + timedelta(hours=1)

    def renew_lock(self, timeout: float | None = None) -> None:
        if self.on_renew:
            self.on_renew()
        if self.clock.now >= self.fail_from:
            raise ConnectionError("link detached")
        self.renewals.append(self.clock.now)


class Recorder:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.events: list[tuple[str, float]] = []

    def elected(self) -> None:
        self.events.append(("elected", self.clock.now))

    def lost(self) -> None:
        self.events.append(("lost", self.clock.now))


def _elector(clock: FakeClock, rec: Recorder, client: object = None, **kwargs: Any) -> LeaderElector:
    return LeaderElector(client, "leader-election", "leader", rec.elected, rec.lost, lock_duration=30.0,
                         safety_margin=3.0, clock=clock, sleep=clock.sleep, watchdog=False, **kwargs)


def test_lease_is_valid_until_request_time_plus_lock_minus_margin() -> None:
    clock = FakeClock()
    lease = Lease(30.0, 3.0, clock)
    assert not lease.valid()
    lease.renewed(requested_at=100.0)
    clock.now = 126.999
    assert lease.valid()
    clock.now = 127.0
    assert not lease.valid()
    lease.renewed(requested_at=110.0)
    assert lease.valid_until == 137.0
    lease.renewed(requested_at=105.0)  # an older, slower renewal never shortens the lease
    assert lease.valid_until == 137.0


def test_lease_rejects_a_margin_that_leaves_nothing() -> None:
    with pytest.raises(ValueError):
        Lease(10.0, 10.0)


def test_healthy_leader_renews_every_third_of_the_lock_and_steps_down_on_stop() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    elector = _elector(clock, rec)
    session = FakeSession(clock, on_renew=lambda: elector.stop() if clock.now >= 200 else None)
    elector.lead(session, requested_at=clock.now)
    assert rec.events[0] == ("elected", 100.0)
    assert rec.events[-1][0] == "lost" and len(rec.events) == 2
    gaps = [b - a for a, b in zip([100.0, *session.renewals], session.renewals, strict=False)]
    assert gaps and all(gap == pytest.approx(10.0) for gap in gaps)
    assert not elector.is_leader()


def test_leader_fences_before_the_lock_can_expire_when_renewals_fail() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    elector = _elector(clock, rec)
    session = FakeSession(clock, fail_from=125.0)  # renewals at 110 and 120 succeed, then the link is gone
    elector.lead(session, requested_at=100.0)
    assert session.renewals == [110.0, 120.0]
    (_, lost_at) = rec.events[-1]
    broker_expiry = 120.0 + 30.0  # the broker could hand the session to another replica from here on
    assert lost_at <= broker_expiry - 3.0
    assert lost_at == pytest.approx(147.0)  # not a moment earlier than the lease allows either


def test_a_renewal_that_hangs_past_the_deadline_does_not_extend_leadership() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    elector = _elector(clock, rec)
    hung: list[bool] = []

    def hang() -> None:
        if clock.now >= 120 and not hung:
            hung.append(True)
            clock.now += 60  # the call returns 'successfully' long after our lock could have expired

    elector.lead(FakeSession(clock, on_renew=hang), requested_at=100.0)
    assert rec.events[-1][0] == "lost"
    assert not elector.is_leader()


def test_is_leader_turns_false_at_the_deadline_even_before_the_loop_notices() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    elector = _elector(clock, rec)
    checks: list[tuple[float, bool]] = []

    def probe() -> None:
        checks.append((clock.now, elector.is_leader()))
        clock.now += 40  # the renewal at 110 stalls until 150: past valid_until = 127

    elector.lead(FakeSession(clock, on_renew=probe), requested_at=100.0)
    assert checks[0] == (110.0, True)
    assert rec.events[-1] == ("lost", 150.0)


def test_watchdog_fences_while_the_renew_call_is_stuck() -> None:
    """Real threads and clock (0.6 s lock): on_lost must fire at the deadline, not when the call returns.

    "Not when the call returns" is checked as an order, not as a time: the renew call is still stuck
    (released only after on_lost was seen) when on_lost fires. Only the lower bound is a time, and
    a loaded machine can only make it later."""
    release = threading.Event()
    lost_at: list[float] = []
    stuck_when_lost: list[bool] = []

    def on_lost() -> None:
        stuck_when_lost.append(not release.is_set())
        lost_at.append(time.monotonic())

    elector = LeaderElector(None, "q", "s", lambda: None, on_lost,
                            lock_duration=0.6, safety_margin=0.2, renew_fraction=0.25)

    class StuckSession:
        locked_until_utc = None

        def renew_lock(self, timeout: float | None = None) -> None:
            release.wait(60)  # longer than the wait below: returns only once the test released it
            raise ConnectionError("gave up")

    start = time.monotonic()
    runner = threading.Thread(target=elector.lead, args=(StuckSession(), start))
    runner.start()
    deadline = time.monotonic() + 30
    while not lost_at and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    runner.join(timeout=10)
    assert lost_at, "the watchdog did not fence"
    assert stuck_when_lost == [True]  # fenced while the renew call was still stuck
    assert lost_at[0] - start >= 0.35  # at valid_until (0.4 s), not before
    assert not elector.is_leader()


class FakeReceiver:
    def __init__(self, session: FakeSession) -> None:
        self.session = session
        self.closed = False

    def __enter__(self) -> FakeReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True


class FakeClient:
    """The first ``busy`` attempts find the session locked by another replica."""

    def __init__(self, clock: FakeClock, busy: int, session: FakeSession) -> None:
        self.clock = clock
        self.busy = busy
        self.attempts: list[float] = []
        self.receivers: list[FakeReceiver] = []
        self.session = session

    def get_queue_receiver(self, queue: str, session_id: str, max_wait_time: float) -> FakeReceiver:
        self.attempts.append(self.clock.now)
        if len(self.attempts) <= self.busy:
            raise RuntimeError("SessionCannotBeLocked")
        receiver = FakeReceiver(self.session)
        self.receivers.append(receiver)
        return receiver


def test_run_retries_until_the_session_is_free_then_leads_and_releases_on_stop() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = FakeSession(clock)
    client = FakeClient(clock, busy=3, session=session)
    elector = _elector(clock, rec, client=client, retry_interval=2.0)
    session.on_renew = lambda: elector.stop() if len(session.renewals) >= 2 else None
    elector.run()
    assert client.attempts[:4] == [100.0, 102.0, 104.0, 106.0]
    assert rec.events[0] == ("elected", 106.0)
    assert rec.events[-1][0] == "lost"
    assert client.receivers[0].closed  # the session lock is released for the next leader


def test_a_receiver_opened_without_a_session_lock_is_not_leadership() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = FakeSession(clock)
    session.locked_until_utc = None  # what the SDK shows when the broker refused the session
    client = FakeClient(clock, busy=0, session=session)
    elector = _elector(clock, rec, client=client, retry_interval=1.0)
    clock_sleep = clock.sleep

    def sleep(seconds: float) -> None:
        clock_sleep(seconds)
        if len(client.attempts) >= 3:
            elector.stop()

    elector._sleep = sleep
    elector.run()
    assert rec.events == [] and len(client.attempts) == 3
    assert all(r.closed for r in client.receivers)


def test_intervals_from_logs_including_a_killed_leader() -> None:
    lines = [
        '{"replica": "a", "event": "started", "mono": 1.0}',
        '{"replica": "a", "event": "elected", "mono": 2.0}',
        '{"replica": "a", "event": "leader", "mono": 2.5}',
        '{"replica": "b", "event": "started", "mono": 2.6}',
        '{"replica": "a", "event": "leader", "mono": 3.0}',
        '{"replica": "a", "event": "lea',  # cut off by SIGKILL
        '{"replica": "b", "event": "elected", "mono": 40.0}',
        '{"replica": "b", "event": "leader", "mono": 41.0}',
        '{"replica": "b", "event": "lost", "mono": 42.0}',
        '{"replica": "c", "event": "elected", "mono": 43.0}',
        '{"replica": "c", "event": "stopped", "mono": 44.0}',
    ]
    intervals = leader_intervals(lines)
    assert [(i.replica, i.start_mono, i.end_mono) for i in intervals] == [
        ("a", 2.0, 3.0), ("b", 40.0, 41.0), ("c", 43.0, 43.0)]
