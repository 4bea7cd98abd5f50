"""The AMQP-level limits of the Service Bus quotas page, enforced where Service Bus enforces them.

https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas: "Message size for a queue,
topic, or subscription entity: 256 KB for Standard tier ... Incoming messages that exceed these quotas
are rejected"; "Number of concurrent connections on a namespace: AMQP: 5,000. Subsequent requests for
additional connections are rejected". A message too large is refused while it streams (once what
arrived passes the link's max-message-size), with the condition Service Bus uses,
``amqp:link:message-size-exceeded``; before a token is put a connection can send nothing but a
bounded put-token on ``$cbs``, and it has a deadline to do so; links per connection are bounded.

Raw-socket clients (tests/integration/test_protocol_strictness.py) show what goes over the wire; SDK
clients show the exception a user gets.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError, ServiceBusQuotaExceededError

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Attach,
    Begin,
    Close,
    Detach,
    Disposition,
    Flow,
    Properties,
    Rejected,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.transactions import Coordinator
from sbemulator.amqp.types import UInt
from sbemulator.gateway.limits import COORDINATOR_MAX_MESSAGE_BYTES, Limits
from tests.fixtures.emulator import STANDARD_TOPOLOGY

from .test_malformed_input import RawClient, close_condition
from .test_protocol_strictness import _frames_until, _plain

QUEUE = "orders"
STANDARD_MAX_MESSAGE_SIZE = 256 * 1024  # the quotas page's Standard-tier message size


@pytest.fixture(scope="module")
def shared_emulator() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None) as emu:
        yield emu


def _attach_sender(raw: RawClient, address: str, handle: int = 0) -> tuple[Attach, list]:
    """Attach a link sending to ``address``; the server's attach and the frames up to its flow or detach."""
    raw.frame(Attach(f"limits-sender-{handle}", UInt(handle), ROLE_SENDER, None, None, Source("raw"),
                     Target(address), initial_delivery_count=UInt(0)))
    reply = raw.read_frame().body
    assert isinstance(reply, Attach) and reply.role is ROLE_RECEIVER
    return reply, _frames_until(raw, (Flow, Detach))


def _begin(raw: RawClient) -> None:
    raw.frame(Begin(None, UInt(0), UInt(5000), UInt(5000)))
    assert isinstance(raw.read_frame().body, Begin)


def _queue_message_ids(emu: Emulator) -> list[str]:
    """Receive-and-delete what the queue holds (the tests of this module leave it empty)."""
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            return [str(m.message_id) for m in receiver.receive_messages(max_message_count=10, max_wait_time=2)]


