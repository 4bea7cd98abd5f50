"""What the .NET stack expects of a Service Bus endpoint, frame by frame: connection, CBS, senders,
receivers, settlement and ``$management``.

The Azure Functions host reads every Service Bus trigger and settles every message through
Azure.Messaging.ServiceBus on Microsoft.Azure.Amqp, whatever language the functions are written in.
Neither runs on these machines, so each test sends what that stack sends (``tests/fixtures/dotnet_wire``)
and checks what it reads back, including the types it casts without checking (an ``(int)`` of a
boxed long throws InvalidCastException in .NET). Each docstring names the source it follows:
azure-amqp (Microsoft.Azure.Amqp 2.x, ``Microsoft.Azure.Amqp/Amqp/...``) or azure-sdk-for-net
(``sdk/servicebus/Azure.Messaging.ServiceBus/src/...``).
"""

from __future__ import annotations

import ssl
import time
import uuid

import pytest

from sbemulator import Emulator
from sbemulator.amqp import codec
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import (
    Accepted,
    Attach,
    Detach,
    Disposition,
    Error,
    Flow,
    Header,
    Modified,
    Properties,
    Rejected,
    Released,
)
from sbemulator.amqp.types import Described, Int, Long, Symbol, Timestamp, UInt, ULong
from tests.fixtures.dotnet_wire import BATCH_FORMAT, Delivery, DotNetWire, Link, connect
from tests.integration.test_malformed_input import RawClient

QUEUE = "orders"


def _authorized(emu: Emulator, *entities: str) -> DotNetWire:
    """A connection with a token put for each entity the way AmqpConnectionScope does: the token signed
    for the namespace endpoint, the put-token named for the entity's URI."""
    wire = connect(emu.port)
    for entity in entities:
        reply = wire.put_token(wire.entity_uri(entity), emu.key_name, emu.key, resource=f"amqps://{wire.host}/")
        assert reply.application_properties["status-code"] == 202, reply.application_properties
    return wire


def _message(body: bytes, message_id: str | None = None, **props: object) -> bytes:
    return encode_message(header=Header(durable=True),
                          properties=Properties(message_id=message_id or str(uuid.uuid4()), **props), data=body)


def _send(wire: DotNetWire, sender: Link, *bodies: bytes) -> None:
    for body in bodies:
        state = wire.send_message(sender, _message(body))
        assert isinstance(state.state, Accepted), state


# ---------------------------------------------------------------------------------------------- connection
def test_open_answers_what_amqp_connection_accepts(emulator: Emulator) -> None:
    """azure-amqp ``AmqpConnection.OnReceiveOpen``: a peer idle-time-out under 5 s
    (``AmqpConstants.MinimumHeartBeatIntervalMs``) fails the open, and an open carrying the property
    ``com.microsoft:open-error`` is an error; the SASL exchange offers MSSBCBS
    (``AmqpConnectionScope.CbsSaslHandlerName``)."""
    with DotNetWire(emulator.port) as wire:
        opened = wire.connect()
        assert opened.idle_time_out is None or opened.idle_time_out >= 5000
        assert not (opened.properties or {}).get(Symbol("com.microsoft:open-error"))
        assert opened.max_frame_size >= 512 and opened.container_id


def test_empty_frames_keep_a_short_idle_timeout_alive(emulator: Emulator) -> None:
    """azure-amqp ``AmqpConnection`` ``HeartBeat``: the client closes a connection it heard nothing on
    for its idle-time-out; the server must send (empty) frames within it (AMQP 1.0 part 2, 2.4.5).
    ``AmqpConnectionSettings.IdleTimeOut`` is the SDK's ``ConnectionIdleTimeout`` (60 s by default,
    settable); 6 s here keeps the test short."""
    with DotNetWire(emulator.port) as wire:
        wire.connect(idle_time_out_ms=6000)
        frame = wire.wait(lambda f: f.body is None, timeout=12)
        assert frame.channel == 0


