"""The JavaScript SDK against a manual clock (docs/emulator.md, "A clock you control"): what it shows
of a message's times is the emulator's, moved without waiting."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusMessage

from sbemulator import Emulator
from tests.integration.test_clock import HOUR, TOPOLOGY, _client, _now_ms
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=TOPOLOGY, clock="manual") as emulator:
        yield emulator


def test_the_javascript_sdk_sees_the_emulators_time(emu: Emulator) -> None:
    """@azure/service-bus unchanged against a clock moved an hour: the scheduled message is active
    with the emulator's enqueued time, the expired one dead-lettered with TTLExpiredException."""
    start = _now_ms(emu)
    with _client(emu) as client:
        with client.get_queue_sender("plain") as sender:
            sender.schedule_messages(ServiceBusMessage("in an hour"), start + dt.timedelta(hours=1))
        with client.get_queue_sender("expiring") as sender:
            sender.send_messages(ServiceBusMessage("perishable"))
    emu.advance(HOUR + 1)
    out = run_js("manual_clock.mjs", emu.connection_string, "plain", "expiring")
    (scheduled,) = out["scheduled"]
    assert scheduled["body"] == {"buffer": "in an hour"}  # a data section
    assert scheduled["enqueuedTimeUtc"] == int((start + dt.timedelta(hours=1)).timestamp() * 1000)
    assert scheduled["lockedUntilUtc"] == int(emu.clock() * 1000) + 60_000  # the clock stood still since
    (dead,) = out["dead"]
    assert dead["body"] == {"buffer": "perishable"} and dead["deadLetterReason"] == "TTLExpiredException"
    assert dead["enqueuedTimeUtc"] == int(start.timestamp() * 1000)


def test_a_lapsed_lock_is_message_lock_lost_for_the_javascript_sdk(emu: Emulator) -> None:
    """"Message transfers, locks, and settlement": a lock that ends before the settlement makes the
    settlement fail (MessageLockLostException) and the message is delivered again with its delivery
    counted. The JS script moves the manual clock itself over the management endpoint, between its
    receive and its complete."""
    with _client(emu) as client, client.get_queue_sender("plain") as sender:
        sender.send_messages(ServiceBusMessage("held too long"))
    assert emu.admin_url is not None and emu.ca_path is not None
    out = run_js("lapsed_lock.mjs", emu.connection_string, "plain", "61", extra_env={
        "SB_ADMIN_URL": emu.admin_url, "SB_CA_PATH": emu.ca_path, "SB_KEY_NAME": emu.key_name, "SB_KEY": emu.key})
    assert out["clockMs"] >= out["lockedUntil"] + 1000  # the clock passed the lock
    assert out["error"] is not None and out["error"]["code"] == "MessageLockLost", out
    assert out["again"]["body"] == {"buffer": "held too long"} and out["again"]["deliveryCount"] == 1
