"""What the .NET stack expects of ``$management``, sessions, rules, transactions and AMQP over
WebSockets, frame by frame (see test_dotnet_wire.py for the approach).

Sources: azure-sdk-for-net ``sdk/servicebus/Azure.Messaging.ServiceBus/src/Amqp/`` (``AmqpReceiver``,
``AmqpSender``, ``AmqpRuleManager``, ``AmqpRequestMessage``, ``AmqpResponseMessage``,
``ManagementConstants``, ``AmqpConnectionScope``) and azure-amqp 2.x (``Transaction/Controller``,
``Transport/WebSocketTransportSettings``). ``AmqpResponseMessage.GetValue<T>`` throws when a value is
not exactly a ``T``, ``GetListValue`` casts to ``List<object>`` (an AMQP list, not an array), and
``GetResponseStatusCode`` takes ``statusCode`` only when it is a boxed ``int``.
"""

from __future__ import annotations

import base64
import copy
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sbemulator import Emulator
from sbemulator.amqp.codec import array_of
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import Accepted, Attach, Detach, Header, Modified, Properties, Rejected, Source
from sbemulator.amqp.transactions import Coordinator, Declare, Declared, Discharge, TransactionalState
from sbemulator.amqp.types import Array, Described, Int, Long, Symbol, Timestamp, UInt, ULong
from tests.fixtures.dotnet_wire import (
    LOCKED_UNTIL_UTC,
    SESSION_FILTER,
    Delivery,
    DotNetWire,
    Link,
    connect,
    ticks_to_unix,
)
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.integration.test_malformed_input import RawClient

QUEUE = "orders"
SESSIONS = "sessions"


def _authorized(emu: Emulator, *entities: str) -> DotNetWire:
    wire = connect(emu.port)
    for entity in entities:
        reply = wire.put_token(wire.entity_uri(entity), emu.key_name, emu.key, resource=f"amqps://{wire.host}/")
        assert reply.application_properties["status-code"] == 202, reply.application_properties
    return wire


def _message(body: bytes, session_id: str | None = None) -> bytes:
    return encode_message(header=Header(durable=True),
                          properties=Properties(message_id=str(uuid.uuid4()), group_id=session_id), data=body)


def _status(reply: Any) -> int:
    code = reply.application_properties["statusCode"]
    assert type(code) is Int, f"statusCode must be an AMQP int, got {type(code).__name__}"
    return int(code)


def _locked(wire: DotNetWire, entity: str, body: bytes) -> tuple[Link, Delivery]:
    sender = wire.sender(entity)
    assert isinstance(wire.send_message(sender, _message(body)).state, Accepted)
    receiver = wire.receiver(entity)
    wire.flow(receiver, 1)
    return receiver, wire.receive(receiver)


# ---------------------------------------------------------------------------------------------- $management
def test_management_link_attach_and_renew_lock_types(emulator: Emulator) -> None:
    """``AmqpConnectionScope.CreateManagementLinkAsync`` (``orders/$management``, properties
    com.microsoft:timeout and com.microsoft:entity-type = entity-mgmt, no ``type`` on requests:
    ``AmqpRequestMessage``), then ``AmqpReceiver.RenewLockInternalAsync``: lock-tokens a Guid[]
    (uuid array), associated-link-name the receiver's link; the reply's ``expirations`` read as
    ``GetValue<DateTime[]>``: an array of timestamps."""
    with _authorized(emulator, QUEUE) as wire:
        receiver, delivery = _locked(wire, QUEUE, b"renew me")
        mgmt = wire.management(QUEUE)
        assert mgmt[0].attach.target is not None and mgmt[1].attach.source is not None
        reply = wire.manage(mgmt, "com.microsoft:renew-lock",
                            {"lock-tokens": array_of([delivery.lock_token], "uuid")}, receiver.name)
        assert _status(reply) == 200
        expirations = reply.body_value()["expirations"]
        assert isinstance(expirations, Array) and expirations.element_type == "timestamp"
        assert expirations.items[0] > time.time() * 1000