# ---------------------------------------------------------------------------------------------- CBS
@pytest.mark.parametrize("scheme", ["amqps", "amqp", "sb"])
def test_put_token_with_the_dotnet_audience_and_token_type(emulator: Emulator, scheme: str) -> None:
    """azure-amqp ``Cbs/AmqpCbsLink.SendTokenAsyncResult``: application properties operation, type
    (``servicebus.windows.net:sastoken`` for a SAS credential: ``CbsTokenProvider``), name, expiration
    (a DateTime); the reply's ``status-code`` is cast ``(int)`` and ``status-description`` ``(string)``;
    the reply is matched by correlation-id to the request's message id ``request1``
    (``RequestResponseAmqpLink``); the $cbs links are on a session of their own."""
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        sender, receiver = wire.cbs_links()
        assert sender.attach.target is not None and receiver.attach.source is not None
        reply = wire.put_token(wire.entity_uri(QUEUE, scheme), emulator.key_name, emulator.key,
                               resource=f"{scheme}://{wire.host}/")
        props = reply.application_properties
        assert type(props["status-code"]) is Int and props["status-code"] in (200, 202)
        assert isinstance(props["status-description"], str)
        assert reply.properties.correlation_id == "request1"


def test_put_token_refused_is_an_int_401(emulator: Emulator) -> None:
    """``AmqpCbsLink.ConvertToException``: 401 becomes UnauthorizedAccess (the SDK's
    ServiceBusFailureReason.Unauthorized); any other code a generic failure."""
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        reply = wire.put_token(wire.entity_uri(QUEUE), emulator.key_name, "not-the-key")
        assert type(reply.application_properties["status-code"]) is Int
        assert reply.application_properties["status-code"] == 401


def test_token_refreshed_before_expiry_on_the_same_cbs_link_keeps_the_link_working(emulator: Emulator) -> None:
    """``AmqpConnectionScope.CreateAuthorizationRefreshHandler``: before the token expires (10 minutes
    ahead, at least every 2 minutes) the SDK puts a new token for the same audience on the same
    ``$cbs`` link of the connection (``AmqpCbsLink`` is one per connection), and the link it
    authorized keeps working past the first token's expiry."""
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        first = wire.put_token(wire.entity_uri(QUEUE), emulator.key_name, emulator.key, expires_in=2)
        assert first.application_properties["status-code"] == 202
        sender = wire.sender(QUEUE)
        assert sender.attach.target is not None
        refreshed = wire.put_token(wire.entity_uri(QUEUE), emulator.key_name, emulator.key, expires_in=3600)
        assert refreshed.application_properties["status-code"] == 202
        assert refreshed.properties.correlation_id == "request2"
        time.sleep(3)  # past the first token's expiry (whole seconds)
        _send(wire, sender, b"after the refresh")


# ---------------------------------------------------------------------------------------------- senders
def test_sender_attach_carries_max_message_size(emulator: Emulator) -> None:
    """``AmqpSender.CreateLinkAndEnsureSenderStateAsync``: ``MaxMessageSize = (long)link.Settings.
    MaxMessageSize`` throws when the server's attach has no max-message-size (a null ulong?); the
    target (``/orders``, the entity's absolute path) must come back non-null."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        assert sender.attach.target is not None and sender.attach.source is not None
        assert isinstance(sender.attach.max_message_size, int) and sender.attach.max_message_size > 0
        credit = wire.wait_body(Flow, channel=sender.channel)
        assert credit.link_credit > 0


def test_single_and_batch_sends_are_accepted_and_arrive_in_order(emulator: Emulator) -> None:
    """``AmqpSender.SendBatchInternalAsync`` / ``AmqpMessageConverter.BatchSBMessagesAsAmqpMessage``:
    one message goes as itself; several go as one transfer of message-format 0x80013700 whose data
    sections each hold an encoded message. The outcome must be ``accepted``
    (``SendingAmqpLink``: anything else throws)."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        _send(wire, sender, b"single")
        parts = [_message(f"batch-{i}".encode(), f"b{i}") for i in range(3)]
        batch = b"".join(codec.encode(Described(ULong(0x75), part)) for part in parts)  # data sections
        state = wire.send_message(sender, batch, message_format=BATCH_FORMAT)
        assert isinstance(state.state, Accepted) and state.settled
        receiver = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(receiver, 4)
        deliveries = [wire.receive(receiver) for _ in range(4)]
        assert [d.message.body_value() for d in deliveries] == [b"single", b"batch-0", b"batch-1", b"batch-2"]
        assert all(d.settled for d in deliveries)  # receive-and-delete: settle-on-send, pre-settled transfers


