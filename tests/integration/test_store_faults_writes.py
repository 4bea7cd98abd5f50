"""The writes besides a send that a full or failing store must refuse too, never answering before the
write landed and never storing a refused one later: a ``$management`` schedule-message (the SDK's
``schedule_messages``), a transaction's commit, a send from the web console, a ``$management``
set-session-state (the SDK's ``session.set_state``) and remove-rule, and auto-forwarding into a full queue.

Errors as for a send (test_store_faults.py; "Service Bus messaging exceptions"): QuotaExceeded
(``amqp:resource-limit-exceeded``, ``ServiceBusQuotaExceededError``) for a full disk, ServerBusy
(``com.microsoft:server-busy``) for another write error. The store faults are the fault-injecting
SQLite wrapper of test_store_faults.py. Auto-forwarding into a destination over its MaxSizeInMegabytes
follows "Chaining Service Bus entities with autoforwarding": "If the destination entity accumulates
too many messages and exceeds the quota, or the destination entity is disabled, the source entity adds
the messages to its dead-letter queue until there's space in the destination" (the emulator's
forwarding failures go to the source's transfer dead-letter queue, with the reason in
``DeadLetterErrorDescription``). The console's send is refused the same way (403 QuotaExceeded, 503
ServerBusy) and taken back.
"""

from __future__ import annotations

import copy
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusQuotaExceededError, ServiceBusServerBusyError

from sbemulator import Emulator
from sbemulator.amqp.performatives import Accepted, Rejected
from tests.fixtures.emulator import STANDARD_TOPOLOGY, queue, receive
from tests.integration.test_console_api import Console
from tests.integration.test_store_faults import FULL, Faults, data_dir, emu, faults  # noqa: F401 (fixtures)
from tests.integration.test_store_faults_transactions import management_request
from tests.integration.test_transactions_amqp import ORDERS, TxClient

BODY = b"x" * (200 * 1024)


def _peek(target: Emulator, path: str = "orders") -> list[str]:
    with ServiceBusClient.from_connection_string(target.connection_string) as client, \
            client.get_queue_receiver(path) as receiver:
        return [str(m) for m in receiver.peek_messages(max_message_count=20)]


def test_a_full_store_refuses_a_scheduled_message_and_never_stores_it(
    emu: Emulator, faults: Faults, data_dir: Path  # noqa: F811
) -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client, \
            client.get_queue_sender("orders") as sender:
        faults.fail(sqlite3.OperationalError(FULL))
        with pytest.raises(ServiceBusQuotaExceededError) as refused:
            sender.schedule_messages(ServiceBusMessage("refused"), when)
        assert FULL in str(refused.value)
        faults.fail(sqlite3.OperationalError("disk I/O error"))
        with pytest.raises(ServiceBusServerBusyError):
            sender.schedule_messages(ServiceBusMessage("refused-busy"), when)
        faults.fail(None)
        [number] = sender.schedule_messages(ServiceBusMessage("stored"), when)
    assert _peek(emu) == ["stored"]
    emu.stop()
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again:
        assert _peek(again) == ["stored"]  # nothing refused was written when the store had room again
        with ServiceBusClient.from_connection_string(again.connection_string) as client, \
                client.get_queue_receiver("orders") as receiver:
            assert [m.sequence_number for m in receiver.peek_messages(max_message_count=5)] == [number]


def test_a_full_store_refuses_a_transaction_commit_and_applies_none_of_it(
    emu: Emulator, faults: Faults  # noqa: F811
) -> None:
    client = TxClient(emu)
    try:
        txn = client.declare()
        for message_id in ("in-txn-1", "in-txn-2"):
            client.send(ORDERS, message_id, txn)
        faults.fail(sqlite3.OperationalError(FULL))
        state = client.discharge(txn)
        assert isinstance(state, Rejected) and state.error is not None
        assert str(state.error.condition) == "amqp:resource-limit-exceeded"
        assert FULL in str(state.error.description)
        faults.fail(None)
        # The transaction is over (rolled back): its sends were not applied, and its id is unknown now.
        assert str(client.discharge(txn).error.condition) == "amqp:transaction:unknown-id"
        again = client.declare()
        client.send(ORDERS, "in-txn-3", again)
        assert isinstance(client.discharge(again), Accepted)
    finally:
        client.close()
    assert _peek(emu) == ["in-txn-3"]


@pytest.fixture
def forwarding(tmp_path: Path) -> Emulator:
    config = copy.deepcopy(STANDARD_TOPOLOGY)
    queues = config["UserConfig"]["Namespaces"][0]["Queues"]
    queues.append(queue("tinydest", MaxSizeInMegabytes=1))
    queues.append(queue("forwarder", ForwardTo="tinydest"))
    return Emulator(config=config, in_memory=True, admin_port=None)


