"""More documented Service Bus behaviours, checked through the real azure-servicebus SDK over a socket.

Each test names the documentation page (learn.microsoft.com/azure/service-bus-messaging/...) it follows.
Entities use TTLs of a few seconds (room for a loaded machine to defer the message first) so that no test
waits longer than the behaviour needs.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageProperties
from azure.servicebus.exceptions import (
    MessageNotFoundError,
    MessageSizeExceededError,
    MessagingEntityDisabledError,
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusError,
)
from azure.servicebus.management import EntityStatus, ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.fixtures.emulator import queue, receive, topology

KB = 1024

CONFIG = topology(
    queues=[
        queue("plain"),
        queue("deferred-ttl-dlq", DefaultMessageTimeToLive="PT3S", DeadLetteringOnMessageExpiration=True),
        queue("deferred-ttl-drop", DefaultMessageTimeToLive="PT3S", DeadLetteringOnMessageExpiration=False),
        # a chain of six queues: five forwarding hops from hop-1 to hop-6
        queue("hop-1", ForwardTo="hop-2"),
        queue("hop-2", ForwardTo="hop-3"),
        queue("hop-3", ForwardTo="hop-4"),
        queue("hop-4", ForwardTo="hop-5"),
        queue("hop-5", ForwardTo="hop-6"),
        queue("hop-6"),
        queue("four-hops-1", ForwardTo="hop-3"),  # four-hops-1 -> hop-3 -> hop-4 -> hop-5 -> hop-6
        queue("session-target", RequiresSession=True),
        queue("forwards-to-sessions", ForwardTo="session-target"),
        queue("forward-target"),
        queue("chain-a", ForwardTo="chain-b"),
        queue("chain-b", ForwardTo="chain-c"),
        queue("chain-c"),
        queue("dedup", RequiresDuplicateDetection=True, DuplicateDetectionHistoryTimeWindow="PT1M"),
        queue("forwards-to-target", ForwardTo="forward-target"),
    ],
    topics=[
        {
            "Name": "session-topic",
            "Properties": {},
            "Subscriptions": [{"Name": "sessions", "Properties": {"RequiresSession": True}}],
        },
        {"Name": "status-topic", "Properties": {}, "Subscriptions": [{"Name": "all", "Properties": {}}]},
    ],
)


@pytest.fixture
def topology_under_test() -> dict:
    return copy.deepcopy(CONFIG)


@pytest.fixture
def once(emu: Emulator) -> Iterator[ServiceBusClient]:
    """A client that does not retry, for the operations expected to fail (the SDK retries some of those
    errors, MessagingEntityDisabledError among them, with backoff: that would only slow the tests down)."""
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as sb:
        yield sb


def _defer_one(client: ServiceBusClient, queue_name: str, body: str) -> ServiceBusReceivedMessage:
    """Send, receive and defer one message (links opened first: the entity's TTL is short)."""
    with client.get_queue_receiver(queue_name) as receiver, client.get_queue_sender(queue_name) as sender:
        sender.send_messages(ServiceBusMessage(body))
        (msg,) = receive(receiver, 1)
        receiver.defer_message(msg)
    return msg


def _sleep_past(moment: dt.datetime) -> None:
    time.sleep(max(0.0, (moment - dt.datetime.now(dt.UTC)).total_seconds()) + 0.3)


def _peek_all(client: ServiceBusClient, queue_name: str, sub_queue: ServiceBusSubQueue | None = None) -> list:
    with client.get_queue_receiver(queue_name, sub_queue=sub_queue) as receiver:
        return receiver.peek_messages(max_message_count=50, sequence_number=1)


# ------------------------------------------------------------------ deferred messages and TTL
def test_an_expired_deferred_message_is_dead_lettered_only_when_received_by_sequence_number(client, once):
    """"Message deferral" (message-deferral): deferred messages aren't expired and moved to the dead-letter
    queue until a client tries to receive them by sequence number; then an expired one is moved to the DLQ
    (dead-lettering on expiration enabled). "Dead-letter queues", Time to live: deferred messages won't be
    purged and moved to the dead-letter queue after they expire."""
    deferred = _defer_one(client, "deferred-ttl-dlq", "late")
    seq = deferred.sequence_number
    _sleep_past(deferred.expires_at_utc)
    assert _peek_all(client, "deferred-ttl-dlq", ServiceBusSubQueue.DEAD_LETTER) == []
    (still,) = _peek_all(client, "deferred-ttl-dlq")
    assert (str(still), still.sequence_number) == ("late", seq)

    with once.get_queue_receiver("deferred-ttl-dlq") as receiver, pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages([seq])

    assert _peek_all(client, "deferred-ttl-dlq") == []
    with client.get_queue_receiver("deferred-ttl-dlq", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        dlq.complete_message(dead)
    assert (str(dead), dead.dead_letter_reason) == ("late", "TTLExpiredException")


def test_an_expired_deferred_message_is_dropped_when_received_without_dead_lettering_on_expiration(client, once):
    """"Message deferral": the expiry check happens at the receive by sequence number; an expired message
    goes to the dead-letter queue only when dead-lettering on expiration is enabled, else it is removed."""
    deferred = _defer_one(client, "deferred-ttl-drop", "late")
    seq = deferred.sequence_number
    _sleep_past(deferred.expires_at_utc)
    assert [m.sequence_number for m in _peek_all(client, "deferred-ttl-drop")] == [seq]
    with once.get_queue_receiver("deferred-ttl-drop") as receiver, pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages([seq])
    assert _peek_all(client, "deferred-ttl-drop") == []
    assert _peek_all(client, "deferred-ttl-drop", ServiceBusSubQueue.DEAD_LETTER) == []


def test_a_received_deferred_message_abandoned_after_expiry_stays_deferred(client):
    """"Message deferral": a deferred message received by sequence number and abandoned goes back to the
    deferred set; being past its TTL does not dead-letter it until the next receive by sequence number."""
    seq = _defer_one(client, "deferred-ttl-dlq", "kept").sequence_number
    with client.get_queue_receiver("deferred-ttl-dlq") as receiver:
        (msg,) = receiver.receive_deferred_messages([seq])
        _sleep_past(msg.expires_at_utc)  # expires while locked
        receiver.abandon_message(msg)
        assert _peek_all(client, "deferred-ttl-dlq", ServiceBusSubQueue.DEAD_LETTER) == []
        (still,) = receiver.peek_messages(max_message_count=5, sequence_number=1)
        assert still.sequence_number == seq


def test_a_message_deferred_after_its_ttl_passed_while_locked_stays_deferred(client, once):
    """"Message deferral": deferred messages aren't expired until a receive by sequence number asks for
    them, also one whose TTL passed while a receiver held it locked and then deferred it."""
    with client.get_queue_receiver("deferred-ttl-dlq") as receiver, \
            client.get_queue_sender("deferred-ttl-dlq") as sender:
        sender.send_messages(ServiceBusMessage("slow"))
        (msg,) = receive(receiver, 1)
        _sleep_past(msg.expires_at_utc)  # expires while locked (the lock lasts longer than the TTL)
        receiver.defer_message(msg)
    assert _peek_all(client, "deferred-ttl-dlq", ServiceBusSubQueue.DEAD_LETTER) == []
    (still,) = _peek_all(client, "deferred-ttl-dlq")
    assert still.sequence_number == msg.sequence_number
    with once.get_queue_receiver("deferred-ttl-dlq") as receiver, pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages([msg.sequence_number])
    with client.get_queue_receiver("deferred-ttl-dlq", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        (dead,) = receive(dlq, 1)
        dlq.complete_message(dead)
    assert (str(dead), dead.dead_letter_reason) == ("slow", "TTLExpiredException")


# ------------------------------------------------------------------ system dead-letter reasons
def _transfer_dead_letters(client: ServiceBusClient, queue_name: str) -> list:
    with client.get_queue_receiver(
        queue_name,
        sub_queue=ServiceBusSubQueue.TRANSFER_DEAD_LETTER,
        receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
    ) as receiver:
        return receiver.receive_messages(max_message_count=10, max_wait_time=1)


def test_a_message_forwarded_more_than_four_hops_is_dead_lettered_with_max_transfer_hop_count_exceeded(client):
    """"Dead-letter queues", Moving messages to the DLQ: the system reason `MaxTransferHopCountExceeded`
    ("The maximum number of allowed hops when forwarding between queues has been exceeded. This value is
    set to 4."); "Chaining Service Bus entities with autoforwarding": messages that exceed four hops are
    dead-lettered. Four hops still arrive."""
    with client.get_queue_sender("four-hops-1") as sender:
        sender.send_messages(ServiceBusMessage("four"))
    with client.get_queue_receiver("hop-6", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        assert [str(m) for m in receive(receiver, 1)] == ["four"]

    with client.get_queue_sender("hop-1") as sender:
        sender.send_messages(ServiceBusMessage("five"))
    (dead,) = _transfer_dead_letters(client, "hop-5")  # the fifth hop, hop-5 -> hop-6, is refused
    assert str(dead) == "five"
    assert dead.dead_letter_reason == "MaxTransferHopCountExceeded"
    assert "4" in dead.dead_letter_error_description
    with client.get_queue_receiver("hop-6") as receiver:
        assert receiver.receive_messages(max_message_count=1, max_wait_time=0.5) == []


def test_a_message_without_session_id_in_a_session_subscription_is_dead_lettered_with_session_id_is_null(client):
    """"Dead-letter queues", Moving messages to the DLQ: reason "Session ID is null." with description
    "Session enabled entity doesn't allow a message whose session identifier is null."."""
    with client.get_topic_sender("session-topic") as sender:
        sender.send_messages(ServiceBusMessage("no-session"))
    with client.get_subscription_receiver(
        "session-topic", "sessions", sub_queue=ServiceBusSubQueue.DEAD_LETTER
    ) as dlq:
        (dead,) = receive(dlq, 1)
        dlq.complete_message(dead)
    assert dead.dead_letter_reason == "Session ID is null."
    assert dead.dead_letter_error_description == (
        "Session enabled entity doesn't allow a message whose session identifier is null."
    )


def test_a_message_without_session_id_forwarded_to_a_session_queue_is_dead_lettered_with_session_id_is_null(client):
    """"Dead-letter queues": the same system reason when auto-forwarding brings a message without a session
    id to a session-enabled queue (it stays in the source's transfer dead-letter queue)."""
    with client.get_queue_sender("forwards-to-sessions") as sender:
        sender.send_messages(ServiceBusMessage("no-session"))
    (dead,) = _transfer_dead_letters(client, "forwards-to-sessions")
    assert str(dead) == "no-session"
    assert dead.dead_letter_reason == "Session ID is null."
    assert dead.dead_letter_error_description == (
        "Session enabled entity doesn't allow a message whose session identifier is null."
    )


# ------------------------------------------------------------------ message property quotas
def test_a_property_over_32_kb_is_refused_and_nothing_is_enqueued(client):
    """"Service Bus quotas", Message property size: each property is at most 32 KB; a larger one is
    refused (SerializationException) and the calling code gets an exception. The message is not stored."""
    with client.get_queue_sender("plain") as sender:
        with pytest.raises(ServiceBusError, match="32"):
            sender.send_messages(ServiceBusMessage("big", application_properties={"blob": "x" * (33 * KB)}))
        sender.send_messages(ServiceBusMessage("fits", application_properties={"blob": "x" * (30 * KB)}))
    assert [str(m) for m in _peek_all(client, "plain")] == ["fits"]


def test_properties_over_64_kb_in_total_are_refused(client):
    """"Service Bus quotas", Message property size: the cumulative size of all properties (the whole header:
    user and system properties) can't exceed 64 KB; a batch holding such a message is refused whole."""
    three = {f"p{i}": "x" * (30 * KB) for i in range(3)}
    two = {f"p{i}": "x" * (30 * KB) for i in range(2)}
    with client.get_queue_sender("plain") as sender:
        with pytest.raises(ServiceBusError, match="64"):
            sender.send_messages([ServiceBusMessage("ok"), ServiceBusMessage("big", application_properties=three)])
        sender.send_messages(ServiceBusMessage("fits", application_properties=two))
    assert [str(m) for m in _peek_all(client, "plain")] == ["fits"]


# ------------------------------------------------------------------ entity status (suspend and reactivate)
def _set_queue_status(admin: ServiceBusAdministrationClient, name: str, status: EntityStatus) -> None:
    props = admin.get_queue(name)
    props.status = status
    admin.update_queue(props)
    assert admin.get_queue(name).status == status


def _send(client: ServiceBusClient, queue_name: str, body: str) -> None:
    with client.get_queue_sender(queue_name) as sender:
        sender.send_messages(ServiceBusMessage(body))


def _receive_bodies(client: ServiceBusClient, queue_name: str, count: int) -> list[str]:
    with client.get_queue_receiver(queue_name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        return [str(m) for m in receive(receiver, count)]


def test_a_disabled_queue_refuses_sends_and_receives_and_keeps_its_messages(once, admin):
    """"Suspend and reactivate messaging entities (disable)" (entity-suspend): a Disabled queue keeps its
    messages, but they can't be added or removed and the operations yield errors; reactivated, it works."""
    _send(once, "plain", "kept")
    _set_queue_status(admin, "plain", EntityStatus.DISABLED)
    with pytest.raises(MessagingEntityDisabledError):
        _send(once, "plain", "refused")
    with pytest.raises(MessagingEntityDisabledError):
        _receive_bodies(once, "plain", 1)
    _set_queue_status(admin, "plain", EntityStatus.ACTIVE)
    assert _receive_bodies(once, "plain", 2) == ["kept"]


def test_a_send_disabled_queue_refuses_sends_but_still_delivers(once, admin):
    """"Suspend and reactivate messaging entities": SendDisabled: you can't send messages to the queue (an
    exception), but you can receive messages from it. A sender attached before the change is refused too."""
    with once.get_queue_sender("plain") as sender:
        sender.send_messages(ServiceBusMessage("before"))
        _set_queue_status(admin, "plain", EntityStatus.SEND_DISABLED)
        with pytest.raises(MessagingEntityDisabledError):
            sender.send_messages(ServiceBusMessage("after"))
    assert _receive_bodies(once, "plain", 2) == ["before"]


def test_a_receive_disabled_queue_accepts_sends_but_refuses_receives(once, admin):
    """"Suspend and reactivate messaging entities": ReceiveDisabled: you can send messages to the queue,
    but you can't receive messages from it (an exception)."""
    _set_queue_status(admin, "plain", EntityStatus.RECEIVE_DISABLED)
    _send(once, "plain", "queued")
    with pytest.raises(MessagingEntityDisabledError):
        _receive_bodies(once, "plain", 1)
    _set_queue_status(admin, "plain", EntityStatus.ACTIVE)
    assert _receive_bodies(once, "plain", 1) == ["queued"]


def test_topic_and_subscription_status_follow_the_documented_table(once, admin):
    """"Suspend and reactivate messaging entities", topic and subscription status: a Disabled subscription
    still gets the topic's messages but can't be received from; a Disabled topic refuses sends while its
    subscriptions still deliver what they hold."""
    sub = admin.get_subscription("status-topic", "all")
    sub.status = EntityStatus.DISABLED
    admin.update_subscription("status-topic", sub)
    with once.get_topic_sender("status-topic") as sender:
        sender.send_messages(ServiceBusMessage("held"))
    with pytest.raises(MessagingEntityDisabledError):
        with once.get_subscription_receiver("status-topic", "all") as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=1)

    sub.status = EntityStatus.ACTIVE
    admin.update_subscription("status-topic", sub)
    topic = admin.get_topic("status-topic")
    topic.status = EntityStatus.DISABLED
    admin.update_topic(topic)
    with pytest.raises(MessagingEntityDisabledError):
        with once.get_topic_sender("status-topic") as sender:
            sender.send_messages(ServiceBusMessage("refused"))
    with once.get_subscription_receiver(
        "status-topic", "all", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        assert [str(m) for m in receive(receiver, 2, wait=3)] == ["held"]


def test_a_message_forwarded_to_a_disabled_queue_is_dead_lettered_at_the_source(client, admin):
    """"Chaining Service Bus entities with autoforwarding": if the destination entity is disabled, the source
    adds the messages to its dead-letter queue ("Dead-letter queues", Dead-lettering in auto forward
    scenarios: the destination queue or topic is disabled); here the source's transfer dead-letter queue."""
    _set_queue_status(admin, "forward-target", EntityStatus.DISABLED)
    _send(client, "forwards-to-target", "stranded")
    (dead,) = _transfer_dead_letters(client, "forwards-to-target")
    assert str(dead) == "stranded" and dead.dead_letter_reason
    _set_queue_status(admin, "forward-target", EntityStatus.ACTIVE)
    assert _peek_all(client, "forward-target") == []


# ------------------------------------------------------------------ message id and session id quotas
@pytest.mark.parametrize(
    ("queue_name", "properties"),
    [
        ("plain", AmqpMessageProperties(message_id="m" * 129)),
        ("session-target", AmqpMessageProperties(message_id="ok", group_id="s" * 129)),
    ],
    ids=["message-id", "session-id"],
)
def test_ids_over_128_characters_are_refused(client, queue_name, properties):
    """"Service Bus quotas": maximum size of a message ID 128, of a message session ID 128. The SDK's
    ServiceBusMessage checks this itself; an AmqpAnnotatedMessage reaches the service unchecked, and the
    service refuses it. Ids of exactly 128 characters are accepted."""
    with client.get_queue_sender(queue_name) as sender:
        with pytest.raises(ServiceBusError, match="128"):
            sender.send_messages(AmqpAnnotatedMessage(data_body=b"too long", properties=properties))
        sender.send_messages(AmqpAnnotatedMessage(
            data_body=b"fits", properties=AmqpMessageProperties(message_id="m" * 128, group_id="s" * 128)))
    with client.get_queue_receiver(
        queue_name, session_id="s" * 128 if queue_name == "session-target" else None
    ) as receiver:
        assert [m.message_id for m in receiver.peek_messages(max_message_count=5, sequence_number=1)] == ["m" * 128]


# ------------------------------------------------------------------ auto-forwarding sources
def test_a_session_enabled_queue_or_subscription_may_auto_forward(admin):
    """"Chaining Service Bus entities with autoforwarding" says autoforwarding isn't supported for
    session-enabled queues or subscriptions, but the live service accepts and echoes such a description
    (issue #24 item 9; docs/emulator.md, "Where the docs are terse"), so the management API does too. It
    used to answer 400 here."""
    created = admin.create_queue("session-source", requires_session=True, forward_to="plain")
    assert created.forward_to.endswith("/plain")
    sub = admin.create_subscription("status-topic", "session-source", requires_session=True, forward_to="plain")
    assert sub.forward_to.endswith("/plain")
    session_queue = admin.get_queue("session-target")
    session_queue.forward_to = "plain"
    admin.update_queue(session_queue)
    assert admin.get_queue("session-target").forward_to.endswith("/plain")


@pytest.mark.parametrize("window", [dt.timedelta(seconds=10), dt.timedelta(days=8)], ids=["10s", "8d"])
def test_a_duplicate_detection_window_outside_20_seconds_to_7_days_is_refused(admin, window):
    """QueueProperties.DuplicateDetectionHistoryTimeWindow (Service Bus administration reference): the
    maximum is 7 days and the minimum 20 seconds; Service Bus answers 400 outside that range."""
    with pytest.raises(HttpResponseError) as refused:
        admin.create_queue("dedup-window", requires_duplicate_detection=True,
                           duplicate_detection_history_time_window=window)
    assert refused.value.status_code == 400
    created = admin.create_queue("dedup-window", requires_duplicate_detection=True,
                                 duplicate_detection_history_time_window=dt.timedelta(seconds=20))
    assert created.duplicate_detection_history_time_window == dt.timedelta(seconds=20)


def test_enqueued_sequence_number_is_the_one_of_the_original_submission_across_several_hops(client):
    """"Messages, payloads, and serialization" (service-bus-messages-payloads), EnqueuedSequenceNumber: for
    auto-forwarded messages, the sequence number first assigned at the original point of submission, however
    many hops later (chain-a -> chain-b -> chain-c, with chain-b's numbers ahead of chain-a's)."""
    with client.get_queue_sender("chain-b") as sender:
        sender.send_messages([ServiceBusMessage(f"direct-{i}") for i in range(3)])
    with client.get_queue_sender("chain-a") as sender:
        sender.send_messages(ServiceBusMessage("via-a"))
    with client.get_queue_receiver("chain-c", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        got = {str(m): m for m in receive(receiver, 4)}
    assert [got[f"direct-{i}"].enqueued_sequence_number for i in range(3)] == [1, 2, 3]  # their chain-b numbers
    assert got["via-a"].enqueued_sequence_number == 1  # chain-a's number, not chain-b's 4
    assert got["via-a"].sequence_number == 4


# ------------------------------------------------------------------ session state
def test_session_state_holds_at_most_one_message_worth_of_data(client):
    """"Message sessions", Message session state: an opaque binary object that can hold data of the size of
    one message, 256 KB for Service Bus Standard. A larger state is refused and the previous one kept."""
    with client.get_queue_receiver("session-target", session_id="stateful") as receiver:
        receiver.session.set_state(b"s" * (200 * KB))
        with pytest.raises(MessageSizeExceededError):
            receiver.session.set_state(b"x" * (256 * KB + 1))
        assert receiver.session.get_state() == b"s" * (200 * KB)
        receiver.session.set_state(None)
        assert receiver.session.get_state() is None


# ------------------------------------------------------------------ duplicate detection and scheduling
def test_scheduled_messages_are_included_in_duplicate_detection(client):
    """"Duplicate detection", note: scheduled messages are included in duplicate detection. A scheduled message
    followed by a non-scheduled duplicate: the non-scheduled one is dropped; a non-scheduled message followed
    by a scheduled duplicate: the scheduled one is dropped. Both sends succeed."""
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    with client.get_queue_sender("dedup") as sender:
        sender.schedule_messages(ServiceBusMessage("scheduled-first", message_id="a"), later)
        sender.send_messages(ServiceBusMessage("dropped-now", message_id="a"))
        sender.send_messages(ServiceBusMessage("sent-first", message_id="b"))
        sender.schedule_messages(ServiceBusMessage("dropped-scheduled", message_id="b"), later)
    assert sorted(str(m) for m in _peek_all(client, "dedup")) == ["scheduled-first", "sent-first"]


def test_a_receiver_attached_before_the_queue_is_disabled_gets_the_error_and_its_locks_end(once, admin):
    """"Suspend and reactivate messaging entities": once the queue is Disabled its messages can't be removed
    and the operations yield errors; a receiver that was already attached gets MessagingEntityDisabledError,
    and the message it held locked is kept (available again, its delivery not counted, once reactivated)."""
    _send(once, "plain", "held")
    with once.get_queue_receiver("plain") as receiver:
        (held,) = receive(receiver, 1)
        _set_queue_status(admin, "plain", EntityStatus.DISABLED)
        with pytest.raises(MessagingEntityDisabledError):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
    _set_queue_status(admin, "plain", EntityStatus.ACTIVE)
    with once.get_queue_receiver("plain", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
        (again,) = receive(receiver, 1)
    assert (str(again), again.sequence_number, again.delivery_count) == ("held", held.sequence_number, 0)


def test_an_auto_forwarding_source_never_auto_deletes(admin):
    """"Chaining Service Bus entities with autoforwarding", note: when autoforwarding is set up, the value for
    AutoDeleteOnIdle on the source entity is automatically set to the maximum value of the data type."""
    idle = dt.timedelta(minutes=10)
    forwarding = admin.create_queue("idle-forwarder", forward_to="plain", auto_delete_on_idle=idle)
    plain = admin.create_queue("idle-plain", auto_delete_on_idle=idle)
    subscription = admin.create_subscription("status-topic", "idle-forwarder", forward_to="plain",
                                             auto_delete_on_idle=idle)
    assert plain.auto_delete_on_idle == idle
    assert forwarding.auto_delete_on_idle > dt.timedelta(days=3650)
    assert subscription.auto_delete_on_idle > dt.timedelta(days=3650)
    assert admin.get_queue("idle-forwarder").auto_delete_on_idle == forwarding.auto_delete_on_idle


def test_duplicate_detection_and_partitioning_cannot_change_after_creation(admin):
    """"Enable duplicate message detection": you can't enable or disable duplicate detection after the queue
    or topic is created (only its window can change). "Enable partitioning in Azure Service Bus basic or
    standard": it's not possible to change the partitioning option on any existing queue or topic. Service
    Bus answers 400 and the entity keeps its settings."""
    for toggle in ("requires_duplicate_detection", "enable_partitioning"):
        queue_props = admin.get_queue("plain")
        setattr(queue_props, toggle, True)
        with pytest.raises(HttpResponseError) as refused:
            admin.update_queue(queue_props)
        assert refused.value.status_code == 400
        assert getattr(admin.get_queue("plain"), toggle) is False
    topic = admin.get_topic("status-topic")
    topic.requires_duplicate_detection = True
    with pytest.raises(HttpResponseError):
        admin.update_topic(topic)
    assert admin.get_topic("status-topic").requires_duplicate_detection is False
    dedup = admin.get_queue("dedup")
    dedup.duplicate_detection_history_time_window = dt.timedelta(minutes=5)
    admin.update_queue(dedup)  # the window may change
    assert admin.get_queue("dedup").duplicate_detection_history_time_window == dt.timedelta(minutes=5)


def test_a_receiver_of_a_deleted_queue_gets_entity_not_found(once, admin):
    """A receiver attached to a queue that is then deleted: its next receive raises
    MessagingEntityNotFoundError, the error Service Bus names for a missing entity."""
    admin.create_queue("short-lived")
    with once.get_queue_receiver("short-lived") as receiver:
        assert receiver.receive_messages(max_message_count=1, max_wait_time=0.5) == []
        admin.delete_queue("short-lived")
        with pytest.raises(MessagingEntityNotFoundError):
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
    # a new receiver does not get as far as the attach: the put-token for the missing queue is a 404
    with pytest.raises(ServiceBusAuthenticationError):
        with once.get_queue_receiver("short-lived") as receiver:
            receiver.receive_messages(max_message_count=1, max_wait_time=1)
