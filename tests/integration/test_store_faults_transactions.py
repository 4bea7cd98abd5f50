"""A transaction whose own commit the store cannot write is all or nothing in memory too: the commit is
refused (QuotaExceeded for a full disk, ServerBusy for another write error, as a send is), and every
staged send, settlement and session state is as before it. A message settled inside the refused
transaction stays locked by its receiver, as Service Bus leaves the messages of a transaction that did
not commit ("Overview of Service Bus transaction processing"; the .NET SDK's transaction tests complete
such a message again after a rollback), so the receiver can settle it again.

Raw AMQP over the coordinator (the Python SDK has no transactions; test_transactions_amqp.py's client),
with the store's SQLite connection failing on demand (test_store_faults.py). The pre-check of the commit
(a store that already cannot write refuses it before anything applies) passes here, because nothing is
pending when the fault starts: what is exercised is the commit's own write failing.
"""

from __future__ import annotations

import copy
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message, parse_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Attach,
    Detach,
    Disposition,
    Flow,
    Properties,
    Rejected,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.transactions import TransactionalState
from sbemulator.amqp.types import Array, UByte, UInt
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive
from tests.integration.test_store_faults import FULL, Faults, data_dir, emu, faults  # noqa: F401 (fixtures)
from tests.integration.test_transactions_amqp import ORDERS, TxClient

RECEIVER = 20  # a peek-lock receiver link on orders, on the coordinator's session
MGMT_REQUEST, MGMT_REPLY = 10, 11


def _condition(state: Any) -> str:
    assert isinstance(state, Rejected) and state.error is not None, state
    return str(state.error.condition)


def _receive_one(client: TxClient) -> Transfer:
    raw = client.raw
    raw.frame(Attach("txn-receiver", UInt(RECEIVER), ROLE_RECEIVER, UByte(0), UByte(1), Source("orders"),
                     Target("txn-receiver")))
    attach = client.read_until(lambda b: isinstance(b, Attach) and b.name == "txn-receiver")
    raw.frame(Flow(UInt(0), UInt(1000), UInt(client.next_delivery[0]), UInt(1000), UInt(RECEIVER), UInt(0),
                   UInt(1)))
    # the server's transfers name its own handle of the link (the one its attach carries)
    transfer = client.read_until(lambda b: isinstance(b, Transfer) and b.handle == attach.handle)
    assert isinstance(transfer, Transfer)
    return transfer


def _settle(client: TxClient, delivery_id: int, state: Any) -> Any:
    """The receiver's disposition of one delivery; the server's echo's state."""
    client.raw.frame(Disposition(ROLE_RECEIVER, UInt(delivery_id), None, False, state))
    echo = client.read_until(lambda b: isinstance(b, Disposition) and b.role is ROLE_SENDER
                             and b.first == delivery_id)
    return echo.state


def _peek(target: Emulator, sub_queue: ServiceBusSubQueue | None = None, path: str = "orders") -> list[str]:
    with ServiceBusClient.from_connection_string(target.connection_string) as client, \
            client.get_queue_receiver(path, sub_queue=sub_queue) as receiver:
        return [str(m) for m in receiver.peek_messages(max_message_count=20)]


def test_a_refused_commit_takes_back_its_send_and_leaves_its_settlement_locked_by_the_receiver(
    emu: Emulator, faults: Faults, data_dir: Path  # noqa: F811
) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as sb, sb.get_queue_sender("orders") as s:
        s.send_messages(ServiceBusMessage("settled-in-txn"))
    client = TxClient(emu)
    try:
        delivery = _receive_one(client)
        delivery_id = int(delivery.delivery_id or 0)
        txn = client.declare()
        assert isinstance(client.send(ORDERS, "sent-in-txn", txn), TransactionalState)
        echo = _settle(client, delivery_id, TransactionalState(txn, Accepted()))
        assert isinstance(echo, TransactionalState) and isinstance(echo.outcome, Accepted), echo
        faults.fail(sqlite3.OperationalError(FULL))
        assert _condition(client.discharge(txn)) == "amqp:resource-limit-exceeded"
        faults.fail(None)
        # Nothing of it applied: the message is still locked, so its lock token completes it now (over
        # $management: the link's delivery was settled by the transactional disposition's echo).
        token = uuid.UUID(bytes_le=bytes(delivery.delivery_tag or b""))
        reply = management_request(client, None, "orders", "com.microsoft:update-disposition", {
            "disposition-status": "completed", "lock-tokens": Array((token,), "uuid")})
        assert reply.get("statusCode") == 200, reply
    finally:
        client.close()
    assert _peek(emu) == []  # the completion took it; the refused transaction's send was never stored
    emu.stop()
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data_dir, in_memory=False) as again:
        assert _peek(again) == []