# ------------------------------------------------------------------ message size
def test_a_message_above_the_entity_size_is_refused_while_it_streams(shared_emulator: Emulator) -> None:
    """The link's max-message-size is the entity's (256 KB); the delivery is refused as soon as clearly
    more than that (a sixteenth more, see the next test) has arrived, although its last frame
    (more=false) was never sent."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("PLAIN", _plain(shared_emulator))
        _begin(raw)
        attach, frames = _attach_sender(raw, QUEUE)
        assert attach.max_message_size == STANDARD_MAX_MESSAGE_SIZE
        assert isinstance(frames[-1], Flow)
        message = encode_message(properties=Properties(message_id="too-big"), data=b"x" * 400_000)
        chunk = 100_000
        for i in range(3):  # 300,000 bytes: past 262,144, and the delivery is not complete
            first = i == 0
            raw.frame(Transfer(UInt(0), UInt(0) if first else None, b"big" if first else None, UInt(0) if first
                               else None, False if first else None, True), payload=message[i * chunk:(i + 1) * chunk])
        refusal = _frames_until(raw, Disposition)[-1]
        assert refusal.settled and refusal.first == 0 and isinstance(refusal.state, Rejected)
        assert str(refusal.state.error.condition) == "amqp:link:message-size-exceeded"
        assert f"exceeds the limit ({STANDARD_MAX_MESSAGE_SIZE} bytes)" in str(refusal.state.error.description)
        # The rest of that delivery is dropped as it arrives; the link takes the next message.
        raw.frame(Transfer(UInt(0), more=False), payload=message[3 * chunk:])
        raw.frame(Transfer(UInt(0), UInt(1), b"small", UInt(0), False),
                  payload=encode_message(properties=Properties(message_id="small"), data=b"x"))
        accepted = _frames_until(raw, Disposition)[-1]
        assert accepted.first == 1 and isinstance(accepted.state, Accepted)
    assert _queue_message_ids(shared_emulator) == ["small"]


def test_a_batch_the_sdk_filled_to_its_limit_is_accepted(shared_emulator: Emulator) -> None:
    """azure-servicebus fills a ServiceBusMessageBatch up to the link's max-message-size by its own count;
    the transfer it then sends is a few bytes larger, and Service Bus takes it: so does the emulator."""
    with ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            batch = sender.create_message_batch()
            count = 0
            while True:
                try:
                    batch.add_message(ServiceBusMessage(b"f" * 200, message_id=f"full-{count}"))
                except MessageSizeExceededError:
                    break
                count += 1
            assert batch.size_in_bytes > STANDARD_MAX_MESSAGE_SIZE - 1024
            sender.send_messages(batch)
        with client.get_queue_receiver(QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                       prefetch_count=500) as receiver:
            received = 0
            deadline = time.monotonic() + 30
            while received < count and time.monotonic() < deadline:
                received += len(receiver.receive_messages(max_message_count=500, max_wait_time=2))
    assert received == count


def test_the_sdk_gets_message_size_exceeded_when_the_emulator_refuses_a_large_message(
    shared_emulator: Emulator,
) -> None:
    """The SDK checks the size itself against the link's max-message-size; told a larger one, it sends,
    and the emulator's refusal reaches the caller as MessageSizeExceededError."""
    with ServiceBusClient.from_connection_string(shared_emulator.connection_string) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender._max_message_size_on_link = 4 * STANDARD_MAX_MESSAGE_SIZE  # skip the SDK's own check
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(b"z" * (STANDARD_MAX_MESSAGE_SIZE + 1024)))
    assert _queue_message_ids(shared_emulator) == []


def test_a_management_request_is_bounded_by_the_entity_message_size(shared_emulator: Emulator) -> None:
    """The $management request link announces the entity's message size (the Java SDK encodes a
    schedule-message's messages into a buffer of that size), and a request above it is refused while
    it streams, as a send is: scheduling messages that together pass 256 KB is MessageSizeExceededError,
    and nothing is scheduled."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("PLAIN", _plain(shared_emulator))
        _begin(raw)
        attach, frames = _attach_sender(raw, f"{QUEUE}/$management")
        assert attach.max_message_size == STANDARD_MAX_MESSAGE_SIZE
        assert isinstance(frames[-1], Flow)
        raw.frame(Transfer(UInt(0), UInt(0), b"mgmt", UInt(0), False, True), payload=b"m" * 200_000)
        raw.frame(Transfer(UInt(0), more=True), payload=b"m" * 100_000)
        refusal = _frames_until(raw, Disposition)[-1]
        assert refusal.settled and isinstance(refusal.state, Rejected)
        assert str(refusal.state.error.condition) == "amqp:link:message-size-exceeded"
    later = datetime.now(UTC) + timedelta(hours=1)
    with ServiceBusClient.from_connection_string(shared_emulator.connection_string, retry_total=0) as client:
        with client.get_queue_sender(QUEUE) as sender:
            with pytest.raises(MessageSizeExceededError):
                sender.schedule_messages([ServiceBusMessage(b"s" * 20_000) for _ in range(20)], later)
        # (a new sender: the SDK's management link keeps raising its first error)
        with client.get_queue_sender(QUEUE) as sender:
            assert len(sender.schedule_messages([ServiceBusMessage(b"s" * 20_000) for _ in range(5)], later)) == 5
        with client.get_queue_receiver(QUEUE) as receiver:
            scheduled = receiver.peek_messages(max_message_count=50)
            assert len(scheduled) == 5
        with client.get_queue_sender(QUEUE) as sender:
            sender.cancel_scheduled_messages([m.sequence_number for m in scheduled if m.sequence_number])


# ------------------------------------------------------------------ before authentication
def test_a_put_token_request_larger_than_the_cbs_bound_is_refused_while_it_streams(
    shared_emulator: Emulator,
) -> None:
    """Unauthenticated, a client may only send put-token requests, each at most 64 KiB."""
    bound = Limits().max_cbs_message_bytes
    with RawClient(shared_emulator.port) as raw:
        raw.open("ANONYMOUS")
        _begin(raw)
        attach, frames = _attach_sender(raw, "$cbs")
        assert attach.max_message_size == bound
        assert isinstance(frames[-1], Flow)
        raw.frame(Transfer(UInt(0), UInt(0), b"tok", UInt(0), False, True), payload=b"t" * (bound // 2))
        raw.frame(Transfer(UInt(0), more=True), payload=b"t" * (bound // 2 + bound // 8))
        refusal = _frames_until(raw, Disposition)[-1]
        assert str(refusal.state.error.condition) == "amqp:link:message-size-exceeded"


@pytest.mark.parametrize("address", [QUEUE, f"{QUEUE}/$management", "events/Subscriptions/all/$management",
                                     f"{QUEUE}/$DeadLetterQueue"])
def test_an_entity_link_gets_no_credit_before_a_token(shared_emulator: Emulator, address: str) -> None:
    """Without a token the attach is refused (a null target, then a detach): no flow grants credit; the
    same for a $management link ("AMQP 1.0 in Azure Service Bus": the token must be put on $cbs first)."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("ANONYMOUS")
        _begin(raw)
        attach, frames = _attach_sender(raw, address)
        assert attach.target is None
        assert not any(isinstance(frame, Flow) for frame in frames)
        assert str(frames[-1].error.condition) == "amqp:unauthorized-access"


