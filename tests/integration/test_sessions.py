"""Message sessions through the SDK (sync and async): exclusive locks, ordered groups, state, failover."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import AutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import (
    OperationTimeoutError,
    ServiceBusError,
    SessionCannotBeLockedError,
    SessionLockLostError,
)

from sbemulator import Emulator
from tests.fixtures.emulator import queue, topology

QUEUE = "sessions"  # RequiresSession, LockDuration 5 s (tests/fixtures/emulator.py)


def _send(client: ServiceBusClient, bodies_by_session: dict[str, list[str]]) -> None:
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(
            [ServiceBusMessage(b, session_id=sid) for sid, bodies in bodies_by_session.items() for b in bodies]
        )


def _receive(receiver, count: int, wait: float = 5) -> list:
    out: list = []
    deadline = time.monotonic() + wait
    while len(out) < count and time.monotonic() < deadline:
        out += receiver.receive_messages(max_message_count=count - len(out), max_wait_time=1)
    return out


def test_send_without_session_id_is_refused(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        with client.get_queue_sender(QUEUE) as sender:
            with pytest.raises(ServiceBusError) as info:
                sender.send_messages(ServiceBusMessage("no session"))
    assert "session" in str(info.value).lower()


def test_receiver_by_session_id_gets_only_that_session_in_order(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        _send(client, {"a": ["a1", "a2", "a3"], "b": ["b1", "b2"]})
        with client.get_queue_receiver(QUEUE, session_id="b") as receiver:
            messages = _receive(receiver, 2)
            assert [str(m) for m in messages] == ["b1", "b2"]
            assert {m.session_id for m in messages} == {"b"}
            assert receiver.session.locked_until_utc is not None
            for m in messages:
                receiver.complete_message(m)
        with client.get_queue_receiver(QUEUE, session_id="a") as receiver:
            assert [str(m) for m in _receive(receiver, 3)] == ["a1", "a2", "a3"]


def test_second_receiver_cannot_lock_a_locked_session(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        _send(client, {"x": ["x1"]})
        with client.get_queue_receiver(QUEUE, session_id="x") as holder:
            assert [str(m) for m in _receive(holder, 1)] == ["x1"]
            with pytest.raises(SessionCannotBeLockedError):
                with client.get_queue_receiver(QUEUE, session_id="x") as second:
                    second.receive_messages(max_wait_time=1)


def test_next_available_session_waits_for_a_session_to_appear(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        def send_later() -> None:
            time.sleep(1.5)
            _send(client, {"late": ["l1"]})

        sender = threading.Thread(target=send_later)
        sender.start()
        started = time.monotonic()
        with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10) as receiver:
            waited = time.monotonic() - started
            assert receiver.session.session_id == "late"
            assert [str(m) for m in _receive(receiver, 1)] == ["l1"]
        sender.join(5)
        assert waited >= 1.0  # it waited for the session instead of failing at once


def test_next_available_session_times_out_when_nothing_arrives(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        with pytest.raises(OperationTimeoutError):
            with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as receiver:
                receiver.receive_messages(max_wait_time=1)
        # The behaviour is the OperationTimeoutError (after max_wait_time, not a hang: the suite's timeout
        # bounds the test); how soon it came is no assertion (tests/README.md: no timed asserts).


def test_session_state_is_kept_and_the_lock_renews(sb_connection_string):
    with ServiceBusClient.from_connection_string(sb_connection_string) as client:
        _send(client, {"s": ["s1"]})
        with client.get_queue_receiver(QUEUE, session_id="s") as receiver:
            receiver.session.set_state(b"checkpoint-1")
            before = receiver.session.locked_until_utc
            time.sleep(1)
            receiver.session.renew_lock()
            assert receiver.session.locked_until_utc > before
            assert receiver.session.get_state() == b"checkpoint-1"
        with client.get_queue_receiver(QUEUE, session_id="s") as receiver:
            assert receiver.session.get_state() == b"checkpoint-1"


def test_failover_after_the_holder_stops_renewing(sb_connection_string):
    """Receiver A takes a message and stops (no renew, no settle); once the 5 s session lock lapses,
    B locks the session and gets the same message again, then the rest in order; A's late settlement
    fails with session-lock-lost."""
    with ServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        _send(client, {"g": ["g1", "g2", "g3"]})
        holder = client.get_queue_receiver(QUEUE, session_id="g")
        holder.__enter__()
        try:
            (first,) = _receive(holder, 1)
            assert str(first) == "g1"
            time.sleep(6)  # the session lock (5 s) expires
            with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5) as successor:
                messages = _receive(successor, 3)
                assert [str(m) for m in messages] == ["g1", "g2", "g3"]
                assert messages[0].delivery_count == 1
                for m in messages:
                    successor.complete_message(m)
            with pytest.raises(SessionLockLostError):
                holder.complete_message(first)
        finally:
            try:
                holder.__exit__(None, None, None)
            except ServiceBusError:
                pass


def test_closing_the_holder_releases_the_session_at_once():
    """With a lock of five minutes (the longest Service Bus allows) the second receiver can only get the
    session, and the unsettled c1, because closing the first released it: not because the lock lapsed,
    which a test timing the second receive against the 5 s lock could not tell apart on a loaded machine."""
    config = topology(queues=[queue(QUEUE, RequiresSession=True, LockDuration="PT5M")])
    with Emulator(config=config, in_memory=True) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            _send(client, {"c": ["c1", "c2"]})
            with client.get_queue_receiver(QUEUE, session_id="c") as receiver:
                assert [str(m) for m in _receive(receiver, 1)] == ["c1"]  # not settled
            with client.get_queue_receiver(QUEUE, session_id="c") as receiver:
                assert [str(m) for m in _receive(receiver, 2)] == ["c1", "c2"]


@pytest.mark.slow
async def test_ten_interleaved_groups_of_100_are_each_processed_in_order_by_concurrent_consumers(sb_connection_string):
    groups = {f"tenant-{g}": [f"{g}:{i}" for i in range(100)] for g in range(10)}
    async with AsyncServiceBusClient.from_connection_string(sb_connection_string) as client:
        async with client.get_queue_sender(QUEUE) as sender:
            interleaved = [
                ServiceBusMessage(groups[sid][i], session_id=sid) for i in range(100) for sid in groups
            ]
            for start in range(0, len(interleaved), 100):
                await sender.send_messages(interleaved[start : start + 100])
        seen: dict[str, list[str]] = {}
        # A consumer holds its session for 100 completions; the renewer keeps the 5 s session lock alive
        # however slowly a loaded machine gets through them, as a real session consumer would.
        renewer = AutoLockRenewer(max_lock_renewal_duration=110)

        async def consumer() -> None:
            while True:
                try:
                    receiver = client.get_queue_receiver(
                        QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2, auto_lock_renewer=renewer
                    )
                    async with receiver:
                        sid = receiver.session.session_id
                        while True:
                            batch = await receiver.receive_messages(max_message_count=25, max_wait_time=1)
                            if not batch:
                                break
                            for m in batch:
                                seen.setdefault(sid, []).append(str(m))
                                await receiver.complete_message(m)
                except OperationTimeoutError:
                    return

        try:
            await asyncio.wait_for(asyncio.gather(*(consumer() for _ in range(4))), 110)
        finally:
            await renewer.close()
    assert seen == groups


async def test_async_exclusive_lock_state_and_failover(sb_connection_string):
    async with AsyncServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        async with client.get_queue_sender(QUEUE) as sender:
            await sender.send_messages([ServiceBusMessage(f"f{i}", session_id="f") for i in range(3)])
        holder = client.get_queue_receiver(QUEUE, session_id="f")
        await holder.__aenter__()
        try:
            (first,) = await holder.receive_messages(max_message_count=1, max_wait_time=5)
            await holder.session.set_state(b"from-holder")
            with pytest.raises(SessionCannotBeLockedError):
                async with client.get_queue_receiver(QUEUE, session_id="f") as second:
                    await second.receive_messages(max_wait_time=1)
            await asyncio.sleep(6)  # stop renewing: the 5 s session lock lapses
            async with client.get_queue_receiver(
                QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5
            ) as successor:
                assert successor.session.session_id == "f"
                assert await successor.session.get_state() == b"from-holder"
                got: list = []
                while len(got) < 3:
                    batch = await successor.receive_messages(max_message_count=3, max_wait_time=2)
                    assert batch, "the successor must get the session's messages"
                    got += batch
                assert [str(m) for m in got] == ["f0", "f1", "f2"]
                for m in got:
                    await successor.complete_message(m)
            with pytest.raises(SessionLockLostError):
                await holder.complete_message(first)
        finally:
            try:
                await holder.close()
            except ServiceBusError:
                pass


async def test_async_next_available_session_waits_then_times_out(sb_connection_string):
    async with AsyncServiceBusClient.from_connection_string(sb_connection_string, retry_total=0) as client:
        async def send_later() -> None:
            await asyncio.sleep(1.5)
            async with client.get_queue_sender(QUEUE) as sender:
                await sender.send_messages(ServiceBusMessage("late", session_id="late-async"))

        task = asyncio.create_task(send_later())
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=10) as r:
            assert r.session.session_id == "late-async"
            assert loop.time() - started >= 1.0
            (message,) = await r.receive_messages(max_wait_time=5)
            await r.complete_message(message)
        await task
        with pytest.raises(OperationTimeoutError):
            async with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=2) as r:
                await r.receive_messages(max_wait_time=1)
