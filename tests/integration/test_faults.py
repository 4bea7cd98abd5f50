"""Fault injection (docs/emulator.md, "Fault injection"): each effect reaches the real Python SDK as the
exception Service Bus's answer maps to, the SDK's retry policy rides out a few ServerBusy answers and
gives up after its retries with the right exception, and a dropped connection in a receive loop is
reconnected by the SDK. Rules are set through the Python API, the pytest fixture's context manager
and the admin endpoint.

The conditions are the ones azure-servicebus maps (``_transport/_pyamqp_transport.py``,
``_ERROR_CODE_TO_ERROR_MAPPING``); "Azure Service Bus messaging exceptions" lists the exceptions
(ServerBusyException: "the client should wait ... and retry"; QuotaExceededException, TimeoutException,
MessageLockLostException, MessagingEntityNotFoundException).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    MessageLockLostError,
    MessagingEntityNotFoundError,
    OperationTimeoutError,
    ServiceBusAuthenticationError,
    ServiceBusConnectionError,
    ServiceBusQuotaExceededError,
    ServiceBusServerBusyError,
    SessionLockLostError,
)

from sbemulator import Emulator
from sbemulator.gateway.faults import EFFECTS, Faults
from tests.fixtures.emulator import queue, topology
from tests.integration.test_admin_http import call

WAIT = 5
TOPOLOGY = topology(queues=[queue("orders"), queue("other")])


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=TOPOLOGY) as emulator:
        yield emulator


def _client(emu: Emulator, retries: int = 0) -> ServiceBusClient:
    # a small backoff: the retries are what is tested, not how long the SDK sleeps between them
    return ServiceBusClient.from_connection_string(emu.connection_string, retry_total=retries,
                                                   retry_backoff_factor=0.01, retry_backoff_max=0.05)


def _count(emu: Emulator, entity: str) -> int:
    return int(emu.call(emu.broker.message_count, entity))


@pytest.mark.parametrize(("effect", "exception"), [
    ("server-busy", ServiceBusServerBusyError),
    ("quota-exceeded", ServiceBusQuotaExceededError),
    ("timeout", OperationTimeoutError),
    ("not-found", MessagingEntityNotFoundError),
])
def test_a_send_fault_is_the_sdks_exception_and_stores_nothing(emu: Emulator, effect: str, exception: type) -> None:
    with _client(emu) as client, client.get_queue_sender("orders") as sender:
        with emu.faults.injected("send", effect, "orders") as rule:
            with pytest.raises(exception):
                sender.send_messages(ServiceBusMessage("refused"))
        assert (rule.matched, rule.applied) == (1, 1)
        sender.send_messages(ServiceBusMessage("accepted"))  # the rule is gone with its block
    assert _count(emu, "orders") == 1


def test_the_retry_policy_rides_out_server_busy(emu: Emulator) -> None:
    """Two ServerBusy answers, three retries: the send succeeds, and the emulator saw three attempts."""
    with _client(emu, retries=3) as client, client.get_queue_sender("orders") as sender:
        rule = emu.faults.add("send", "server-busy", "orders", count=2)
        sender.send_messages(ServiceBusMessage("persistent"))
    assert (rule.matched, rule.applied, rule.spent) == (3, 2, True)
    assert _count(emu, "orders") == 1


def test_a_throttled_send_fails_once_the_retries_are_spent(emu: Emulator) -> None:
    with _client(emu, retries=2) as client, client.get_queue_sender("orders") as sender:
        rule = emu.faults.add("send", "server-busy", "orders")
        with pytest.raises(ServiceBusServerBusyError, match="is being throttled"):
            sender.send_messages(ServiceBusMessage("never"))
        assert rule.matched == rule.applied == 3  # the first attempt and two retries
        emu.faults.remove(rule)
        sender.send_messages(ServiceBusMessage("after the throttling"))
    assert _count(emu, "orders") == 1


def test_a_rule_covers_its_entity_only(emu: Emulator) -> None:
    with _client(emu) as client:
        with emu.faults.injected("send", "server-busy", "orders") as rule:
            with client.get_queue_sender("other") as sender:
                sender.send_messages(ServiceBusMessage("elsewhere"))
        assert rule.matched == 0
    assert _count(emu, "other") == 1


def test_a_dropped_connection_in_a_receive_loop_is_reconnected(emu: Emulator) -> None:
    """The SDK sees the socket close without a close frame, reconnects and keeps receiving."""
    with _client(emu, retries=3) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
        received: list[str] = []
        with client.get_queue_receiver("orders", prefetch_count=0) as receiver:
            rule = None
            deadline = time.monotonic() + 60
            while len(received) < 4 and time.monotonic() < deadline:
                for message in receiver.receive_messages(max_message_count=1, max_wait_time=WAIT):
                    receiver.complete_message(message)
                    received.append(str(message))
                if rule is None:
                    rule = emu.faults.add("receive", "drop-connection", "orders", count=1)
    assert received == ["m0", "m1", "m2", "m3"]
    assert rule is not None and rule.applied == 1
    assert _count(emu, "orders") == 0


def test_settle_faults_leave_the_message_locked(emu: Emulator) -> None:
    with _client(emu) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("hold"))
        with client.get_queue_receiver("orders", prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            with emu.faults.injected("settle", "lock-lost", "orders"):
                with pytest.raises(MessageLockLostError):
                    receiver.complete_message(message)
            with emu.faults.injected("settle", "server-busy", "orders"):
                with pytest.raises(ServiceBusServerBusyError):
                    receiver.complete_message(message)
            receiver.complete_message(message)  # still locked: the failed settlements did nothing
    assert _count(emu, "orders") == 0


def test_management_put_token_and_connect_faults(emu: Emulator) -> None:
    with _client(emu) as client:
        with client.get_queue_receiver("orders") as receiver:
            with emu.faults.injected("management", "server-busy", "orders"):
                with pytest.raises(ServiceBusServerBusyError):
                    receiver.peek_messages()
            assert receiver.peek_messages() == []
        with emu.faults.injected("put-token", "server-busy", "orders"):
            # the SDK turns any refused put-token into an authentication error
            with pytest.raises(ServiceBusAuthenticationError):
                with client.get_queue_sender("orders") as sender:
                    sender.send_messages(ServiceBusMessage("x"))
    with _client(emu) as client, emu.faults.injected("connect", "server-busy") as rule:
        with pytest.raises(ServiceBusConnectionError):
            with client.get_queue_sender("orders") as sender:
                sender.send_messages(ServiceBusMessage("x"))
        assert rule.applied == 1


def test_latency_delays_the_answer(emu: Emulator) -> None:
    """The send is answered no sooner than the added latency (a lower bound: load cannot break it)."""
    with _client(emu) as client, client.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("warm-up"))
        with emu.faults.injected("send", "latency", "orders", seconds=1.5) as rule:
            started = time.monotonic()
            sender.send_messages(ServiceBusMessage("slow"))
            assert time.monotonic() - started >= 1.4
        assert rule.applied == 1
    assert _count(emu, "orders") == 2


def test_probability_is_seeded_and_count_bounds_it() -> None:
    """The same seed fails the same operations on every run; count stops the rule after that many."""
    def pattern(seed: int) -> list[bool]:
        faults = Faults()
        faults.add("send", "server-busy", "q", probability=0.5, seed=seed)
        return [faults.check("send", "q") is not None for _ in range(40)]

    assert pattern(7) == pattern(7)
    assert 5 < sum(pattern(7)) < 35
    faults = Faults()
    rule = faults.add("send", "server-busy", count=3)
    assert [faults.check("send", "any") is not None for _ in range(5)] == [True, True, True, False, False]
    assert (rule.matched, rule.applied, rule.spent) == (5, 3, True)
    assert not faults.add("send", "server-busy", "q/subscriptions/s").covers("send", "q")
    assert faults.add("send", "server-busy", "Events").covers("send", "events/subscriptions/all")
    for bad in ({"operation": "fly"}, {"effect": "boom"}, {"probability": 2}, {"count": -1}):
        with pytest.raises(ValueError):
            faults.add_from({"operation": "send", "effect": "server-busy", **bad})
    with pytest.raises(ValueError, match="seconds"):
        faults.add("send", "latency")


def test_faults_over_the_admin_endpoint(emu: Emulator) -> None:
    status, headers, body = call(emu, "POST", "/$admin/faults", json.dumps(
        {"operation": "send", "effect": "server-busy", "entity": "orders", "count": 1}))
    assert status == 201 and headers["content-type"].startswith("application/json")
    rule = json.loads(body)
    assert rule["id"] and rule["applied"] == 0 and rule["spent"] is False
    with _client(emu) as client, client.get_queue_sender("orders") as sender:
        with pytest.raises(ServiceBusServerBusyError):
            sender.send_messages(ServiceBusMessage("refused"))
        sender.send_messages(ServiceBusMessage("accepted"))
    status, _, body = call(emu, "GET", f"/$admin/faults/{rule['id']}")
    assert status == 200 and json.loads(body)["applied"] == 1 and json.loads(body)["matched"] == 2
    listing = json.loads(call(emu, "GET", "/$admin/faults")[2])
    assert [f["id"] for f in listing["faults"]] == [rule["id"]]
    assert listing["effects"]["server-busy"]["condition"] == "com.microsoft:server-busy"
    assert "settle" in listing["operations"]
    assert call(emu, "DELETE", f"/$admin/faults/{rule['id']}")[0] == 204
    assert call(emu, "GET", f"/$admin/faults/{rule['id']}")[0] == 404
    call(emu, "POST", "/$admin/faults", json.dumps({"operation": "send", "effect": "timeout"}))
    assert json.loads(call(emu, "DELETE", "/$admin/faults")[2]) == {"removed": 1}
    status, _, body = call(emu, "POST", "/$admin/faults", json.dumps({"operation": "send", "effect": "boom"}))
    assert status == 400 and "Unknown effect" in json.loads(body)["error"]["message"]
    assert call(emu, "GET", "/$admin/faults", auth=None)[0] == 401
    assert emu.faults.list() == []


def test_the_readme_example_a_retried_schedule_and_a_clock_moved_an_hour() -> None:
    """README, "Use sbemulator in your own tests": scheduling is sending, so a send rule covers it and
    the SDK's retries ride it out; the clock then moves an hour at once."""
    with Emulator(config=TOPOLOGY, clock="manual") as emu, _client(emu, retries=3) as client:
        with client.get_queue_sender("orders") as sender:
            with emu.faults.injected("send", "server-busy", "orders", count=2) as rule:
                sender.schedule_messages(ServiceBusMessage("later"), emu.now() + dt.timedelta(hours=1))
            emu.advance(3600)
        assert rule.applied == 2
        with client.get_queue_receiver("orders") as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            assert str(message) == "later"