def test_the_transaction_coordinator_takes_no_large_delivery_before_a_token(shared_emulator: Emulator) -> None:
    """A coordinator link (AMQP 1.0 4.2) needs no token to attach, so its deliveries are bounded small (a
    declare is a few dozen bytes): an unauthenticated client streaming megabytes into it is refused at
    once instead of being buffered (before, 64 MiB per link)."""
    with RawClient(shared_emulator.port) as raw:
        raw.open("ANONYMOUS")
        _begin(raw)
        raw.frame(Attach("coordinator", UInt(0), ROLE_SENDER, None, None, Source("raw"), Coordinator(),
                         initial_delivery_count=UInt(0)))
        attach = raw.read_frame().body
        assert isinstance(attach, Attach) and attach.max_message_size == COORDINATOR_MAX_MESSAGE_BYTES
        assert isinstance(_frames_until(raw, (Flow, Detach))[-1], Flow)
        raw.frame(Transfer(UInt(0), UInt(0), b"big", UInt(0), False, True), payload=b"d" * 60_000)
        refusal = _frames_until(raw, Disposition)[-1]
        assert isinstance(refusal.state, Rejected)
        assert str(refusal.state.error.condition) == "amqp:link:message-size-exceeded"


def test_a_connection_that_never_authenticates_is_closed_at_the_deadline() -> None:
    limits = Limits(auth_timeout_s=0.5)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        with RawClient(emu.port, timeout=10.0) as raw:
            raw.open("ANONYMOUS")
            _begin(raw)
            frames = raw.frames_until_eof()
            assert close_condition(frames) == "amqp:unauthorized-access"
        # A client that puts its token in time keeps its connection past the deadline.
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages(ServiceBusMessage("before"))
                time.sleep(1.0)  # past the deadline: the connection must still be there
                sender.send_messages(ServiceBusMessage("after"))
            with client.get_queue_receiver(QUEUE, max_wait_time=5) as receiver:
                bodies: list[str] = []
                deadline = time.monotonic() + 20
                while len(bodies) < 2 and time.monotonic() < deadline:
                    for message in receiver.receive_messages(max_message_count=2, max_wait_time=2):
                        bodies.append(str(message))
                        receiver.complete_message(message)
        assert sorted(bodies) == ["after", "before"]


