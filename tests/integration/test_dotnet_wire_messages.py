"""What the .NET stack expects of the messages themselves and of settlement as the Functions host
makes it, frame by frame (see test_dotnet_wire.py for the approach).

Sources: azure-sdk-for-net ``sdk/servicebus/Azure.Messaging.ServiceBus/src/Amqp/AmqpMessageConverter.cs``
(``TryGetAmqpObjectFromNetObject``: the AMQP type each .NET application-property type is sent as,
described types for Uri, DateTimeOffset and TimeSpan), ``AmqpReceiver.cs`` (outcomes with properties
to modify), ``AmqpConnectionScope.cs`` (64 KiB max-frame-size, audiences), and the Functions extension
(``sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus``): the host settles through
``ServiceBusMessageActions`` / ``ServiceBusReceiveActions``, whose calls (and those an isolated
worker makes through the host's settlement service) end in ``ServiceBusReceiver.CompleteMessageAsync``,
``AbandonMessageAsync(properties)``, ``DeadLetterMessageAsync``, ``DeferMessageAsync``: the outcomes
below.
"""

from __future__ import annotations

import time
import uuid

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import Accepted, Attach, Detach, Header, Modified, Properties, Source
from sbemulator.amqp.transactions import Coordinator, Declare, Declared, Discharge, TransactionalState
from sbemulator.amqp.types import (
    Byte,
    Char,
    Decimal128,
    Described,
    Float,
    Int,
    Long,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
)
from tests.fixtures.dotnet_wire import MAX_FRAME_SIZE, SESSION_FILTER, DotNetWire, connect

QUEUE = "orders"
TICKS = 638_000_000_000_000_000  # a DateTimeOffset's UtcTicks / a TimeSpan's Ticks: longs


def _authorized(emu: Emulator, *entities: str) -> DotNetWire:
    wire = connect(emu.port)
    for entity in entities:
        reply = wire.put_token(wire.entity_uri(entity), emu.key_name, emu.key, resource=f"amqps://{wire.host}/")
        assert reply.application_properties["status-code"] == 202, reply.application_properties
    return wire


def test_every_application_property_type_dotnet_sends_comes_back_as_it_went(emulator: Emulator) -> None:
    """``AmqpMessageConverter.TryGetAmqpObjectFromNetObject``: byte, sbyte, short, ushort, int, uint,
    long, ulong, float, double, bool, decimal, char, Guid, DateTime, string, byte[] go as the AMQP types
    of the same name; Uri, DateTimeOffset and TimeSpan as described values (com.microsoft:uri with the
    string, com.microsoft:datetime-offset and com.microsoft:timespan with ticks).
    ``TryGetNetObjectFromAmqpObject`` reads them back the same way, and throws on a type it does not
    know: the broker must hand each back with its type unchanged."""
    sent = {
        "ubyte": UByte(200), "byte": Byte(-5), "short": Short(-300), "ushort": UShort(60000), "int": Int(-7),
        "uint": UInt(4_000_000_000), "long": Long(2**40), "ulong": ULong(2**63), "float": Float(1.5),
        "double": 2.25, "bool": True, "decimal": Decimal128(bytes(16)), "char": Char("x"),
        "guid": uuid.UUID("3f2504e0-4f89-11d3-9a0c-0305e82c3301"), "datetime": Timestamp(1_700_000_000_000),
        "string": "text", "binary": b"\x00\x01",
        "uri": Described(Symbol("com.microsoft:uri"), "https://example.org/a"),
        "dto": Described(Symbol("com.microsoft:datetime-offset"), Long(TICKS)),
        "timespan": Described(Symbol("com.microsoft:timespan"), Long(600_000_000)),
    }
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        payload = encode_message(header=Header(durable=True), properties=Properties(message_id="typed"),
                                 application_properties=sent, data=b"x")
        assert isinstance(wire.send_message(sender, payload).state, Accepted)
        receiver = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(receiver, 1)
        got = wire.receive(receiver).message.application_properties
    for name, value in sent.items():
        assert type(got[name]) is type(value), (name, type(got[name]))
        if isinstance(value, Described):
            assert got[name].descriptor == value.descriptor and got[name].value == value.value
        else:
            assert got[name] == value, name