def test_forwarding_into_a_full_queue_leaves_the_message_in_the_sources_transfer_dead_letter_queue(
    forwarding: Emulator,
) -> None:
    with forwarding as running, ServiceBusClient.from_connection_string(running.connection_string) as client:
        with client.get_queue_sender("tinydest") as direct:
            for _ in range(6):  # 6 x 200 KB: over 1 MB, the queue is full
                direct.send_messages(ServiceBusMessage(BODY))
            with pytest.raises(ServiceBusQuotaExceededError):
                direct.send_messages(ServiceBusMessage(BODY))
        with client.get_queue_sender("forwarder") as sender:
            sender.send_messages(ServiceBusMessage("forwarded-into-a-full-queue"))  # the send itself is taken
        with client.get_queue_receiver("forwarder", sub_queue=ServiceBusSubQueue.TRANSFER_DEAD_LETTER) as tdlq:
            [held] = receive(tdlq, 1)
            assert str(held) == "forwarded-into-a-full-queue"
            assert held.dead_letter_reason == "MessageTransferFailed"
            assert "tinydest" in str(held.dead_letter_error_description)
            assert "QuotaType: EntitySize" in str(held.dead_letter_error_description)
            tdlq.complete_message(held)
        with client.get_queue_receiver("tinydest") as receiver:
            assert len(receiver.peek_messages(max_message_count=20)) == 6  # nothing forwarded past the quota


def test_a_full_store_refuses_a_console_send_and_never_stores_it(
    emu: Emulator, faults: Faults, data_dir: Path  # noqa: F811
) -> None:
    """The console's send (docs/emulator.md, "Web console") is answered only once the message is stored."""
    console = Console(emu)
    console.login()
    faults.fail(sqlite3.OperationalError(FULL))
    status, _, body = console.call("POST", "/console/api/send", {"path": "orders", "body": "refused"})
    assert status == 403 and body["error"] == "QuotaExceeded", body
    assert FULL in body["message"]
    faults.fail(sqlite3.OperationalError("disk I/O error"))
    status, _, body = console.call("POST", "/console/api/send", {"path": "orders", "body": "refused-busy"})
    assert status == 503 and body["error"] == "ServerBusy", body
    faults.fail(None)
    assert console.call("POST", "/console/api/send", {"path": "orders", "body": "stored"})[0] == 200
    assert _peek(emu) == ["stored"]
    emu.stop()
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again:
        assert _peek(again) == ["stored"]


def test_a_full_store_refuses_a_session_state_and_keeps_the_one_stored(
    emu: Emulator, faults: Faults, data_dir: Path  # noqa: F811
) -> None:
    """A $management set-session-state is answered only once stored (the SDK's session.set_state): a
    state the store cannot write is refused, the session keeps its state and its lock, and the next
    start has the state that was stored."""
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages(ServiceBusMessage("m", session_id="s-1"))
        with client.get_queue_receiver("sessions", session_id="s-1") as receiver:
            assert receiver.session is not None
            receiver.session.set_state(b"stored")
            faults.fail(sqlite3.OperationalError(FULL))
            with pytest.raises(ServiceBusQuotaExceededError):
                receiver.session.set_state(b"refused")
            faults.fail(sqlite3.OperationalError("disk I/O error"))
            with pytest.raises(ServiceBusServerBusyError):
                receiver.session.set_state(b"refused-busy")
            faults.fail(None)
            assert receiver.session.get_state() == b"stored"
            [message] = receive(receiver, 1)
            receiver.complete_message(message)  # the session lock held throughout
    emu.stop()
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client, \
            client.get_queue_sender("sessions") as sender:
        sender.send_messages(ServiceBusMessage("n", session_id="s-1"))
        with client.get_queue_receiver("sessions", session_id="s-1") as receiver:
            assert receiver.session is not None and receiver.session.get_state() == b"stored"


def test_a_full_store_refuses_a_rule_removal_over_amqp_and_keeps_the_rule(
    emu: Emulator, faults: Faults  # noqa: F811
) -> None:
    """The $management remove-rule (the JavaScript SDK's rule manager sends it) is answered only once
    stored, as the Atom API's rule changes are (test_store_faults_admin.py)."""
    client = TxClient(emu)
    try:
        faults.fail(sqlite3.OperationalError(FULL))
        reply = management_request(client, None, "events/Subscriptions/high", "com.microsoft:remove-rule",
                            {"rule-name": "high"})
        assert reply.get("statusCode") == 403, reply
        assert str(reply.get("errorCondition")) == "amqp:resource-limit-exceeded"
        faults.fail(None)
    finally:
        client.close()
    assert [r.name for r in emu.call(emu.broker.list_rules, "events/Subscriptions/high")] == ["high"]
