"""Service Bus transactions at the protocol level: a raw AMQP client against a running emulator.

The Java SDK suite (tests/interop/java, TransactionsTest) covers transactions as an application uses
them; these tests cover the edges an SDK never sends on purpose. They follow AMQP 1.0 part 4
("Transactions"): a coordinator link (4.2), declare answered by ``declared`` with a transaction id
(4.3, 4.5.4), transfers carrying ``transactional-state`` answered inside one (4.4.1), discharge
answered ``accepted`` (4.3) or ``rejected`` with ``amqp:transaction:unknown-id`` for an id that is
not (or no longer) declared (4.5.8), and "Overview of Service Bus transaction processing" (Service
Bus docs): a transaction works on one top-level entity and times out after 2 minutes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message, parse_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Attach,
    Begin,
    Disposition,
    Flow,
    Properties,
    Rejected,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.transactions import Coordinator, Declare, Declared, Discharge, TransactionalState
from sbemulator.amqp.types import Symbol, UInt
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.integration.test_malformed_input import RawClient

# Link handles. Session 0 carries the coordinator, a sender to orders, a send-via link (target orders,
# destination retry3) and a plain sender to dedup; session 1 a sender to retry3.
COORDINATOR, ORDERS, RETRY3, VIA_ORDERS_TO_RETRY3, DEDUP = 0, 1, 2, 3, 4
CHANNEL = {COORDINATOR: 0, ORDERS: 0, VIA_ORDERS_TO_RETRY3: 0, DEDUP: 0, RETRY3: 1}
TRANSFER_DESTINATION = Symbol("com.microsoft:transfer-destination-address")


def _plain(name: str, key: str) -> bytes:
    return b"\x00" + name.encode() + b"\x00" + key.encode()


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None) as emulator:
        yield emulator


class TxClient:
    """A raw client with a coordinator link and the sender links above."""

    def __init__(self, emu: Emulator) -> None:
        self.raw = RawClient(emu.port)
        self.raw.open("PLAIN", _plain(emu.key_name, emu.key))
        self.raw.frame(Begin(None, UInt(0), UInt(1000), UInt(1000)))
        self.raw.frame(Begin(None, UInt(0), UInt(1000), UInt(1000)), channel=1)
        self.next_delivery = {0: 0, 1: 0}
        self.pending: list[Any] = []
        self.read_until(lambda b: isinstance(b, Begin))
        self.read_until(lambda b: isinstance(b, Begin))
        self.raw.frame(Attach("txn-controller", UInt(COORDINATOR), ROLE_SENDER, None, None,
                              Source("controller"), Coordinator(None), initial_delivery_count=UInt(0)))
        attach = self.read_until(lambda b: isinstance(b, Attach) and b.name == "txn-controller")
        assert isinstance(attach.target, Coordinator)
        for handle, address, props in ((ORDERS, "orders", None), (RETRY3, "retry3", None), (DEDUP, "dedup", None),
                                       (VIA_ORDERS_TO_RETRY3, "orders", {TRANSFER_DESTINATION: "retry3"})):
            name = f"sender-{handle}"
            self.raw.frame(Attach(name, UInt(handle), ROLE_SENDER, None, None, Source(f"client-{handle}"),
                                  Target(address), initial_delivery_count=UInt(0), properties=props),
                           channel=CHANNEL[handle])
            attach = self.read_until(lambda b, name=name: isinstance(b, Attach) and b.name == name)
            assert attach.target is not None, attach

    def close(self) -> None:
        self.raw.close()

    def read_until(self, predicate: Any, timeout: float = 5.0) -> Any:
        for i, body in enumerate(self.pending):
            if predicate(body):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = self.raw.read_frame().body
            if predicate(body):
                return body
            self.pending.append(body)
        raise TimeoutError("no matching frame")

    def transfer(self, handle: int, payload: bytes, state: Any = None) -> Any:
        """One unsettled transfer; returns the state of the server's disposition for it."""
        channel = CHANNEL[handle]
        delivery_id = self.next_delivery[channel]
        self.next_delivery[channel] += 1
        self.raw.frame(Transfer(UInt(handle), UInt(delivery_id), f"tag-{delivery_id}".encode(), UInt(0), False,
                                state=state), payload=payload, channel=channel)
        # (Frames are not told apart by channel here: each test waits for one disposition at a time.)
        disposition = self.read_until(
            lambda b: isinstance(b, Disposition) and b.role is ROLE_RECEIVER and b.first == delivery_id)
        assert disposition.settled is True
        return disposition.state

    def declare(self) -> bytes:
        state = self.transfer(COORDINATOR, encode_message(value=Declare()))
        assert isinstance(state, Declared), state
        assert isinstance(state.txn_id, bytes) and state.txn_id
        return state.txn_id

    def discharge(self, txn_id: bytes, fail: bool = False) -> Any:
        return self.transfer(COORDINATOR, encode_message(value=Discharge(txn_id, fail)))

    def send(self, handle: int, message_id: str, txn_id: bytes | None) -> Any:
        payload = encode_message(properties=Properties(message_id=message_id), data=message_id.encode())
        return self.transfer(handle, payload, TransactionalState(txn_id) if txn_id is not None else None)