def test_a_message_larger_than_a_frame_goes_and_comes_back_in_64k_frames(emulator: Emulator) -> None:
    """``AmqpConnectionScope.CreateAmqpConnectionSettings``: max-frame-size 64 KiB
    (``AmqpConstants.DefaultMaxFrameSize``). A 200 KB message is sent in several transfers (``more``)
    and the server's delivery of it must keep every frame within the 64 KiB the client announced
    (AMQP 1.0 part 2, 2.7.1: a larger frame is a framing error and the client closes)."""
    body = bytes(range(256)) * 800  # 204,800 bytes
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        payload = encode_message(properties=Properties(message_id="big"), data=body)
        assert isinstance(wire.send_message(sender, payload).state, Accepted)
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 1)
        delivery = wire.receive(receiver)
        assert delivery.message.body_value() == body
        assert 0 < wire.largest_frame <= MAX_FRAME_SIZE


def test_ttl_and_scheduled_enqueue_time_as_dotnet_sets_them(emulator: Emulator) -> None:
    """``AmqpMessageConverter.SBMessageToAmqpMessage``: TimeToLive goes in the header's ttl (ms) with
    absolute-expiry-time and creation-time; ScheduledEnqueueTime in the x-opt-scheduled-enqueue-time
    annotation (a DateTime: a timestamp). A message scheduled an hour ahead is not delivered now, and
    the received message's annotation comes back as a timestamp."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        now_ms = int(time.time() * 1000)
        later = encode_message(properties=Properties(message_id="later"), data=b"later", message_annotations={
            Symbol("x-opt-scheduled-enqueue-time"): Timestamp(now_ms + 3_600_000)})
        assert isinstance(wire.send_message(sender, later).state, Accepted)
        ttl = encode_message(header=Header(ttl=UInt(60_000)), properties=Properties(
            message_id="ttl", creation_time=Timestamp(now_ms), absolute_expiry_time=Timestamp(now_ms + 60_000)),
            data=b"soon")
        assert isinstance(wire.send_message(sender, ttl).state, Accepted)
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 2)
        delivery = wire.receive(receiver)
        assert delivery.message.body_value() == b"soon"
        assert delivery.message.header.ttl == 60_000
        assert isinstance(delivery.message.message_annotations[Symbol("x-opt-enqueued-time")], Timestamp)


def test_abandon_with_properties_to_modify_as_the_functions_host_sends_it(emulator: Emulator) -> None:
    """``AmqpReceiver.GetModifiedOutcome``: ``modified`` with the properties to modify in its
    message-annotations (delivery-failed not set); the message comes back with them as application
    properties and its delivery count up by one. The Functions host's ``ServiceBusMessageActions.
    AbandonMessageAsync(message, propertiesToModify)`` (and an isolated worker's settlement request
    through the host) ends here."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        assert isinstance(wire.send_message(sender, encode_message(
            properties=Properties(message_id="retry"), data=b"retry")).state, Accepted)
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 1)
        first = wire.receive(receiver)
        wire.settle(first, Modified(None, None, {Symbol("attempt"): Int(1), Symbol("reason"): "busy"}),
                    settled=False)
        echo = wire.disposition_for(receiver.channel, first.delivery_id)
        assert isinstance(echo.state, Modified) and echo.settled
        wire.flow(receiver, 1)
        again = wire.receive(receiver)
        assert again.message.application_properties == {"attempt": 1, "reason": "busy"}
        assert again.message.header.delivery_count == 1


