"""A clock you control (docs/emulator.md): with ``clock="manual"`` every time-based behaviour follows
``Emulator.advance`` and nothing waits in real time. The real Python SDK over a socket.

Each test moves the emulator's time by more than any real wait in it could: a test that passed by
waiting in real time would need an hour.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError, MessageNotFoundError, SessionLockLostError

from sbemulator import Emulator
from sbemulator.auth import sign
from tests.fixtures.emulator import queue, topology
from tests.fixtures.process import start_emulator_process
from tests.integration.test_admin_http import call

WAIT = 5  # seconds: every receive is bounded
HOUR = 3600

TOPOLOGY = topology(queues=[
    queue("plain"),  # LockDuration 1 minute, TTL 1 hour (the official emulator's defaults)
    queue("expiring", DefaultMessageTimeToLive="PT1H", DeadLetteringOnMessageExpiration=True),
    queue("dedup", RequiresDuplicateDetection=True, DuplicateDetectionHistoryTimeWindow="PT10M"),
    queue("sessions", RequiresSession=True, LockDuration="PT1M"),
])


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=TOPOLOGY, clock="manual") as emulator:
        yield emulator


def _now_ms(emu: Emulator) -> dt.datetime:
    """The emulator's time as the broker stamps it (whole milliseconds)."""
    return dt.datetime.fromtimestamp(int(emu.clock() * 1000) / 1000, dt.UTC)


def _client(emu: Emulator) -> ServiceBusClient:
    return ServiceBusClient.from_connection_string(emu.connection_string)


def test_a_scheduled_message_arrives_when_the_clock_reaches_its_time(emu: Emulator) -> None:
    """"Scheduled messages": the message becomes active at its scheduled enqueue time, with that time
    as its enqueued time; the schedule is computed from the emulator's time, ``emu.now()``."""
    start = _now_ms(emu)
    with _client(emu) as client:
        with client.get_queue_sender("plain") as sender:
            sender.schedule_messages(ServiceBusMessage("later"), start + dt.timedelta(hours=1))
        with client.get_queue_receiver("plain") as receiver:
            assert receiver.receive_messages(max_wait_time=1) == []
            emu.advance(HOUR - 1)
            assert receiver.receive_messages(max_wait_time=1) == []
            emu.advance(1)
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            assert str(message) == "later"
            assert message.enqueued_time_utc == _now_ms(emu) == start + dt.timedelta(hours=1)
            receiver.complete_message(message)


