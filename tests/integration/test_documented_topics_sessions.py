"""Documented behaviours of topic filters, rule actions and rule parameters, through the real SDK over a socket.

Each test names the documentation page (learn.microsoft.com/azure/service-bus-messaging/...) it follows.
Rules are managed with ServiceBusAdministrationClient against the emulator's HTTPS admin endpoint, as an
application would against a namespace.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)

from sbemulator import Emulator
from tests.fixtures.emulator import topology

CONFIG = topology(topics=[{"Name": "events", "Properties": {}, "Subscriptions": []}])
UTC = dt.UTC


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=CONFIG, in_memory=True) as emulator:
        yield emulator


@pytest.fixture
def client(emu: Emulator) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
        yield sb


@pytest.fixture
def admin(emu: Emulator) -> Iterator[ServiceBusAdministrationClient]:
    with ServiceBusAdministrationClient.from_connection_string(
        emu.admin_connection_string, connection_verify=emu.ca_path
    ) as adm:
        yield adm


def _subscribe(admin: ServiceBusAdministrationClient, name: str, **rule: object) -> None:
    """A subscription whose only rule is ``rule`` (the $Default rule removed)."""
    admin.create_subscription("events", name)
    admin.delete_rule("events", name, "$Default")
    admin.create_rule("events", name, "only", **rule)


def _bodies(client: ServiceBusClient, subscription: str) -> list[str]:
    with client.get_subscription_receiver(
        "events", subscription, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
    ) as receiver:
        out: list[str] = []
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=1):
            out += [str(m) for m in batch]
        return out


# ---- date/time user properties ------------------------------------------------------------------
def test_a_datetime_user_property_compares_with_sys_enqueued_time_utc(client, admin):
    """"SQL filter syntax" / "Messages, payloads and serialization": a date/time application property
    (an AMQP timestamp on the wire) is a DateTime in a filter, so it orders against sys.EnqueuedTimeUtc."""
    _subscribe(admin, "not-yet-due", filter=SqlRuleFilter("DueUtc > sys.EnqueuedTimeUtc"))
    now = dt.datetime.now(UTC)
    with client.get_topic_sender("events") as sender:
        sender.send_messages([
            ServiceBusMessage("future", application_properties={"DueUtc": now + dt.timedelta(days=1)}),
            ServiceBusMessage("past", application_properties={"DueUtc": now - dt.timedelta(days=1)}),
        ])
    assert _bodies(client, "not-yet-due") == ["future"]


def test_a_correlation_filter_on_a_datetime_user_property_matches_the_same_time(client, admin):
    """"Topic filters and actions", correlation filters: user properties compare by value and type; a
    date/time property matches the same date/time."""
    when = dt.datetime(2030, 5, 17, 8, 30, tzinfo=UTC)
    _subscribe(admin, "at-time", filter=CorrelationRuleFilter(properties={"When": when}))
    with client.get_topic_sender("events") as sender:
        sender.send_messages([
            ServiceBusMessage("same", application_properties={"When": when}),
            ServiceBusMessage("other", application_properties={"When": when + dt.timedelta(seconds=1)}),
        ])
    assert _bodies(client, "at-time") == ["same"]


def test_an_action_copying_a_date_time_keeps_it_a_date_time(client, admin):
    """"SQL rule action syntax": SET assigns the value of an expression; a date/time copied from
    sys.EnqueuedTimeUtc or from a date/time property reaches the receiver as the same timestamp."""
    due = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    _subscribe(admin, "stamped", filter=SqlRuleFilter("1=1"),
               action=SqlRuleAction("SET Stamped = sys.EnqueuedTimeUtc; SET DueCopy = DueUtc"))
    before = dt.datetime.now(UTC) - dt.timedelta(minutes=1)
    with client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("m", application_properties={"DueUtc": due}))
    with client.get_subscription_receiver("events", "stamped") as receiver:
        (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.complete_message(msg)
    props = msg.application_properties
    # azure-servicebus hands AMQP timestamps back as milliseconds since the Unix epoch
    assert props[b"DueCopy"] == props[b"DueUtc"] == int(due.timestamp() * 1000)
    assert props[b"Stamped"] == int(msg.enqueued_time_utc.timestamp() * 1000) > before.timestamp() * 1000