# ------------------------------------------------------------------ links and connections
def test_links_beyond_the_per_connection_bound_are_refused_with_resource_limit_exceeded() -> None:
    limits = Limits(max_links_per_connection=3)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        with RawClient(emu.port) as raw:
            raw.open("PLAIN", _plain(emu))
            _begin(raw)
            for handle in range(3):
                _, frames = _attach_sender(raw, QUEUE, handle)
                assert isinstance(frames[-1], Flow)
            attach, frames = _attach_sender(raw, QUEUE, 3)
            assert attach.target is None
            assert str(frames[-1].error.condition) == "amqp:resource-limit-exceeded"
            # Detaching one makes room again.
            raw.frame(Detach(UInt(0), True))
            _frames_until(raw, Detach)
            raw.frame(Detach(UInt(3), True))
            _, frames = _attach_sender(raw, QUEUE, 4)
            assert isinstance(frames[-1], Flow)


def test_connections_beyond_the_namespace_bound_are_refused_with_resource_limit_exceeded() -> None:
    limits = Limits(max_connections=2)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        with RawClient(emu.port) as first, RawClient(emu.port) as second:
            first.open("PLAIN", _plain(emu))
            second.open("PLAIN", _plain(emu))
            with RawClient(emu.port) as third:
                third.open("PLAIN", _plain(emu))
                assert close_condition(third.frames_until_eof()) == "amqp:resource-limit-exceeded"
            # The SDK sees the refusal as an error (not a hang), and the others keep working.
            with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
                with pytest.raises(ServiceBusError):
                    with client.get_queue_sender(QUEUE) as sender:
                        sender.send_messages(ServiceBusMessage("refused"))
            first.frame(Close())
            assert close_condition(first.frames_until_eof()) is None
        # Both gone: a new connection is accepted.
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender(QUEUE) as sender:
                sender.send_messages(ServiceBusMessage("accepted"))


# ------------------------------------------------------------------ receive requests per entity
def test_receivers_beyond_the_per_entity_bound_are_refused_with_quota_exceeded() -> None:
    """Service Bus quotas page: "Number of concurrent receive requests on a queue, topic, or subscription
    entity: 5,000. Subsequent receive requests are rejected ... This quota applies to the combined number
    of concurrent receive operations across all subscriptions on a topic." (bound lowered to 2 here)"""
    limits = Limits(max_receivers_per_entity=2)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
            first = client.get_queue_receiver(QUEUE, max_wait_time=1)
            second = client.get_queue_receiver(QUEUE, max_wait_time=1)
            with first, second:
                first.receive_messages(max_wait_time=0.2)
                second.receive_messages(max_wait_time=0.2)
                with pytest.raises(ServiceBusQuotaExceededError) as refused:
                    with client.get_queue_receiver(QUEUE) as third:
                        third.receive_messages(max_wait_time=0.2)
                assert "concurrent receive requests" in str(refused.value)
                # Another entity has its own count.
                with client.get_queue_receiver("retry3") as other:
                    other.receive_messages(max_wait_time=0.2)
            # Closing receivers makes room again.
            with client.get_queue_receiver(QUEUE) as again:
                again.receive_messages(max_wait_time=0.2)
            # A topic's subscriptions count together.
            with client.get_subscription_receiver("events", "all") as a, \
                    client.get_subscription_receiver("events", "high") as b:
                a.receive_messages(max_wait_time=0.2)
                b.receive_messages(max_wait_time=0.2)
                with pytest.raises(ServiceBusQuotaExceededError):
                    with client.get_subscription_receiver("events", "all") as c:
                        c.receive_messages(max_wait_time=0.2)


# ------------------------------------------------------------------ sessions per connection
def test_a_begin_above_the_announced_channel_max_closes_the_connection() -> None:
    """The emulator's open announces channel-max (sessions per connection, --channel-max); AMQP 1.0 2.7.1:
    a channel above it is a framing error. Service Bus itself uses one session per connection (AMQP
    protocol guide), so the bound only stops a client from holding thousands of sessions."""
    limits = Limits(channel_max=2)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=True, admin_port=None, limits=limits) as emu:
        with RawClient(emu.port) as raw:
            opened = raw.open("PLAIN", _plain(emu))
            assert opened.channel_max == 2
            for channel in (0, 2):
                raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)), channel=channel)
                assert isinstance(raw.read_frame().body, Begin)
            raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)), channel=3)
            assert close_condition(raw.frames_until_eof()) == "amqp:connection:framing-error"