def test_peek_and_receive_by_sequence_number_and_update_disposition(emulator: Emulator) -> None:
    """``AmqpReceiver.PeekMessagesInternalAsync`` (from-sequence-number long, message-count int; reply
    ``messages``: a list of maps with ``message`` binary; 204 when empty),
    ``ReceiveDeferredMessagesAsyncInternal`` (sequence-numbers long[], receiver-settle-mode uint; each
    reply map has ``message`` and ``lock-token`` a Guid) and ``DisposeMessageRequestResponseAsync``
    (disposition-status ``completed``, lock-tokens Guid[])."""
    with _authorized(emulator, QUEUE) as wire:
        receiver, delivery = _locked(wire, QUEUE, b"deferred")
        seq = delivery.message.message_annotations[Symbol("x-opt-sequence-number")]
        wire.settle(delivery, Modified(undeliverable_here=True), settled=False)
        wire.disposition_for(receiver.channel, delivery.delivery_id)
        mgmt = wire.management(QUEUE)
        peeked = wire.manage(mgmt, "com.microsoft:peek-message",
                             {"from-sequence-number": Long(seq), "message-count": Int(5)})
        assert _status(peeked) == 200
        messages = peeked.body_value()["messages"]
        assert isinstance(messages, list) and isinstance(messages[0]["message"], bytes)
        got = wire.manage(mgmt, "com.microsoft:receive-by-sequence-number",
                          {"sequence-numbers": array_of([Long(seq)], "long"), "receiver-settle-mode": UInt(1)},
                          receiver.name)
        assert _status(got) == 200
        [entry] = got.body_value()["messages"]
        assert isinstance(entry["message"], bytes) and isinstance(entry["lock-token"], uuid.UUID)
        done = wire.manage(mgmt, "com.microsoft:update-disposition",
                           {"disposition-status": "completed", "lock-tokens": array_of([entry["lock-token"]], "uuid")},
                           receiver.name)
        assert _status(done) == 200
        empty = wire.manage(mgmt, "com.microsoft:peek-message",
                            {"from-sequence-number": Long(seq + 1), "message-count": Int(5)})
        assert _status(empty) == 204


def test_schedule_and_cancel_as_the_sender_builds_them(emulator: Emulator) -> None:
    """``AmqpSender.ScheduleMessagesInternalAsync``: ``messages`` a list of maps (message-id, message
    binary); the reply's ``sequence-numbers`` read as ``GetValue<long[]>``: an array of longs.
    ``CancelScheduledMessagesInternalAsync``: sequence-numbers long[]."""
    with _authorized(emulator, QUEUE) as wire:
        mgmt = wire.management(QUEUE)
        enqueue_at = Timestamp(int((time.time() + 3600) * 1000))
        scheduled = encode_message(
            properties=Properties(message_id="later"), data=b"later",
            message_annotations={Symbol("x-opt-scheduled-enqueue-time"): enqueue_at})
        reply = wire.manage(mgmt, "com.microsoft:schedule-message",
                            {"messages": [{"message-id": "later", "message": scheduled}]})
        assert _status(reply) == 200
        numbers = reply.body_value()["sequence-numbers"]
        assert isinstance(numbers, Array) and numbers.element_type == "long"
        cancel = wire.manage(mgmt, "com.microsoft:cancel-scheduled-message",
                             {"sequence-numbers": array_of([Long(numbers.items[0])], "long")})
        assert _status(cancel) == 200


def test_lock_lost_is_an_int_status_with_the_vendor_condition(emulator: Emulator) -> None:
    """``AmqpExceptionHelper.ToMessagingContractException``: the reply's ``errorCondition`` symbol
    com.microsoft:message-lock-lost becomes ServiceBusFailureReason.MessageLockLost."""
    with _authorized(emulator, QUEUE) as wire:
        mgmt = wire.management(QUEUE)
        reply = wire.manage(mgmt, "com.microsoft:renew-lock", {"lock-tokens": array_of([uuid.uuid4()], "uuid")})
        assert _status(reply) == 410
        condition = reply.application_properties["errorCondition"]
        assert type(condition) is Symbol and condition == "com.microsoft:message-lock-lost"