def test_a_lock_lapses_when_the_clock_passes_it_and_complete_raises_message_lock_lost(emu: Emulator) -> None:
    """"Message transfers, locks, and settlement": a lock that expired cannot complete the message
    (MessageLockLostError) and the message is delivered again with its delivery count raised. The
    SDK's own lock check reads the machine's clock, which is still inside the lock (the emulator's
    clock moved, not the machine's), so the refusal is the emulator's."""
    with _client(emu) as client:
        with client.get_queue_sender("plain") as sender:
            sender.send_messages(ServiceBusMessage("slow"))
        with client.get_queue_receiver("plain", prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            assert message.enqueued_time_utc == _now_ms(emu)
            assert message.locked_until_utc == _now_ms(emu) + dt.timedelta(minutes=1)
            emu.advance(61)
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(message)
            (again,) = receiver.receive_messages(max_wait_time=WAIT)
            assert again.sequence_number == message.sequence_number and again.delivery_count == 1
            receiver.complete_message(again)


def test_a_renewed_lock_lasts_from_the_emulators_time(emu: Emulator) -> None:
    with _client(emu) as client:
        with client.get_queue_sender("plain") as sender:
            sender.send_messages(ServiceBusMessage("renew me"))
        with client.get_queue_receiver("plain", prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            emu.advance(50)
            renewed = receiver.renew_message_lock(message)
            assert renewed == _now_ms(emu) + dt.timedelta(minutes=1)
            emu.advance(50)  # 100 s after the receive: past the first lock, inside the renewed one
            receiver.complete_message(message)


def test_an_expired_message_goes_to_the_dead_letter_queue(emu: Emulator) -> None:
    """"Message expiration": with DeadLetteringOnMessageExpiration an expired message is moved to the
    dead-letter queue with reason TTLExpiredException."""
    with _client(emu) as client:
        with client.get_queue_sender("expiring") as sender:
            sender.send_messages(ServiceBusMessage("perishable"))
        emu.advance(HOUR + 1)
        with client.get_queue_receiver("expiring") as receiver:
            assert receiver.receive_messages(max_wait_time=1) == []
        with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = dlq.receive_messages(max_wait_time=WAIT)
            assert str(dead) == "perishable"
            assert dead.dead_letter_reason == "TTLExpiredException"
            dlq.complete_message(dead)


def test_a_deferred_message_waits_out_its_ttl_until_it_is_received(emu: Emulator) -> None:
    """"Message deferral": a deferred message stays (its TTL is not applied while it is deferred) and is
    received by its sequence number; an expired one is dead-lettered when asked for, and the receive
    finds nothing ("Message expiration": TTLExpiredException)."""
    with _client(emu) as client:
        with client.get_queue_sender("expiring") as sender:
            sender.send_messages([ServiceBusMessage("kept"), ServiceBusMessage("too late")])
        with client.get_queue_receiver("expiring") as receiver:
            kept, late = receiver.receive_messages(max_message_count=2, max_wait_time=WAIT)
            kept_seq, late_seq = kept.sequence_number, late.sequence_number
            assert kept_seq is not None and late_seq is not None
            receiver.defer_message(kept)
            receiver.defer_message(late)
            emu.advance(HOUR - 60)  # within the TTL
            [again] = receiver.receive_deferred_messages([kept_seq])
            assert str(again) == "kept"
            receiver.complete_message(again)
            emu.advance(120)  # past the TTL of the one still deferred
            [still] = receiver.peek_messages(max_message_count=5, sequence_number=late_seq)
            assert still.sequence_number == late_seq  # deferred: still there
            with pytest.raises(MessageNotFoundError):
                receiver.receive_deferred_messages([late_seq])
        with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            (dead,) = dlq.receive_messages(max_wait_time=WAIT)
            assert str(dead) == "too late" and dead.dead_letter_reason == "TTLExpiredException"
            dlq.complete_message(dead)


def test_the_duplicate_detection_window_follows_the_clock(emu: Emulator) -> None:
    """"Duplicate detection": a message id seen within the window is dropped (the send succeeds), one
    seen longer ago than the window is a new message."""
    with _client(emu) as client:
        with client.get_queue_sender("dedup") as sender:
            sender.send_messages(ServiceBusMessage("first", message_id="order-1"))
            sender.send_messages(ServiceBusMessage("duplicate", message_id="order-1"))
            emu.advance(9 * 60)
            sender.send_messages(ServiceBusMessage("still a duplicate", message_id="order-1"))
            emu.advance(2 * 60)  # 11 minutes after the first send: out of the 10-minute window
            sender.send_messages(ServiceBusMessage("new again", message_id="order-1"))
        with client.get_queue_receiver("dedup") as receiver:
            bodies = [str(m) for m in receiver.peek_messages(max_message_count=10, sequence_number=1)]
    assert bodies == ["first", "new again"]


def test_a_session_lock_lapses_with_the_clock(emu: Emulator) -> None:
    with _client(emu) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages(ServiceBusMessage("in a session", session_id="s1"))
        with client.get_queue_receiver("sessions", session_id="s1", prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            emu.advance(61)
            with pytest.raises(SessionLockLostError):
                receiver.complete_message(message)
            with pytest.raises(SessionLockLostError):
                receiver.session.renew_lock()


def test_the_clock_over_the_admin_endpoint(emu: Emulator) -> None:
    status, headers, body = call(emu, "GET", "/$admin/clock")
    assert status == 200 and headers["content-type"].startswith("application/json")
    before = json.loads(body)
    assert before["mode"] == "manual" and before["nowMs"] == int(emu.now().timestamp() * 1000)
    status, _, body = call(emu, "POST", "/$admin/clock/advance", json.dumps({"seconds": 90}))
    after = json.loads(body)
    assert status == 200 and after["nowMs"] - before["nowMs"] == 90_000
    assert after["now"].endswith("Z")
    for bad in ({"seconds": -1}, {"seconds": "soon"}, {}):
        status, _, body = call(emu, "POST", "/$admin/clock/advance", json.dumps(bad))
        assert status == 400 and json.loads(body)["error"]["code"] == "BadRequest"
    assert call(emu, "GET", "/$admin/clock", auth=None)[0] == 401


def test_a_real_clock_cannot_be_moved() -> None:
    with Emulator(config=TOPOLOGY) as emu:
        assert emu.clock_mode == "real"
        with pytest.raises(ValueError, match="real time"):
            emu.advance(1)
        status, _, body = call(emu, "POST", "/$admin/clock/advance", json.dumps({"seconds": 1}))
        assert status == 409 and "--clock manual" in json.loads(body)["error"]["message"]
        status, _, body = call(emu, "GET", "/$admin/clock")
        assert json.loads(body)["mode"] == "real"
        assert abs(json.loads(body)["nowMs"] / 1000 - time.time()) < 60


def test_the_pytest_plugin_fixture_advances_the_clock(tmp_path: Path) -> None:
    """``--sbemulator-clock manual`` gives the plugin's fixture a manual clock and ``advance``."""
    (tmp_path / "Config.json").write_text(json.dumps(TOPOLOGY))
    (tmp_path / "test_scheduled.py").write_text(textwrap.dedent("""
        import datetime as dt
        from azure.servicebus import ServiceBusClient, ServiceBusMessage

        def test_scheduled(servicebus_emulator):
            assert servicebus_emulator.clock_mode == "manual"
            when = servicebus_emulator.now() + dt.timedelta(days=1)
            with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string) as client:
                with client.get_queue_sender("plain") as sender:
                    sender.schedule_messages(ServiceBusMessage("tomorrow"), when)
                servicebus_emulator.advance(dt.timedelta(days=1))
                with client.get_queue_receiver("plain") as receiver:
                    [message] = receiver.receive_messages(max_wait_time=5)
                    assert str(message) == "tomorrow"
    """))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--sbemulator-config", "Config.json", "--sbemulator-clock", "manual", "test_scheduled.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def test_the_command_line_clock_is_moved_over_the_management_endpoint(tmp_path: Path) -> None:
    """``python -m sbemulator --clock manual``: a test in another process moves the time over HTTPS."""
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(TOPOLOGY))
    emu = start_emulator_process("--config", str(config), "--in-memory", "--clock", "manual", "--no-websocket")
    try:
        assert emu.ca_path is not None and emu.admin_port is not None
        context = ssl.create_default_context(cafile=emu.ca_path)
        token = sign(f"https://127.0.0.1:{emu.admin_port}", "RootManageSharedAccessKey", "SAS_KEY_VALUE",
                     int(time.time()) + 300)
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("expiring") as sender:
                sender.send_messages(ServiceBusMessage("perishable"))
            conn = http.client.HTTPSConnection("127.0.0.1", emu.admin_port, context=context, timeout=10)
            try:
                conn.request("POST", "/$admin/clock/advance", body=json.dumps({"seconds": HOUR + 1}),
                             headers={"Authorization": token, "Content-Type": "application/json"})
                response = conn.getresponse()
                assert response.status == 200, response.read()
                assert json.loads(response.read())["mode"] == "manual"
            finally:
                conn.close()
            with client.get_queue_receiver("expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
                (dead,) = dlq.receive_messages(max_wait_time=WAIT)
                assert dead.dead_letter_reason == "TTLExpiredException"
    finally:
        emu.process.terminate()
        emu.process.wait(10)