def management_request(client: TxClient, txn_id: bytes | None, path: str, operation: str, body: dict) -> dict:
    """One $management request on ``path`` (inside the transaction ``txn_id``, if given); the reply's
    application properties."""
    raw = client.raw
    raw.frame(Attach(f"mgmt-reply-{operation}", UInt(MGMT_REPLY), ROLE_RECEIVER, None, None,
                     Source(f"{path}/$management"), Target("client-mgmt")))
    reply_attach = client.read_until(lambda b: isinstance(b, Attach) and b.name == f"mgmt-reply-{operation}")
    raw.frame(Attach(f"mgmt-request-{operation}", UInt(MGMT_REQUEST), ROLE_SENDER, None, None,
                     Source("client-mgmt"), Target(f"{path}/$management"), initial_delivery_count=UInt(0)))
    client.read_until(lambda b: isinstance(b, Attach) and b.name == f"mgmt-request-{operation}")
    raw.frame(Flow(UInt(0), UInt(1000), UInt(client.next_delivery[0]), UInt(1000), UInt(MGMT_REPLY), UInt(0),
                   UInt(10)))
    request = encode_message(properties=Properties(message_id=f"req-{operation}", reply_to="client-mgmt"),
                             application_properties={"operation": operation}, value=body)
    delivery_id = client.next_delivery[0]
    client.next_delivery[0] += 1
    raw.frame(Transfer(UInt(MGMT_REQUEST), UInt(delivery_id), f"req-{operation}".encode(), UInt(0), True,
                       state=TransactionalState(txn_id) if txn_id is not None else None), payload=request)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        frame = raw.read_frame()
        if isinstance(frame.body, Transfer) and frame.body.handle == reply_attach.handle:
            props = dict(parse_message(frame.payload).application_properties or {})
            for handle in (MGMT_REQUEST, MGMT_REPLY):  # free the handles for the next request
                raw.frame(Detach(UInt(handle), True))
                client.read_until(lambda b: isinstance(b, Detach))
            return props
    raise TimeoutError("no reply")


def test_a_refused_commit_leaves_a_dead_lettering_and_the_session_state_as_before(
    emu: Emulator, faults: Faults  # noqa: F811
) -> None:
    """Dead-lettering by $management update-disposition ('suspended') and set-session-state, both inside
    the transaction; the commit's write fails with another error (ServerBusy)."""
    with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
        with sb.get_queue_sender("sessions") as sender:
            sender.send_messages(ServiceBusMessage("m", session_id="s-1"))
        with sb.get_queue_receiver("sessions", session_id="s-1") as receiver:
            assert receiver.session is not None
            receiver.session.set_state(b"before")
            [message] = receive(receiver, 1)
            assert message.lock_token is not None
            client = TxClient(emu)
            try:
                txn = client.declare()
                token = uuid.UUID(str(message.lock_token))
                reply = management_request(client, txn, "sessions", "com.microsoft:update-disposition", {
                    "disposition-status": "suspended", "lock-tokens": Array((token,), "uuid"),
                    "deadletter-reason": "in-txn", "session-id": "s-1"})
                assert reply.get("statusCode") == 200, reply
                reply = management_request(client, txn, "sessions", "com.microsoft:set-session-state",
                                    {"session-id": "s-1", "session-state": b"inside"})
                assert reply.get("statusCode") == 200, reply
                faults.fail(sqlite3.OperationalError("disk I/O error"))
                assert _condition(client.discharge(txn)) == "com.microsoft:server-busy"
                faults.fail(None)
            finally:
                client.close()
            assert receiver.session.get_state() == b"before"
            receiver.complete_message(message)  # still locked by this receiver: not dead-lettered
    assert _peek(emu, ServiceBusSubQueue.DEAD_LETTER, "sessions") == []