# ---------------------------------------------------------------------------------------------- sessions
def test_session_receiver_by_id_reads_the_filter_and_locked_until_as_ticks(emulator: Emulator) -> None:
    """``AmqpConnectionScope.CreateReceivingLinkAsync`` adds the session filter (the id, a string);
    ``AmqpReceiver.OpenReceiverLinkAsync`` then reads the session id from the attach's source filter
    (``(string)``) and ``com.microsoft:locked-until-utc`` from its properties as
    ``new DateTime((long)value, DateTimeKind.Utc)``: .NET ticks in a long."""
    with _authorized(emulator, SESSIONS) as wire:
        sender = wire.sender(SESSIONS)
        assert isinstance(wire.send_message(sender, _message(b"s1", "alpha")).state, Accepted)
        receiver = wire.receiver(SESSIONS, session=True, session_id="alpha")
        source = receiver.attach.source
        assert source.filter[SESSION_FILTER] == "alpha"
        ticks = (receiver.attach.properties or {})[LOCKED_UNTIL_UTC]
        assert type(ticks) is Long and ticks_to_unix(ticks) > time.time()
        wire.flow(receiver, 1)
        assert wire.receive(receiver).message.body_value() == b"s1"


def test_next_available_session_and_its_timeout(emulator: Emulator) -> None:
    """Next available: the filter's value is null and com.microsoft:timeout (uint ms) bounds the
    wait (``AmqpConnectionScope``, ``AmqpClientConstants.TimeoutName``); the attach names the session
    it chose. With none to give: attach, then detach with com.microsoft:timeout
    (``AmqpClientConstants.TimeoutError``; the SDK's ServiceTimeout, which the session processor
    retries)."""
    with _authorized(emulator, SESSIONS) as wire:
        none = wire.receiver(SESSIONS, session=True, timeout_ms=500)
        detach = wire.wait_body(Detach, channel=none.channel)
        assert str(detach.error.condition) == "com.microsoft:timeout"
        sender = wire.sender(SESSIONS)
        assert isinstance(wire.send_message(sender, _message(b"b1", "beta")).state, Accepted)
        chosen = wire.receiver(SESSIONS, session=True, timeout_ms=5000)
        assert chosen.attach.source.filter[SESSION_FILTER] == "beta"


def test_session_state_and_renew_session_lock(emulator: Emulator) -> None:
    """``AmqpReceiver.SetStateInternal`` (session-id, session-state binary), ``GetStateInternal``
    (reply ``session-state`` binary), ``RenewSessionLockInternal`` (reply ``expiration`` read as
    ``GetValue<DateTime>``: a timestamp)."""
    with _authorized(emulator, SESSIONS) as wire:
        sender = wire.sender(SESSIONS)
        assert isinstance(wire.send_message(sender, _message(b"g1", "gamma")).state, Accepted)
        receiver = wire.receiver(SESSIONS, session=True, session_id="gamma")
        mgmt = wire.management(SESSIONS)
        put = wire.manage(mgmt, "com.microsoft:set-session-state",
                          {"session-id": "gamma", "session-state": b"\x01\x02"}, receiver.name)
        assert _status(put) == 200
        got = wire.manage(mgmt, "com.microsoft:get-session-state", {"session-id": "gamma"}, receiver.name)
        assert _status(got) == 200 and got.body_value()["session-state"] == b"\x01\x02"
        renewed = wire.manage(mgmt, "com.microsoft:renew-session-lock", {"session-id": "gamma"}, receiver.name)
        assert _status(renewed) == 200
        expiration = renewed.body_value()["expiration"]
        assert type(expiration) is Timestamp and expiration > time.time() * 1000