def test_complete_inside_a_transaction_applies_at_discharge(emulator: Emulator) -> None:
    """``AmqpReceiver.DisposeMessagesAsync`` with an ambient transaction: the disposition's state is a
    ``transactional-state`` carrying the outcome (azure-amqp ``ReceivingAmqpLink.DisposeAsyncResult``)
    and the echo is one too; the message goes only when the ``Controller`` discharges."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        assert isinstance(wire.send_message(sender, encode_message(
            properties=Properties(message_id="tx"), data=b"tx")).state, Accepted)
        channel = wire.begin()
        name = uuid.uuid4().hex
        controller = wire.attach(channel, 0, Attach(
            name, UInt(0), False, None, None, Source(name, distribution_mode=Symbol("move")), Coordinator(None),
            initial_delivery_count=UInt(0)))
        declared = wire.send_message(controller, encode_message(value=Declare(None))).state
        assert isinstance(declared, Declared)
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 1)
        delivery = wire.receive(receiver)
        wire.settle(delivery, TransactionalState(declared.txn_id, Accepted()), settled=False)
        echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
        assert isinstance(echo.state, TransactionalState) and isinstance(echo.state.outcome, Accepted)
        mgmt = wire.management(QUEUE)
        seq = delivery.message.message_annotations[Symbol("x-opt-sequence-number")]
        before = wire.manage(mgmt, "com.microsoft:peek-message", {"from-sequence-number": Long(seq),
                                                                    "message-count": Int(1)})
        assert before.application_properties["statusCode"] == 200  # still there before the discharge
        assert isinstance(wire.send_message(controller, encode_message(
            value=Discharge(declared.txn_id, False))).state, Accepted)
        after = wire.manage(mgmt, "com.microsoft:peek-message", {"from-sequence-number": Long(seq),
                                                                   "message-count": Int(1)})
        assert after.application_properties["statusCode"] == 204


def test_put_token_audiences_the_sdk_uses_for_management_and_subscriptions(emulator: Emulator) -> None:
    """``AmqpConnectionScope``: a management link's audience is ``<endpoint>/<entity>/$management``, a
    subscription receiver's ``<endpoint>/<topic>/Subscriptions/<name>``; a put-token for an entity
    that does not exist is answered 404 (``AmqpCbsLink.ConvertToException``: NotFound, the SDK's
    MessagingEntityNotFound)."""
    with connect(emulator.port) as wire:
        for entity, status in ((f"{QUEUE}/$management", 202), ("events/Subscriptions/all", 202),
                               ("events/Subscriptions/all/$management", 202), ("no-such-queue", 404)):
            reply = wire.put_token(wire.entity_uri(entity), emulator.key_name, emulator.key,
                                   resource=f"amqps://{wire.host}/")
            code = reply.application_properties["status-code"]
            assert type(code) is Int and code == status, (entity, code)


def test_concurrent_receive_calls_on_one_prefetch_0_link_as_the_trigger_makes_them(emulator: Emulator) -> None:
    """The Functions trigger's ``ServiceBusProcessor`` (prefetch 0 by default, ``maxConcurrentCalls``
    receive calls on one link): each call waiting adds its count to the credit the link asks for
    (azure-amqp ``ReceivingAmqpLink.BeginReceiveRemoteMessages`` / ``GetOnDemandReceiveCredit`` ->
    ``IssueCredit``: a flow whose link-credit is the total now wanted). Messages locked by earlier
    calls stay locked while later ones are delivered, and each is completed on its own."""
    with _authorized(emulator, QUEUE) as wire:
        sender = wire.sender(QUEUE)
        for i in range(3):
            assert isinstance(wire.send_message(sender, encode_message(
                properties=Properties(message_id=f"c{i}"), data=f"c{i}".encode())).state, Accepted)
        receiver = wire.receiver(QUEUE)
        wire.flow(receiver, 1)  # the first call
        first = wire.receive(receiver)
        wire.flow(receiver, 2)  # two more calls wait while the first message is processed
        rest = [wire.receive(receiver), wire.receive(receiver)]
        deliveries = [first, *rest]
        assert [d.message.body_value() for d in deliveries] == [b"c0", b"c1", b"c2"]
        assert len({d.lock_token for d in deliveries}) == 3
        for delivery in reversed(deliveries):
            wire.settle(delivery, Accepted(), settled=False)
            echo = wire.disposition_for(receiver.channel, delivery.delivery_id)
            assert isinstance(echo.state, Accepted) and echo.settled


def test_session_trigger_accepts_each_session_once(emulator: Emulator) -> None:
    """The Functions session trigger's ``ServiceBusSessionProcessor`` (``maxConcurrentSessions``
    next-available session links, ``AmqpConnectionScope.CreateReceivingLinkAsync`` with a null session
    filter and com.microsoft:timeout): each link gets a different session; one more waits out its
    timeout and is detached with com.microsoft:timeout, which the processor treats as "no session now"
    and retries."""
    with _authorized(emulator, "sessions") as wire:
        sender = wire.sender("sessions")
        for session_id in ("s-a", "s-b"):
            assert isinstance(wire.send_message(sender, encode_message(
                properties=Properties(message_id=session_id, group_id=session_id), data=b"x")).state, Accepted)
        links = [wire.receiver("sessions", session=True, timeout_ms=5000) for _ in range(2)]
        assert sorted(link.attach.source.filter[SESSION_FILTER] for link in links) == ["s-a", "s-b"]
        extra = wire.receiver("sessions", session=True, timeout_ms=500)
        detach = wire.wait_body(Detach, channel=extra.channel)
        assert str(detach.error.condition) == "com.microsoft:timeout"