def test_lock_lost_on_a_session_receiver_is_session_lock_lost() -> None:
    """A session receiver's lock is the session's ("Message sessions": SessionLockLostException when the
    session lock is lost): the lock-lost effect on its settlement, its session's $management operations
    and its receive is com.microsoft:session-lock-lost, which the SDK raises as SessionLockLostError."""
    with Emulator(config=topology(queues=[queue("sessions", RequiresSession=True)])) as emu, _client(emu) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages([ServiceBusMessage("a1", session_id="a"), ServiceBusMessage("b1", session_id="b")])
        # (the SDK treats a lost session lock as final for that receiver: each case gets a new one)
        with client.get_queue_receiver("sessions", session_id="a", prefetch_count=0) as receiver:
            (message,) = receiver.receive_messages(max_wait_time=WAIT)
            with emu.faults.injected("settle", "lock-lost", "sessions") as rule:
                with pytest.raises(SessionLockLostError):
                    receiver.complete_message(message)
            assert rule.applied == 1
        with client.get_queue_receiver("sessions", session_id="a", prefetch_count=0) as receiver:
            with emu.faults.injected("management", "lock-lost", "sessions"):
                with pytest.raises(SessionLockLostError):
                    receiver.session.renew_lock()
        with client.get_queue_receiver("sessions", session_id="b", prefetch_count=0) as receiver:
            with emu.faults.injected("receive", "lock-lost", "sessions", count=1):
                with pytest.raises(SessionLockLostError):
                    receiver.receive_messages(max_wait_time=WAIT)
        for session_id, body in (("a", "a1"), ("b", "b1")):  # the injected answers settled nothing
            with client.get_queue_receiver("sessions", session_id=session_id, prefetch_count=0) as receiver:
                (message,) = receiver.receive_messages(max_wait_time=WAIT)
                assert str(message) == body
                receiver.complete_message(message)
    assert EFFECTS["session-lock-lost"].condition == "com.microsoft:session-lock-lost"