def test_session_refusals_the_sdk_maps(emulator: Emulator) -> None:
    """``AmqpExceptionHelper`` maps a detach's or a rejected outcome's condition to the SDK's failure
    reason: com.microsoft:session-cannot-be-locked (SessionCannotBeLocked) for a session another
    receiver holds; amqp:not-allowed for a message without a session id sent to a session queue
    (``AmqpSender``: a ``rejected`` outcome throws its error) and for a receiver without a session
    filter on a session queue."""
    with _authorized(emulator, SESSIONS) as wire:
        sender = wire.sender(SESSIONS)
        refused = wire.send_message(sender, encode_message(properties=Properties(message_id="no-session"), data=b"x"))
        assert isinstance(refused.state, Rejected) and str(refused.state.error.condition) == "amqp:not-allowed"
        assert isinstance(wire.send_message(sender, _message(b"d1", "delta")).state, Accepted)
        holder = wire.receiver(SESSIONS, session=True, session_id="delta")
        assert holder.attach.source is not None
        second = wire.receiver(SESSIONS, session=True, session_id="delta")
        detach = wire.wait_body(Detach, channel=second.channel)
        assert str(detach.error.condition) == "com.microsoft:session-cannot-be-locked"
        plain = wire.receiver(SESSIONS)
        detach = wire.wait_body(Detach, channel=plain.channel)
        assert str(detach.error.condition) == "amqp:not-allowed"


# ---------------------------------------------------------------------------------------------- rules
def test_rule_manager_add_enumerate_remove(emulator: Emulator) -> None:
    """``AmqpRuleManager.CreateRuleInternalAsync`` (rule-name, rule-description map with sql-filter
    {expression} and sql-rule-action), ``GetRulesInternalAsync`` (top int, skip int; reply ``rules``
    read with ``GetListValue<AmqpMap>``: an AMQP list of maps, each ``rule-description`` cast to
    ``AmqpRuleDescriptionCodec``: described by 0x0000013700000004), ``DeleteRuleInternalAsync``."""
    subscription = "events/Subscriptions/all"
    with _authorized(emulator, subscription) as wire:
        mgmt = wire.management(subscription)
        added = wire.manage(mgmt, "com.microsoft:add-rule", {"rule-name": "vip", "rule-description": {
            "sql-filter": {"expression": "Priority = 'High'"},
            "sql-rule-action": {"expression": "SET Checked = 1"}, "rule-name": "vip"}})
        assert _status(added) == 200
        listed = wire.manage(mgmt, "com.microsoft:enumerate-rules", {"top": Int(2**31 - 1), "skip": Int(0)})
        assert _status(listed) == 200
        rules = listed.body_value()["rules"]
        assert isinstance(rules, list)
        descriptions = [entry["rule-description"] for entry in rules]
        assert all(isinstance(d, Described) and d.descriptor == ULong(0x0000013700000004) for d in descriptions)
        assert "vip" in [d.value[2] for d in descriptions]
        removed = wire.manage(mgmt, "com.microsoft:remove-rule", {"rule-name": "vip"})
        assert _status(removed) == 200
        gone = wire.manage(mgmt, "com.microsoft:remove-rule", {"rule-name": "vip"})
        assert _status(gone) == 404
        assert gone.application_properties["errorCondition"] == "com.microsoft:message-not-found" or \
            str(gone.application_properties["errorCondition"]).startswith(("amqp:", "com.microsoft:"))