def _count(emu: Emulator, path: str = "orders") -> int:
    return emu.call(emu.broker.message_count, path)


def _condition(state: Any) -> str:
    assert isinstance(state, Rejected) and state.error is not None, state
    return str(state.error.condition)


def test_commit_applies_the_transactional_sends_and_only_then(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        txn = client.declare()
        for i in range(3):
            state = client.send(ORDERS, f"tx-{i}", txn)
            # 4.4.1: the outcome of a transactional transfer comes back inside a transactional-state.
            assert isinstance(state, TransactionalState) and state.txn_id == txn
            assert isinstance(state.outcome, Accepted)
        assert _count(emu) == 0  # staged, not in the queue
        assert isinstance(client.discharge(txn), Accepted)
        assert _count(emu) == 3
    finally:
        client.close()


def test_rollback_applies_nothing_and_the_id_is_then_unknown(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        txn = client.declare()
        client.send(ORDERS, "rolled-back", txn)
        assert isinstance(client.discharge(txn, fail=True), Accepted)
        assert _count(emu) == 0
        # Discharging twice: the transaction is over, its id no longer known (4.5.8).
        assert _condition(client.discharge(txn)) == "amqp:transaction:unknown-id"
        assert _condition(client.discharge(txn, fail=True)) == "amqp:transaction:unknown-id"
        # A send outside any transaction still works on the same links.
        assert isinstance(client.send(ORDERS, "plain", None), Accepted)
        assert _count(emu) == 1
    finally:
        client.close()


def test_discharging_twice_after_a_commit_is_unknown_id(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        txn = client.declare()
        client.send(ORDERS, "once", txn)
        assert isinstance(client.discharge(txn), Accepted)
        assert _condition(client.discharge(txn)) == "amqp:transaction:unknown-id"
        assert _count(emu) == 1  # committed once
    finally:
        client.close()


def test_unknown_transaction_id_is_refused_on_transfer_and_discharge(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        state = client.send(ORDERS, "stray", b"never-declared-1")
        assert isinstance(state, TransactionalState) and state.txn_id == b"never-declared-1"
        assert _condition(state.outcome) == "amqp:transaction:unknown-id"
        assert _condition(client.discharge(b"never-declared-2")) == "amqp:transaction:unknown-id"
        assert _count(emu) == 0
    finally:
        client.close()


def test_transaction_ids_belong_to_their_connection(emu: Emulator) -> None:
    first, second = TxClient(emu), TxClient(emu)
    try:
        txn = first.declare()
        state = second.send(ORDERS, "other-connection", txn)
        assert _condition(state.outcome) == "amqp:transaction:unknown-id"
        assert _condition(second.discharge(txn)) == "amqp:transaction:unknown-id"
        assert isinstance(first.discharge(txn), Accepted)  # still open on its own connection
    finally:
        first.close()
        second.close()


def test_a_transaction_stays_within_one_top_level_entity(emu: Emulator) -> None:
    """Service Bus: "Local transactions cannot span multiple top-level entities such as queue or
    topic": a send to a second entity, not via the first and from another AMQP session, is refused,
    and the refusal dooms the transaction: its commit rolls back the work that was accepted."""
    client = TxClient(emu)
    try:
        txn = client.declare()
        assert isinstance(client.send(ORDERS, "first-entity", txn).outcome, Accepted)
        refused = client.send(RETRY3, "second-entity", txn)
        assert _condition(refused.outcome) == "amqp:not-allowed"
        assert "cannot span multiple top-level entities" in str(refused.outcome.error.description)
        rolled_back = client.discharge(txn)
        assert _condition(rolled_back) == "amqp:transaction:rollback"
        assert "cannot span multiple top-level entities" in str(rolled_back.error.description)
        assert (_count(emu, "orders"), _count(emu, "retry3")) == (0, 0)
    finally:
        client.close()


def test_send_via_the_transaction_entity_reaches_the_destination_on_commit(emu: Emulator) -> None:
    """Service Bus "Transfers and send via": a link whose target is the transaction's entity and whose
    com.microsoft:transfer-destination-address names another delivers there, only on commit."""
    client = TxClient(emu)
    try:
        txn = client.declare()
        assert isinstance(client.send(ORDERS, "in-orders", txn).outcome, Accepted)
        assert isinstance(client.send(VIA_ORDERS_TO_RETRY3, "via-to-retry3", txn).outcome, Accepted)
        assert (_count(emu, "orders"), _count(emu, "retry3")) == (0, 0)
        assert isinstance(client.discharge(txn), Accepted)
        assert (_count(emu, "orders"), _count(emu, "retry3")) == (1, 1)
        # Outside a transaction the send-via link delivers straight to its destination.
        assert isinstance(client.send(VIA_ORDERS_TO_RETRY3, "plain-via", None), Accepted)
        assert (_count(emu, "orders"), _count(emu, "retry3")) == (1, 2)
    finally:
        client.close()


def test_a_send_on_the_first_operations_session_goes_via_its_entity(emu: Emulator) -> None:
    """The Java SDK's cross-entity transactions open every link on one AMQP session and name no via
    entity: a send over the session of the transaction's first operation goes via that entity."""
    client = TxClient(emu)
    try:
        txn = client.declare()
        assert isinstance(client.send(ORDERS, "first", txn).outcome, Accepted)
        assert isinstance(client.send(DEDUP, "same-session", txn).outcome, Accepted)
        assert isinstance(client.discharge(txn), Accepted)
        assert (_count(emu, "orders"), _count(emu, "dedup")) == (1, 1)
    finally:
        client.close()


def test_closing_the_connection_rolls_back_what_it_did_not_discharge(emu: Emulator) -> None:
    client = TxClient(emu)
    txn = client.declare()
    client.send(ORDERS, "never-committed", txn)
    client.close()
    # The next connection's work is seen only after the emulator handled the close.
    other = TxClient(emu)
    try:
        assert _condition(other.discharge(txn)) == "amqp:transaction:unknown-id"
        assert _count(emu) == 0
    finally:
        other.close()


def test_a_transaction_past_its_timeout_is_rolled_back(emu: Emulator) -> None:
    """Service Bus: a transaction times out after 2 minutes (shortened here through the server's
    transaction_timeout_s); its work is dropped and its commit fails with amqp:transaction:timeout."""
    assert emu.server is not None
    emu.server.transaction_timeout_s = 0.5
    client = TxClient(emu)
    try:
        txn = client.declare()
        client.send(ORDERS, "too-late", txn)
        deadline = time.monotonic() + 10
        state: Any = None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            state = client.send(ORDERS, "probe", txn)
            if isinstance(state.outcome, Rejected):
                break
        assert _condition(state.outcome) == "amqp:transaction:timeout"
        assert _condition(client.discharge(txn)) == "amqp:transaction:timeout"
        assert _count(emu) == 0
        # Once reported, the id is gone like any discharged one.
        assert _condition(client.discharge(txn)) == "amqp:transaction:unknown-id"
    finally:
        client.close()


def test_the_coordinator_offers_local_transactions_and_grants_credit(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        # The flow that granted the coordinator link its credit was read past while attaching.
        flows = [b for b in client.pending if isinstance(b, Flow) and b.handle == COORDINATOR]
        assert flows and (flows[0].link_credit or 0) > 0
        txn = client.declare()
        assert _condition(client.transfer(COORDINATOR, encode_message(value=Declare(b"global-1")))) == \
            "amqp:not-implemented"
        assert isinstance(client.discharge(txn, fail=True), Accepted)
    finally:
        client.close()



def _management_request(client: TxClient, txn_id: bytes, operation: str, body: dict) -> dict:
    """One $management request on the ``sessions`` queue whose transfer carries a transactional-state
    (as the Java SDK's ManagementChannel sends them); returns the reply's application properties."""
    raw = client.raw
    raw.frame(Attach("mgmt-reply", UInt(11), ROLE_RECEIVER, None, None, Source("sessions/$management"),
                     Target("client-mgmt")))
    client.read_until(lambda b: isinstance(b, Attach) and b.name == "mgmt-reply")
    raw.frame(Attach("mgmt-request", UInt(10), ROLE_SENDER, None, None, Source("client-mgmt"),
                     Target("sessions/$management"), initial_delivery_count=UInt(0)))
    client.read_until(lambda b: isinstance(b, Attach) and b.name == "mgmt-request")
    raw.frame(Flow(UInt(0), UInt(1000), UInt(client.next_delivery[0]), UInt(1000), UInt(11), UInt(0), UInt(10)))
    request = encode_message(properties=Properties(message_id="req-1", reply_to="client-mgmt"),
                             application_properties={"operation": operation}, value=body)
    delivery_id = client.next_delivery[0]
    client.next_delivery[0] += 1
    raw.frame(Transfer(UInt(10), UInt(delivery_id), b"req-1", UInt(0), True, state=TransactionalState(txn_id)),
              payload=request)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        frame = raw.read_frame()
        if isinstance(frame.body, Transfer) and frame.body.handle is not None:
            return dict(parse_message(frame.payload).application_properties or {})
    raise TimeoutError("no reply")


def test_session_state_set_inside_a_transaction_applies_on_commit(emu: Emulator) -> None:
    """Service Bus transactions take session state (the .NET SDK's "Setting session state within a
    transaction" sample): a set-session-state carrying a transactional-state shows only on commit."""
    with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
        with sb.get_queue_sender("sessions") as sender:
            sender.send_messages(ServiceBusMessage("m", session_id="s-1"))
        with sb.get_queue_receiver("sessions", session_id="s-1") as receiver:
            receiver.session.set_state(b"before")
            client = TxClient(emu)
            try:
                txn = client.declare()
                props = _management_request(client, txn, "com.microsoft:set-session-state",
                                            {"session-id": "s-1", "session-state": b"inside"})
                assert props.get("statusCode") == 200, props
                assert receiver.session.get_state() == b"before"
                assert isinstance(client.discharge(txn), Accepted)
                assert receiver.session.get_state() == b"inside"
            finally:
                client.close()


def test_scheduling_inside_a_transaction_is_refused_and_dooms_it(emu: Emulator) -> None:
    client = TxClient(emu)
    try:
        txn = client.declare()
        props = _management_request(client, txn, "com.microsoft:cancel-scheduled-message",
                                    {"sequence-numbers": [1]})
        assert props.get("statusCode") == 400 and str(props.get("errorCondition")) == "amqp:not-allowed", props
        assert _condition(client.discharge(txn)) == "amqp:transaction:rollback"
    finally:
        client.close()
