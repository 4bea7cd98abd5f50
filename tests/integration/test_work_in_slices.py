"""Work that stands for thousands of messages is done in slices, and nothing changes for the client.

A receiver granted thousands of credits is served a slice at a time (``Slices.pump_s``), and
one disposition over a range of thousands of deliveries is handled a slice at a time with the
connection's reading paused (``Slices.dispatch_s``), so no other connection waits for the whole batch
(issue #19: the canary benchmark, ``python -m bench.canary_stall``, measures that; no test times
it). These tests shrink the slices to nothing, so every slice boundary is crossed, and check what
the client sees over a raw AMQP socket: every message delivered once and in order, the range's
outcome applied to every delivery of it before what the client sent after it (AMQP 1.0 part 2.7.6,
disposition ``first``..``last``; "Message transfers, locks, and settlement": abandon counts a
delivery and makes the message available again).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    Attach,
    Begin,
    Detach,
    Disposition,
    Flow,
    Modified,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import UByte, UInt
from sbemulator.scheduling import DEFAULT_SLICES
from tests.fixtures.emulator import STANDARD_TOPOLOGY, sliced_emulator

from .test_batch_in_slices import _receive_all
from .test_malformed_input import RawClient

QUEUE = "orders"
COUNT = 1500
UINT_MAX = 0xFFFFFFFF


@pytest.fixture
def sliced() -> Iterator[Emulator]:
    """An emulator whose slices end after every full take and every 256 events."""
    yield from sliced_emulator(pump_s=0.0, dispatch_s=0.0)


def _fill(emu: Emulator, count: int) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client, \
            client.get_queue_sender(QUEUE) as sender:
        for start in range(0, count, 500):
            sender.send_messages([ServiceBusMessage(f"m{n}", message_id=str(n))
                                  for n in range(start, min(count, start + 500))])


def _peek_lock_receiver(emu: Emulator) -> RawClient:
    raw = RawClient(emu.port, timeout=10.0)
    raw.open("PLAIN", b"\x00" + emu.key_name.encode() + b"\x00" + emu.key.encode())
    raw.frame(Begin(None, UInt(0), UInt(UINT_MAX), UInt(UINT_MAX)))
    raw.read_frame()  # begin
    raw.frame(Attach("sliced", UInt(0), ROLE_RECEIVER, UByte(0), UByte(1), Source(QUEUE), Target("sliced")))
    raw.read_frame()  # attach
    return raw


def _transfers(raw: RawClient, count: int) -> list[Transfer]:
    out: list[Transfer] = []
    deadline = time.monotonic() + 60
    while len(out) < count:
        assert time.monotonic() < deadline, f"{len(out)} of {count} deliveries within 60 s"
        body = raw.read_frame().body
        if isinstance(body, Transfer):
            out.append(body)
    return out


def test_a_receiver_granted_thousands_of_credits_gets_each_message_once_in_order(sliced: Emulator) -> None:
    _fill(sliced, COUNT)
    with _peek_lock_receiver(sliced) as raw:
        raw.frame(Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0), UInt(COUNT)))
        transfers = _transfers(raw, COUNT)
    ids = [int(t.delivery_id or 0) for t in transfers]
    assert ids == list(range(ids[0], ids[0] + COUNT))
    assert len({bytes(t.delivery_tag or b"") for t in transfers}) == COUNT  # a lock token each


def test_one_disposition_over_a_range_abandons_every_delivery_before_what_follows_it(sliced: Emulator) -> None:
    _fill(sliced, COUNT)
    with _peek_lock_receiver(sliced) as raw:
        raw.frame(Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0), UInt(COUNT)))
        transfers = _transfers(raw, COUNT)
        first, last = int(transfers[0].delivery_id or 0), int(transfers[-1].delivery_id or 0)
        # One write: the abandon of the whole range, then the detach. The detach must be handled after
        # every abandon of the range: a plain receiver's detach leaves its locks in place, so a message
        # the range had not reached yet would stay locked.
        _abandon_range_and_detach(raw, first, last)
    _assert_each_back_once_counted_once(_receive_all(sliced, COUNT))


def _abandon_range_and_detach(raw: RawClient, first: int, last: int) -> None:
    """One write: the abandon of deliveries ``first``..``last``, then the detach; returns once the detach
    is answered."""
    raw.send(b"".join([
        _frame(Disposition(ROLE_RECEIVER, UInt(first), UInt(last), True, Modified(True, False))),
        _frame(Detach(UInt(0), True)),
    ]))
    deadline = time.monotonic() + 30
    while not isinstance(raw.read_frame().body, Detach):
        assert time.monotonic() < deadline


def _assert_each_back_once_counted_once(got: list) -> None:
    assert sorted(int(str(m.message_id)) for m in got) == list(range(COUNT))
    assert {m.delivery_count for m in got} == {1}  # the abandon counted the first delivery


def _frame(body: object) -> bytes:
    from sbemulator.amqp.framing import build_frame

    return build_frame(0, body)


def test_thousands_of_unsettled_range_dispositions_in_one_read_close_the_connection_not_the_memory(
        sliced: Emulator) -> None:
    # A disposition that does not settle leaves its deliveries unsettled, so the next one over the same
    # range names them all again: each became an event per delivery, held until handled, and a read of
    # such frames grew the emulator's memory without bound. The dispositions of one read may name
    # Connection.DISPOSED_PER_READ delivery ids together; beyond, amqp:resource-limit-exceeded.
    from sbemulator.amqp.connection import Connection
    from sbemulator.amqp.performatives import Close

    _fill(sliced, COUNT)
    with _peek_lock_receiver(sliced) as raw:
        raw.frame(Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0), UInt(COUNT)))
        first = int(_transfers(raw, COUNT)[0].delivery_id or 0)
        widest = 100_000  # the largest range one disposition may name
        frames = Connection.DISPOSED_PER_READ // widest + 1
        raw.send(b"".join(_frame(Disposition(ROLE_RECEIVER, UInt(first), UInt(first + widest - 1), False, None))
                          for _ in range(frames)))
        deadline = time.monotonic() + 30
        while not isinstance(body := raw.read_frame().body, Close):
            assert time.monotonic() < deadline
        assert body.error is not None and body.error.condition == "amqp:resource-limit-exceeded"
        assert "250,000" in str(body.error.description)
    with ServiceBusClient.from_connection_string(sliced.connection_string) as client, \
            client.get_queue_receiver(QUEUE) as receiver:
        assert len(receiver.peek_messages(max_message_count=COUNT)) == COUNT  # nothing lost, the emulator serves on


def test_a_durable_store_commits_what_a_receiver_takes_in_batches_and_folds_between_them(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A durable commit's time grows with what it writes: locks taken in slices of 10 ms made commits of
    # 900-1,536 lock updates each (a flow of 20,000 credits, the emulator in the test's process), up to and
    # over the delivery journal's room, then written to SQLite row by row after a fold of the whole journal
    # (callbacks of up to 52 ms of CPU; bench.canary_stall --durable). The pump
    # and a range settlement stop once Slices.commit_rows writes are buffered, and the journal is folded in a
    # callback of its own before a commit finds it full. Nothing changes for the client.
    from sbemulator.store import sqlite

    commits: list[int] = []
    folds: list[int] = []
    commit, fold = sqlite.SqliteStore.commit, sqlite.SqliteStore.fold

    def counted_commit(self: sqlite.SqliteStore) -> None:
        commits.append(len(self._messages))
        commit(self)

    def counted_fold(self: sqlite.SqliteStore) -> None:
        folds.append(len(self._journal.updates) if self._journal is not None else 0)
        fold(self)

    monkeypatch.setattr(sqlite.SqliteStore, "commit", counted_commit)
    monkeypatch.setattr(sqlite.SqliteStore, "fold", counted_fold)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=False, data_dir=tmp_path,
                  admin_port=None) as emu:
        _fill(emu, COUNT)
        commits.clear()
        with _peek_lock_receiver(emu) as raw:
            raw.frame(Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0), UInt(COUNT)))
            transfers = _transfers(raw, COUNT)
            ids = [int(t.delivery_id or 0) for t in transfers]
            assert ids == list(range(ids[0], ids[0] + COUNT))
            _abandon_range_and_detach(raw, ids[0], ids[-1])
        _assert_each_back_once_counted_once(_receive_all(emu, COUNT))
    # 1,500 locks and 1,500 abandons, committed a batch at a time: a pump stops after the full take
    # (Slices.pump_take) that reached the batch, a range settlement after the slice of dispatch_events events
    largest = max(DEFAULT_SLICES.pump_take, DEFAULT_SLICES.dispatch_events) + DEFAULT_SLICES.commit_rows
    assert max(commits) <= largest, commits
    assert folds, "the journal was never folded in a step of its own"