# ---------------------------------------------------------------------------------------------- transactions
def test_transaction_as_the_controller_declares_it(emulator: Emulator) -> None:
    """azure-amqp ``Transaction/Controller``: a sending link on a session of its own, named by a
    Guid("N"), source that Guid with distribution-mode move, target a coordinator; no put-token
    before it (``AmqpConnectionScope.CreateControllerAsync``). Declare answered ``declared`` with the
    id; a send in it carries ``transactional-state`` and is answered inside one (``AmqpSender``
    with a transaction id); discharge answered ``accepted``."""
    with _authorized(emulator, QUEUE) as wire:
        channel = wire.begin()
        name = uuid.uuid4().hex
        controller = wire.attach(channel, 0, Attach(
            name, UInt(0), False, None, None, Source(name, distribution_mode=Symbol("move")), Coordinator(None),
            initial_delivery_count=UInt(0)))
        assert isinstance(controller.attach.target, Coordinator), controller.attach
        declared = wire.send_message(controller, encode_message(value=Declare(None)))
        assert isinstance(declared.state, Declared)
        txn_id = declared.state.txn_id
        sender = wire.sender(QUEUE)
        answer = wire.send_message(sender, _message(b"in a transaction"), state=TransactionalState(txn_id, None))
        assert isinstance(answer.state, TransactionalState) and isinstance(answer.state.outcome, Accepted)
        discharged = wire.send_message(controller, encode_message(value=Discharge(txn_id, False)))
        assert isinstance(discharged.state, Accepted)
        receiver = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(receiver, 1)
        assert wire.receive(receiver).message.body_value() == b"in a transaction"


# ---------------------------------------------------------------------------------------------- WebSockets
@pytest.fixture
def ws_emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, websocket_port=0) as emu:
        yield emu


class _WebSocketStream:
    """The AMQP byte stream in masked binary WebSocket messages, as ``ClientWebSocket`` sends it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbox = b""

    def sendall(self, data: bytes) -> None:
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x82]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self, _size: int) -> bytes:
        while True:
            head = self._exact(2)
            n = head[1] & 0x7F
            if n == 126:
                n = int.from_bytes(self._exact(2), "big")
            elif n == 127:
                n = int.from_bytes(self._exact(8), "big")
            payload = self._exact(n)
            if head[0] & 0x0F in (0x0, 0x2):
                return payload

    def _exact(self, n: int) -> bytes:
        while len(self.inbox) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the WebSocket closed")
            self.inbox += chunk
        data, self.inbox = self.inbox[:n], self.inbox[n:]
        return data

    def settimeout(self, value: float) -> None:
        self.sock.settimeout(value)

    def close(self) -> None:
        self.sock.close()


def test_websocket_upgrade_as_dotnet_opens_it_then_amqp(ws_emu: Emulator) -> None:
    """``AmqpConnectionScope.CreateTransportSettingsForWebSockets``: path ``/$servicebus/websocket/``
    (trailing slash), and azure-amqp ``WebSocketTransportSettings``: subprotocol ``amqp`` (not
    AMQPWSB10); ``ClientWebSocket`` fails an upgrade answered with a subprotocol it did not ask for.
    Then the whole .NET exchange (MSSBCBS, open, put-token, send) runs over it."""
    assert ws_emu.websocket is not None
    sock = socket.create_connection(("127.0.0.1", ws_emu.websocket.port), timeout=15)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /$servicebus/websocket/ HTTP/1.1\r\nHost: 127.0.0.1:{ws_emu.websocket.port}\r\n"
                  f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: amqp\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"sec-websocket-protocol: amqp\r\n" in head.lower()
    raw = RawClient.__new__(RawClient)
    raw.sock = _WebSocketStream(sock)  # type: ignore[assignment]
    raw.buf = b""
    with DotNetWire(ws_emu.port, raw=raw) as wire:
        wire.connect()
        reply = wire.put_token(wire.entity_uri(QUEUE), ws_emu.key_name, ws_emu.key)
        assert reply.application_properties["status-code"] == 202
        sender = wire.sender(QUEUE)
        assert isinstance(wire.send_message(sender, _message(b"over a websocket")).state, Accepted)


def test_websocket_upgrade_still_answers_amqpwsb10_when_asked(ws_emu: Emulator) -> None:
    """The other SDKs ask for AMQPWSB10 (the OASIS binding's name) and get it back."""
    assert ws_emu.websocket is not None
    with socket.create_connection(("127.0.0.1", ws_emu.websocket.port), timeout=15) as sock:
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET /$servicebus/websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Protocol: AMQPWSB10, amqp\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert b"sec-websocket-protocol: amqpwsb10\r\n" in head.lower(), head

