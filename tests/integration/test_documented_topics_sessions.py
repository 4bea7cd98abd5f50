"""Documented behaviours of topic filters, rule actions and rule parameters, through the real SDK over a socket.

Each test names the documentation page (learn.microsoft.com/azure/service-bus-messaging/...) it follows.
Rules are managed with ServiceBusAdministrationClient against the emulator's HTTPS admin endpoint, as an
application would against a namespace.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import (
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
)

from sbemulator import Emulator
from tests.fixtures.emulator import topology

CONFIG = topology(topics=[
    {"Name": "events", "Properties": {}, "Subscriptions": []},
    {"Name": "ten-minutes", "Properties": {"DefaultMessageTimeToLive": "PT10M"}, "Subscriptions": [
        {"Name": "ttl-known", "Properties": {}, "Rules": [{"Name": "known", "Properties": {
            "FilterType": "Sql", "SqlFilter": {"SqlExpression": "sys.TimeToLive IS NOT NULL"},
            "Action": {"SqlExpression": "SET Lifetime = sys.ExpiresAtUtc - sys.EnqueuedTimeUtc"}}}]},
    ]},
])
UTC = dt.UTC


@pytest.fixture
def topology_under_test() -> dict:
    return copy.deepcopy(CONFIG)


def _subscribe(admin: ServiceBusAdministrationClient, name: str, **rule: Any) -> None:
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



def test_an_action_setting_a_duration_delivers_it_as_a_timespan(client, admin):
    """"SQL rule action syntax": ``SET`` takes any expression, and ``sys.ExpiresAtUtc - sys.EnqueuedTimeUtc``
    or ``sys.TimeToLive`` is a duration; the copy carries it as the .NET SDK writes a TimeSpan
    (``com.microsoft:timespan`` over ticks of 100 ns) instead of failing the receiver's connection."""
    _subscribe(admin, "aged", filter=SqlRuleFilter("1=1"),
               action=SqlRuleAction("SET Lifetime = sys.ExpiresAtUtc - sys.EnqueuedTimeUtc; SET Ttl = sys.TimeToLive"))
    with client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("m", time_to_live=dt.timedelta(minutes=5)))
    with client.get_subscription_receiver("events", "aged") as receiver:
        (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.complete_message(msg)
    five_minutes_in_ticks = 5 * 60 * 10_000_000
    # azure-servicebus hands a described value back as its value: the ticks
    assert msg.application_properties[b"Lifetime"] == five_minutes_in_ticks
    assert msg.application_properties[b"Ttl"] == five_minutes_in_ticks



def test_filters_see_the_topic_default_time_to_live_of_a_message_sent_without_one(client):
    """"Message expiration (Time to Live)": a message without its own TimeToLive gets the entity's
    DefaultMessageTimeToLive, so rules on the topic's subscriptions see sys.TimeToLive and
    sys.ExpiresAtUtc set (here ten minutes), as the receiver does."""
    with client.get_topic_sender("ten-minutes") as sender:
        sender.send_messages(ServiceBusMessage("no-ttl"))
    with client.get_subscription_receiver("ten-minutes", "ttl-known") as receiver:
        (msg,) = receiver.receive_messages(max_message_count=1, max_wait_time=10)
        receiver.complete_message(msg)
    assert msg.time_to_live == dt.timedelta(minutes=10)
    assert msg.application_properties[b"Lifetime"] == 10 * 60 * 10_000_000  # ticks of 100 ns


# ---- parameters ---------------------------------------------------------------------------------
def test_sql_filter_parameters_are_substituted_and_kept_on_the_rule(client, admin):
    """SqlRuleFilter / SqlFilter.Parameters ("Topic filters and actions", SQL filters): ``@name`` in the
    expression takes the value given with the rule (string, number, boolean, date/time), and the rule
    read back carries them."""
    cutoff = dt.datetime(2030, 1, 1, tzinfo=UTC)
    _subscribe(admin, "by-params", filter=SqlRuleFilter(
        "Color = @color AND Qty > @min AND Urgent = @urgent AND DueUtc < @cutoff",
        parameters={"@color": "red", "@min": 2, "@urgent": True, "@cutoff": cutoff}))
    rule = admin.get_rule("events", "by-params", "only")
    assert dict(rule.filter.parameters) == {"@color": "red", "@min": 2, "@urgent": True, "@cutoff": cutoff}
    due = cutoff - dt.timedelta(days=1)
    with client.get_topic_sender("events") as sender:
        sender.send_messages([
            ServiceBusMessage("match", application_properties={
                "Color": "red", "Qty": 3, "Urgent": True, "DueUtc": due}),
            ServiceBusMessage("too-few", application_properties={
                "Color": "red", "Qty": 2, "Urgent": True, "DueUtc": due}),
            ServiceBusMessage("too-late", application_properties={
                "Color": "red", "Qty": 3, "Urgent": True, "DueUtc": cutoff}),
        ])
    assert _bodies(client, "by-params") == ["match"]


def test_sql_action_parameters_are_substituted(client, admin):
    """SqlRuleAction / SqlRuleAction.Parameters ("SQL rule action syntax"): the action's ``@name``
    values come with the action, separately from the filter's."""
    _subscribe(admin, "stamp-params",
               filter=SqlRuleFilter("Kind = @kind", parameters={"@kind": "order"}),
               action=SqlRuleAction("SET Route = @route; SET Weight = Qty * @factor",
                                    parameters={"@route": "west", "@factor": 10}))
    rule = admin.get_rule("events", "stamp-params", "only")
    assert dict(rule.action.parameters) == {"@route": "west", "@factor": 10}
    with client.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage("o", application_properties={"Kind": "order", "Qty": 4}),
                              ServiceBusMessage("x", application_properties={"Kind": "other", "Qty": 4})])
    with client.get_subscription_receiver("events", "stamp-params") as receiver:
        (msg,) = receiver.receive_messages(max_message_count=5, max_wait_time=10)
        receiver.complete_message(msg)
    assert str(msg) == "o"
    assert msg.application_properties[b"Route"] == b"west"
    assert msg.application_properties[b"Weight"] == 40


