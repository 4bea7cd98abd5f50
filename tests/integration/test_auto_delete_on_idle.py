"""AutoDeleteOnIdle enforced on the broker's clock, seen through the real SDKs, without waiting: a manual
clock moves past the idle interval.

Follows https://learn.microsoft.com/azure/service-bus-messaging/message-expiration, "Temporary entities"
and "Idleness" (what counts as use of a queue, a topic and a subscription; the minimum interval is 5
minutes, QueueProperties.AutoDeleteOnIdle).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessagingEntityNotFoundError, ServiceBusAuthenticationError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.fixtures.emulator import topology

WAIT_S = 5
IDLE = dt.timedelta(minutes=5)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(topology(queues=[], topics=[])), in_memory=True, clock="manual") as emu:
        yield emu


def admin(emu: Emulator) -> ServiceBusAdministrationClient:
    assert emu.admin_connection_string is not None
    return ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                                 connection_verify=emu.ca_path)


def exists(emu: Emulator, name: str, topic: str | None = None) -> bool:
    with admin(emu) as client:
        try:
            client.get_subscription(topic, name) if topic else client.get_queue(name)
        except ResourceNotFoundError:
            return False
    return True


def send(emu: Emulator, name: str, body: str = "x") -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender(name) as sender:
            sender.send_messages(ServiceBusMessage(body))


def test_an_idle_queue_is_deleted_and_the_sdk_sees_it_gone(emu: Emulator) -> None:
    with admin(emu) as client:
        client.create_queue("temp", auto_delete_on_idle=IDLE)
        assert client.get_queue("temp").auto_delete_on_idle == IDLE
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("temp") as sender:  # an open sender link that sends nothing is not use
            emu.advance(IDLE - dt.timedelta(seconds=1))
            assert exists(emu, "temp")
            emu.advance(2)
            with admin(emu) as mgmt, pytest.raises(ResourceNotFoundError):
                mgmt.get_queue("temp")
            with pytest.raises(MessagingEntityNotFoundError):
                sender.send_messages(ServiceBusMessage("too late"))
        # A new sender does not get as far as the attach: its put-token names a missing entity, a 404
        # that the Python SDK reports as an authentication error (docs/emulator.md, "Authentication").
        with pytest.raises((MessagingEntityNotFoundError, ServiceBusAuthenticationError)):
            with client.get_queue_sender("temp") as sender:
                sender.send_messages(ServiceBusMessage("too late"))


def test_sends_receives_and_peeks_keep_a_queue(emu: Emulator) -> None:
    with admin(emu) as client:
        client.create_queue("temp", auto_delete_on_idle=IDLE)
    emu.advance(200)
    send(emu, "temp")  # a send is use: the interval starts again
    emu.advance(200)
    assert exists(emu, "temp")
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("temp", max_wait_time=WAIT_S) as receiver:
            assert len(receiver.peek_messages()) == 1  # browsing is use
    emu.advance(250)
    assert exists(emu, "temp")
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("temp", max_wait_time=WAIT_S) as receiver:
            [m] = receiver.receive_messages(max_wait_time=WAIT_S)
            receiver.complete_message(m)
    emu.advance(IDLE - dt.timedelta(seconds=1))
    assert exists(emu, "temp")
    emu.advance(2)
    assert not exists(emu, "temp")


def test_an_update_and_an_attached_receiver_keep_a_queue(emu: Emulator) -> None:
    with admin(emu) as client:
        client.create_queue("temp", auto_delete_on_idle=IDLE)
        emu.advance(250)
        props = client.get_queue("temp")
        props.max_delivery_count = 4
        client.update_queue(props)  # an update is use
    emu.advance(250)
    assert exists(emu, "temp")
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver("temp", max_wait_time=WAIT_S) as receiver:
            receiver.receive_messages(max_wait_time=0.5)  # attached, waiting for messages
            emu.advance(3 * IDLE)
            assert exists(emu, "temp")
    emu.advance(IDLE + dt.timedelta(seconds=1))
    assert not exists(emu, "temp")


def test_a_scheduled_message_keeps_a_queue_until_it_is_enqueued(emu: Emulator) -> None:
    with admin(emu) as client:
        client.create_queue("temp", auto_delete_on_idle=IDLE)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender("temp") as sender:
            sender.schedule_messages(ServiceBusMessage("later"), emu.now() + dt.timedelta(minutes=30))
    emu.advance(dt.timedelta(minutes=20))
    assert exists(emu, "temp")


def test_a_subscription_idles_on_receives_and_a_topic_on_sends_and_its_subscriptions(emu: Emulator) -> None:
    with admin(emu) as client:
        client.create_topic("events", auto_delete_on_idle=IDLE)
        client.create_subscription("events", "busy")
        client.create_subscription("events", "idle", auto_delete_on_idle=IDLE)
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        for _ in range(3):
            emu.advance(200)
            with client.get_topic_sender("events") as sender:
                sender.send_messages(ServiceBusMessage("e"))  # use of the topic, not of its subscriptions
    assert not exists(emu, "idle", topic="events")  # copies arriving are not receives
    assert exists(emu, "busy", topic="events")
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        emu.advance(250)
        with client.get_subscription_receiver("events", "busy", max_wait_time=WAIT_S) as receiver:
            receiver.peek_messages()  # an operation on a subscription is use of its topic
        with client.get_topic_sender("events") as sender:
            emu.advance(250)
            with admin(emu) as mgmt:
                assert mgmt.get_topic("events").auto_delete_on_idle == IDLE
            emu.advance(IDLE - dt.timedelta(seconds=250))
            with admin(emu) as mgmt, pytest.raises(ResourceNotFoundError):
                mgmt.get_topic("events")
            with pytest.raises(MessagingEntityNotFoundError):
                sender.send_messages(ServiceBusMessage("gone"))


def test_the_minimum_interval_is_five_minutes(emu: Emulator) -> None:
    with admin(emu) as client, pytest.raises(HttpResponseError, match="minimum is 5 minutes"):
        client.create_queue("short", auto_delete_on_idle=dt.timedelta(minutes=4))


def test_a_durable_emulator_keeps_the_interval_and_the_deletion(tmp_path: object) -> None:
    data_dir = f"{tmp_path}/data"
    config = topology(queues=[], topics=[])
    with Emulator(config=copy.deepcopy(config), in_memory=False, data_dir=data_dir, clock="manual") as emu:
        with admin(emu) as client:
            client.create_queue("temp", auto_delete_on_idle=IDLE)
    with Emulator(config=copy.deepcopy(config), in_memory=False, data_dir=data_dir, clock="manual") as emu:
        with admin(emu) as client:
            assert client.get_queue("temp").auto_delete_on_idle == IDLE  # stored with the entity now
        emu.advance(IDLE + dt.timedelta(seconds=1))
        assert not exists(emu, "temp")
    with Emulator(config=copy.deepcopy(config), in_memory=False, data_dir=data_dir) as emu:
        assert not exists(emu, "temp")