# ---------------------------------------------------------------------------------------------- receivers
def test_receiver_attach_and_a_prefetch_0_receive_give_what_the_converter_casts(emulator: Emulator) -> None:
    """``AmqpConnectionScope.CreateReceivingLinkAsync`` (source ``/orders``, target a Guid,
    settle-on-dispose, no credit with prefetch 0) then ``ReceivingAmqpLink.BeginReceiveRemoteMessages``
    (a flow with the credit asked for). ``AmqpMessageConverter.AmqpMessageToAnnotatedMessage`` and
    ``ServiceBusReceivedMessage`` cast: x-opt-sequence-number ``(long)``, x-opt-enqueued-time and
    x-opt-locked-until ``(DateTime)`` (AMQP timestamps), x-opt-message-state ``(int)``; the lock
    token is ``new Guid(deliveryTag)`` (16 bytes); the header's delivery-count + 1 is DeliveryCount."""
    with _authorized(emulator, QUEUE) as wire:
        _send(wire, wire.sender(QUEUE), b"typed")
        receiver = wire.receiver(QUEUE)
        attach = receiver.attach
        assert attach.source is not None and attach.source.address == f"/{QUEUE}" and attach.target is not None
        assert (attach.snd_settle_mode, attach.rcv_settle_mode) == (0, 1)
        wire.flow(receiver, 1)
        delivery = wire.receive(receiver)
        assert not delivery.settled and len(delivery.tag) == 16
        annotations = delivery.message.message_annotations
        assert type(annotations[Symbol("x-opt-sequence-number")]) is Long
        assert type(annotations[Symbol("x-opt-enqueued-time")]) is Timestamp
        assert type(annotations[Symbol("x-opt-locked-until")]) is Timestamp
        state = annotations.get(Symbol("x-opt-message-state"))
        assert state is None or type(state) is Int
        # MessageAnnotations not in the converter's list go through TryGetNetObjectFromAmqpObject with
        # MappingType.ApplicationProperty: a list or map value there throws SerializationException.
        assert not any(isinstance(v, (list, dict)) for v in annotations.values())
        assert delivery.message.header.delivery_count == 0
        wire.settle(delivery, Accepted(), settled=False)
        echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
        assert isinstance(echo.state, Accepted) and echo.settled


def test_a_message_released_by_a_prefetch_0_receiver_comes_back_uncounted(emulator: Emulator) -> None:
    """``ReceivingAmqpLink.OnReceiveMessage``: with no auto-flow (prefetch 0) and peek-lock, a message
    that arrives when no receive call waits is released (``ReleaseMessage``: ``released``, settled).
    Service Bus gives it out again without counting a delivery."""
    with _authorized(emulator, QUEUE) as wire:
        _send(wire, wire.sender(QUEUE), b"late")
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 1)
        first = wire.receive(receiver)
        wire.settle(first, Released(), settled=True)
        wire.flow(receiver, 1)
        again = wire.receive(receiver)
        assert again.message.body_value() == b"late"
        assert again.message.header.delivery_count == 0


def _one_locked(wire: DotNetWire, body: bytes) -> tuple[Link, Delivery]:
    _send(wire, wire.sender(QUEUE), body)
    receiver = wire.receiver(QUEUE)
    wire.flow(receiver, 1)
    return receiver, wire.receive(receiver)


@pytest.mark.parametrize(("outcome", "kind"), [
    (Accepted(), "complete"),
    (Modified(), "abandon"),  # GetAbandonOutcome: Modified without delivery-failed
    (Modified(undeliverable_here=True), "defer"),  # GetDeferOutcome
    (Rejected(), "dead-letter"),  # AmqpConstants.RejectedOutcome: no reason given
])
def test_each_settlement_is_echoed_with_its_outcome(emulator: Emulator, outcome: object, kind: str) -> None:
    """``AmqpReceiver.CompleteInternalAsync`` / ``AbandonInternalAsync`` / ``DeferInternalAsync`` /
    ``DeadLetterInternalAsync`` send these outcomes unsettled and wait (``ReceivingAmqpLink.
    DisposeAsyncResult``) for the server's disposition; a ``rejected`` carrying an error there is a
    failure, so the echo of a dead-letter is ``rejected`` without one."""
    with _authorized(emulator, QUEUE) as wire:
        receiver, delivery = _one_locked(wire, kind.encode())
        wire.settle(delivery, outcome, settled=False)
        echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
        assert type(echo.state) is type(outcome) and echo.settled
        if isinstance(echo.state, Rejected):
            assert echo.state.error is None
        wire.flow(receiver, 1)
        if kind == "abandon":
            again = wire.receive(receiver)
            assert again.message.header.delivery_count == 1  # the SDK shows DeliveryCount 2
        else:
            with pytest.raises(TimeoutError):
                wire.receive(receiver, timeout=1.5)