def test_a_rule_using_a_parameter_it_was_not_given_is_refused(admin):
    """"SQL filter syntax": an expression is checked when the rule is created; a parameter with no
    value is a bad request and leaves the subscription's rules as they were."""
    admin.create_subscription("events", "no-value")
    with pytest.raises(HttpResponseError) as info:
        admin.create_rule("events", "no-value", "bad",
                          filter=SqlRuleFilter("Color = @color", parameters={"@other": "x"}))
    assert info.value.status_code == 400
    assert [r.name for r in admin.list_rules("events", "no-value")] == ["$Default"]


def test_date_time_parameters_and_correlation_properties_survive_a_restart(tmp_path):
    """A rule is part of the subscription's durable definition: after a restart a date/time parameter
    and a date/time correlation property still compare as date/times (not as their text)."""
    cutoff = dt.datetime(2030, 1, 1, tzinfo=UTC)
    for run in range(2):
        with Emulator(config=CONFIG, in_memory=False, data_dir=tmp_path) as emu, \
                ServiceBusClient.from_connection_string(emu.connection_string) as sb:
            if run == 0:
                with ServiceBusAdministrationClient.from_connection_string(
                    emu.admin_connection_string, connection_verify=emu.ca_path
                ) as adm:
                    _subscribe(adm, "before-cutoff", filter=SqlRuleFilter(
                        "DueUtc < @cutoff", parameters={"@cutoff": cutoff}))
                    _subscribe(adm, "at-cutoff", filter=CorrelationRuleFilter(properties={"DueUtc": cutoff}))
                continue
            with sb.get_topic_sender("events") as sender:
                sender.send_messages([
                    ServiceBusMessage("early", application_properties={"DueUtc": cutoff - dt.timedelta(hours=1)}),
                    ServiceBusMessage("exact", application_properties={"DueUtc": cutoff}),
                ])
            assert _bodies(sb, "before-cutoff") == ["early"]
            assert _bodies(sb, "at-cutoff") == ["exact"]
