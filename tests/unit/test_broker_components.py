"""The broker's components, each alone with fakes for what it depends on: the timers (one class per
kind, a heap that runs them), the wake-ups, the session locks and the topology. The broker as a whole
is tested through its facade in test_broker*.py."""

from __future__ import annotations

import gc
import logging
from types import SimpleNamespace

from sbemulator.broker.entity import QUEUE, Entity, Session
from sbemulator.broker.errors import BrokerError, EntityNotFoundError
from sbemulator.broker.sessions import Sessions
from sbemulator.broker.timers import (
    ACTIVATION,
    EXPIRY,
    LockExpiry,
    SessionLockExpiry,
    TakeExpiry,
    Timers,
)
from sbemulator.broker.topology import Topology
from sbemulator.broker.wakeups import Wakeups
from sbemulator.config import QueueConfig
from sbemulator.model import BrokerMessage, MessageState
from sbemulator.scheduling import DEFAULT_SLICES, Budget
from sbemulator.store import MemoryStore
from tests.fixtures.broker import config, make_broker, msg, receiver


class FakeHost:
    """Records what the timers ask the message flow (or the sessions) to do."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def lock_ended(self, ent: Entity, msg: BrokerMessage, now: int, counted: bool = True) -> None:
        self.calls.append(("lock_ended", msg.sequence_number, now))

    def expire(self, ent: Entity, msg: BrokerMessage, now: int) -> None:
        self.calls.append(("expire", msg.sequence_number, now))

    def activate(self, target: Entity, msg: BrokerMessage, now: int, stored: bool) -> None:
        self.calls.append(("activate", msg.sequence_number, now, stored))

    def lose_session(self, ent: Entity, s: Session, now: int) -> None:
        self.calls.append(("lose_session", s.id, now))

    def return_locks(self, ent: Entity, r: object, now: int, counted: bool = True) -> None:
        self.calls.append(("return_locks", r, now, counted))


def _message(seq: int, expires_at_ms: int | None = None) -> BrokerMessage:
    m = BrokerMessage.from_incoming(msg(b"x", time_to_live_ms=None))
    m.sequence_number, m.expires_at_ms = seq, expires_at_ms
    return m


def _locked(ent: Entity, seq: int, key: bytes, until: int) -> BrokerMessage:
    m = _message(seq)
    m.lock_key, m.locked_until_ms = key, until
    ent.messages[seq] = m
    ent.locks[key] = m
    return m


# --- timers -------------------------------------------------------------------------------------------
def test_a_lock_timer_matters_only_while_its_lock_is_unchanged() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    m = _locked(ent, 1, b"k" * 16, 1000)
    timer = LockExpiry(1000, ent, host, m, b"k" * 16)
    assert timer.valid()
    m.locked_until_ms = 2000  # renewed: a new timer exists for the new deadline
    assert not timer.valid()
    m.locked_until_ms = 1000
    ent.live = False  # the topology dropped the entity
    assert not timer.valid()
    ent.live = True
    timer.fire(1000)
    assert host.calls == [("lock_ended", 1, 1000)]


def test_a_take_timer_ends_only_the_locks_still_held_from_that_take() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    keys = [bytes([i]) * 16 for i in range(3)]
    msgs = [_locked(ent, i + 1, k, 500) for i, k in enumerate(keys)]
    timer = TakeExpiry(500, ent, host, msgs)
    del ent.locks[keys[0]]  # settled
    msgs[1].locked_until_ms = 900  # renewed
    assert timer.valid()
    timer.fire(500)
    assert host.calls == [("lock_ended", 3, 500)]
    del ent.locks[keys[2]]
    del ent.locks[keys[1]]
    assert not timer.valid()


def test_ttl_and_schedule_timers_are_plain_entries_that_find_their_message_again() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    timers.bind_messages({"q": ent}, host)
    m = _message(7, expires_at_ms=100)
    ent.messages[7] = m
    timers.add_message(EXPIRY, 100, ent, 7)
    m.lock_key, m.locked_until_ms = b"l" * 16, 200
    timers.run_due(100)  # a locked message is looked at again when its lock ends
    assert host.calls == []
    m.lock_key = m.locked_until_ms = None
    timers.add_message(EXPIRY, 100, ent, 7)
    timers.add_message(EXPIRY, 90, ent, 7)  # a deadline the message no longer has: stale
    timers.run_due(100)
    assert host.calls == [("expire", 7, 100)]
    timers.add_message(ACTIVATION, 150, ent, 7)
    assert timers.next_deadline() is None  # the message is not scheduled
    m.state = MessageState.SCHEDULED
    timers.add_message(ACTIVATION, 150, ent, 7)
    assert timers.next_deadline() == 150
    timers.run_due(150)
    assert host.calls[-1] == ("activate", 7, 150, True)
    timers.add_message(ACTIVATION, 160, ent, 7)
    timers.add_message(EXPIRY, 100, ent, 7)
    del ent.messages[7]
    assert timers.next_deadline() is None and len(timers) == 0


def test_message_entries_hold_only_atoms_so_the_collector_stops_tracking_them() -> None:
    # the reason they are not objects: a full collection visits every tracked object (runtime/collector.py)
    ent = Entity(key="q", path="q", kind=QUEUE)
    timers = Timers()
    timers.bind_messages({"q": ent}, FakeHost())
    for seq in range(1, 101):
        timers.add_message(EXPIRY, 1000 + seq, ent, seq)
    gc.collect()
    assert not any(gc.is_tracked(entry) for entry in timers._messages)


def test_timer_objects_and_message_entries_run_in_one_deadline_order() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    timers.bind_messages({"q": ent}, host)
    woken: list[int | None] = []
    timers.on_deadline_changed = lambda: woken.append(timers.next_deadline())
    ttl = _message(1, expires_at_ms=200)
    ent.messages[1] = ttl
    locked = _locked(ent, 2, b"a" * 16, 100)
    timers.add_message(EXPIRY, 200, ent, 1)
    timers.add(LockExpiry(100, ent, host, locked, b"a" * 16))
    timers.add_message(EXPIRY, 300, ent, 1)  # not the earliest: no wake-up
    assert woken == [200, 100]
    timers.run_due(250, Budget(0.0))  # one that did something per slice
    assert host.calls == [("lock_ended", 2, 250)]
    timers.run_due(250)
    assert host.calls == [("lock_ended", 2, 250), ("expire", 1, 250)]


def test_a_session_timer_is_for_one_lock_generation() -> None:
    ent, host = Entity(key="sq", path="sq", kind=QUEUE), FakeHost()
    s = Session("a", owner=object(), locked_until_ms=300, generation=4)
    timer = SessionLockExpiry(300, ent, host, s)
    assert timer.valid()
    s.generation += 1  # lost and locked again since
    assert not timer.valid()
    s.generation -= 1
    timer.fire(300)
    assert host.calls == [("lose_session", "a", 300)]


def test_the_heap_runs_due_timers_in_deadline_order_and_skips_stale_ones() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    woken: list[int | None] = []
    timers.on_deadline_changed = lambda: woken.append(timers.next_deadline())
    late = _locked(ent, 2, b"b" * 16, 300)
    early = _locked(ent, 1, b"a" * 16, 100)
    stale = _locked(ent, 3, b"c" * 16, 200)
    timers.add(LockExpiry(300, ent, host, late, b"b" * 16))
    timers.add(LockExpiry(100, ent, host, early, b"a" * 16))
    timers.add(LockExpiry(200, ent, host, stale, b"c" * 16))
    assert woken == [300, 100]  # told only when the earliest deadline moved
    del ent.locks[b"a" * 16]
    assert timers.next_deadline() == 200
    del ent.locks[b"c" * 16]
    timers.run_due(250)
    assert host.calls == []
    timers.run_due(300)
    assert host.calls == [("lock_ended", 2, 300)]
    assert timers.next_deadline() is None and len(timers) == 0


def test_a_budgeted_run_stops_after_the_timer_that_spent_it_and_says_more_are_due() -> None:
    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    for seq in range(1, 6):
        token = bytes([seq]) * 16
        timers.add(LockExpiry(100 + seq, ent, host, _locked(ent, seq, token, 100 + seq), token))
    spent = iter([0.0, 0.004, 0.011, 0.0, 0.001, 0.002, 0.003])  # real seconds, as perf_counter reads
    assert timers.run_due(200, Budget(0.01, clock=lambda: next(spent))) is True  # budget spent on the second
    assert [c[1] for c in host.calls] == [1, 2]
    assert timers.run_due(200, Budget(0.01, clock=lambda: next(spent))) is False  # the other three fit
    assert [c[1] for c in host.calls] == [1, 2, 3, 4, 5]
    assert timers.run_due(200, Budget(0.01)) is False and len(timers) == 0


def test_a_broker_tick_with_a_budget_returns_lapsed_locks_in_slices() -> None:
    b, clock = make_broker([{"Name": "q", "Properties": {"LockDuration": "PT5S"}}])
    b.send("q", [msg(str(i).encode()) for i in range(3000)])
    r = receiver(b, "q")
    taken = 0
    while taken < 3000:  # many takes: one lapse timer each
        got = r.take(100)
        assert got
        taken += len(got)
    clock.advance(6)
    slices = 1
    while b.tick(Budget(0.0)):  # a zero budget: one timer per slice
        slices += 1
    assert slices == 30
    assert len(receiver(b, "q").take(3000)) == 3000  # every lock lapsed, every message available again
    assert b.tick() is False


# --- wake-ups -----------------------------------------------------------------------------------------
class FakeReceiver:
    def __init__(self, name: str, calls: list[str], fail: bool = False) -> None:
        self.name, self.calls, self.fail = name, calls, fail
        self.closed = False
        self.session = None
        self.next_available_session = False
        self.session_lost = False

    def on_available(self) -> None:
        self.calls.append(self.name)
        if self.fail:
            raise RuntimeError("broken link")


def test_wakeups_tell_each_receiver_once_when_the_outermost_operation_ends(caplog) -> None:
    w, calls = Wakeups(), list[str]()
    ent = Entity(key="q", path="q", kind=QUEUE)
    a, b = FakeReceiver("a", calls, fail=True), FakeReceiver("b", calls)
    ent.receivers = ent.waiting = {id(a): a, id(b): b}
    with caplog.at_level(logging.ERROR), w.operation:
        with w.operation:
            w.notify(ent)
            w.notify(ent)
        assert calls == []  # not while the outer call still runs
    assert calls == ["a", "b"]  # a's failure did not starve b
    assert "on_available callback" in caplog.text
    b.closed = True
    with w.operation:
        w.wake(b)  # type: ignore[arg-type]  # a fake receiver
    assert calls == ["a", "b"]


# --- sessions -----------------------------------------------------------------------------------------
def test_losing_a_session_returns_its_locks_through_the_flow_and_wakes_the_owner() -> None:
    ent = Entity(key="sq", path="sq", kind=QUEUE, requires_session=True, lock_duration_ms=1000)
    host, timers, wakeups = FakeHost(), Timers(), Wakeups()
    sessions = Sessions(MemoryStore(), lambda: 10.0, {"sq": ent}.__getitem__, timers, wakeups, host)
    calls: list[str] = []
    r = FakeReceiver("r", calls)
    s = ent.session("a")
    sessions.lock_session(ent, s, r, 10_000)  # type: ignore[arg-type]
    assert (s.owner, s.locked_until_ms, len(timers)) == (r, 11_000, 1)
    with wakeups.operation:
        timers.run_due(11_000)  # the session timer asks the sessions component itself
    assert host.calls == [("return_locks", r, 11_000, True)]
    assert s.owner is None and r.session_lost
    assert calls == ["r"]


# --- topology -----------------------------------------------------------------------------------------
def test_the_topology_owns_the_entities_and_ends_the_receivers_of_one_it_deletes() -> None:
    ended: list[tuple[str, BrokerError]] = []
    topology = Topology(
        config([{"Name": "q"}]), MemoryStore(), Wakeups(), lambda ent, error: ended.append((ent.path, error))
    )
    q = topology.entity("Q")
    assert set(topology.entities) == {"q", "q/$deadletterqueue", "q/$transfer/$deadletterqueue"}
    topology.create_queue(QueueConfig(name="runtime"))
    assert topology.is_runtime_entity("runtime") and not topology.is_runtime_entity("q")
    q.receivers[1] = SimpleNamespace(locks={})  # a receiver as the purge of its messages sees it
    topology.delete_entity("q")
    assert not q.live and q.dlq is not None and not q.dlq.live
    assert [(path, type(e)) for path, e in ended] == [("q", EntityNotFoundError)]
    assert set(topology.entities) == {"runtime", "runtime/$deadletterqueue", "runtime/$transfer/$deadletterqueue"}


def test_the_message_heap_is_compacted_in_slices_and_keeps_what_still_matters() -> None:
    # a compaction of 262,000 entries in one go held a send for 145 ms: now Slices.compact_chunk per slice

    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    timers.bind_messages({"q": ent}, host)
    count = 3 * DEFAULT_SLICES.compact_chunk
    timers._compact_messages_at = count - 1
    for seq in range(1, count + 1):
        if seq % 3 == 0:  # a third still stored; the others were completed (stale entries)
            ent.messages[seq] = _message(seq, expires_at_ms=1000 + seq)
        timers.add_message(EXPIRY, 1000 + seq, ent, seq)
    assert timers.next_deadline() == 0  # the compaction is due
    slices = 0
    while timers.run_due(500, Budget(0.0)):  # nothing due yet at 500: every slice is the compaction's
        slices += 1
        timers.add_message(EXPIRY, 1000 + count + 3 * slices, ent, count + 3 * slices)  # sends go on meanwhile
        ent.messages[count + 3 * slices] = _message(count + 3 * slices, expires_at_ms=1000 + count + 3 * slices)
    assert slices >= 2
    assert len(timers) == count // 3 + slices
    assert timers.next_deadline() == 1003
    timers.run_due(10 ** 9)
    assert [c[1] for c in host.calls] == sorted(c[1] for c in host.calls)
    assert len(host.calls) == count // 3 + slices


def test_a_compaction_that_would_free_little_keeps_the_heap_and_loses_nothing() -> None:

    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    timers.bind_messages({"q": ent}, host)
    count = 2 * DEFAULT_SLICES.compact_chunk
    timers._compact_messages_at = count - 1
    for seq in range(1, count + 1):  # every one still stored
        ent.messages[seq] = _message(seq, expires_at_ms=1000 + seq)
        timers.add_message(EXPIRY, 1000 + seq, ent, seq)
    while timers.run_due(500, Budget(0.0)):
        pass
    assert len(timers) == count and timers.next_deadline() == 1001
    timers.run_due(10 ** 9)
    assert [c[1] for c in host.calls] == list(range(1, count + 1))


def test_stale_entries_at_the_front_are_dropped_a_slice_per_call() -> None:
    # after a purge every entry at the front is stale: popping 100,000 of them in one call took 400 ms

    ent, host = Entity(key="q", path="q", kind=QUEUE), FakeHost()
    timers = Timers()
    timers.bind_messages({"q": ent}, host)
    stale = 2 * DEFAULT_SLICES.stale_pops + 10
    timers._compact_messages_at = 10 * stale  # no compaction here: the front alone
    for seq in range(1, stale + 1):  # purged: no message behind them
        timers.add_message(EXPIRY, 1000 + seq, ent, seq)
    ent.messages[stale + 1] = _message(stale + 1, expires_at_ms=5_000_000)
    timers.add_message(EXPIRY, 5_000_000, ent, stale + 1)
    answers = []
    while (deadline := timers.next_deadline()) == 0:
        answers.append(deadline)
        assert timers.run_due(500) is False  # nothing due, nothing fired
    assert len(answers) == 2 and deadline == 5_000_000 and len(timers) == 1