def test_dead_letter_with_reason_lands_in_the_dead_letter_queue_with_it(emulator: Emulator) -> None:
    """``AmqpReceiver.GetRejectedOutcome``: error condition com.microsoft:dead-letter, info
    DeadLetterReason / DeadLetterErrorDescription and the properties to modify; the dead-lettered
    message carries them as application properties (``ServiceBusReceivedMessage.DeadLetterReason``)."""
    with _authorized(emulator, QUEUE, f"{QUEUE}/$DeadLetterQueue") as wire:
        receiver, delivery = _one_locked(wire, b"poison")
        wire.settle(delivery, Rejected(Error(Symbol("com.microsoft:dead-letter"), None, {
            Symbol("DeadLetterReason"): "bad", Symbol("DeadLetterErrorDescription"): "unparseable",
            Symbol("attempt"): Int(3)})), settled=False)
        echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
        assert isinstance(echo.state, Rejected) and echo.state.error is None
        dlq = wire.receiver(f"{QUEUE}/$DeadLetterQueue", peek_lock=False)
        wire.flow(dlq, 1)
        dead = wire.receive(dlq).message.application_properties
        assert dead["DeadLetterReason"] == "bad" and dead["DeadLetterErrorDescription"] == "unparseable"
        assert dead["attempt"] == 3


def test_detach_of_a_receiver_is_answered(emulator: Emulator) -> None:
    """``AmqpLink.CloseAsync``: the link waits for the server's detach."""
    with _authorized(emulator, QUEUE) as wire:
        receiver = wire.receiver(QUEUE)
        assert isinstance(wire.detach(receiver), Detach)
        assert isinstance(receiver.attach, Attach)


def test_a_batched_range_disposition_settles_each_delivery_in_it(emulator: Emulator) -> None:
    """azure-amqp ``AmqpSession`` (its disposition manager): ``AmqpReceiver`` settles with
    ``batchable: true``, and consecutive deliveries settled with the same accepted (or released)
    outcome go as one disposition over a range (first..last, AMQP 1.0 part 2, 2.7.6). Each delivery in
    the range must be completed and answered; one outside it stays locked."""
    with _authorized(emulator, QUEUE) as wire:
        _send(wire, wire.sender(QUEUE), b"r0", b"r1", b"r2", b"r3")
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 4)
        deliveries = [wire.receive(receiver) for _ in range(4)]
        first, last = deliveries[0].delivery_id, deliveries[2].delivery_id
        wire.send(Disposition(True, UInt(first), UInt(last), False, Accepted(), True), receiver.channel)
        for delivery in deliveries[:3]:
            echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
            assert isinstance(echo.state, Accepted) and echo.settled
        mgmt_peek = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(mgmt_peek, 4)
        with pytest.raises(TimeoutError):  # r3 is still locked by the first receiver; r0-r2 are gone
            wire.receive(mgmt_peek, timeout=1.5)


# ---------------------------------------------------------------------------------------------- TLS
def test_amqps_as_the_tls_transport_opens_it_sends_and_receives(emulator: Emulator) -> None:
    """azure-amqp ``Amqp/Transport/TlsTransportSettings.cs`` and ``TlsTransport``: a TLS handshake (SNI the
    endpoint's host) on the connection, then the SASL header with MSSBCBS and the AMQP header inside it
    (``AmqpConnectionScope.CreateTransportSettingsForTcp``: an ``amqps`` endpoint wraps the TCP settings in
    TLS). The emulator serves TLS on its AMQP port, with its own CA's certificate."""
    assert emulator.ca_path is not None
    raw = RawClient(emulator.port)
    context = ssl.create_default_context(cafile=str(emulator.ca_path))
    raw.sock = context.wrap_socket(raw.sock, server_hostname="localhost")
    with DotNetWire(emulator.port, raw=raw) as wire:
        wire.connect()
        reply = wire.put_token(wire.entity_uri(QUEUE), emulator.key_name, emulator.key, resource=f"amqps://{wire.host}/")
        assert reply.application_properties["status-code"] == 202
        sender = wire.sender(QUEUE)
        _send(wire, sender, b"over tls")
        receiver = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(receiver, 1)
        assert wire.receive(receiver).message.body_value() == b"over tls"
