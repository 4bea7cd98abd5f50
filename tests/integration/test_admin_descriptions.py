"""Entity descriptions through the Python SDK's ``ServiceBusAdministrationClient``: what Service Bus
does with them (issue #24 items 2, 8, 9, 10, 11, 12; issue #18 item 1's name bug).

Where the documentation is terse, the SDK's own live tests decide (they run against real namespaces):
``test_mgmt_queues.py`` / ``test_mgmt_topics.py`` / ``test_mgmt_subscriptions.py`` in
azure-sdk-for-python.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import (
    AccessRights,
    ApiVersion,
    AuthorizationRule,
    CorrelationRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleFilter,
)

from sbemulator import Emulator

from .test_admin_http import call

# .NET TimeSpan.MaxValue as the SDK reads P10675199DT2H48M5.4775807S
MAX_TIMESPAN = datetime.timedelta(days=10675199, seconds=10085, microseconds=477581)


def _admin(emu: Emulator, api_version: str | ApiVersion = ApiVersion.V2024_05) -> ServiceBusAdministrationClient:
    assert emu.admin_connection_string is not None
    return ServiceBusAdministrationClient.from_connection_string(
        emu.admin_connection_string, connection_verify=emu.ca_path, api_version=api_version
    )


@pytest.fixture
def admin(emulator: Emulator) -> Iterator[ServiceBusAdministrationClient]:
    with _admin(emulator) as client:
        yield client


def _near(actual: object, expected: datetime.timedelta) -> bool:
    """``actual`` (a duration the SDK read back, typed ``timedelta | str | None``) is ``expected``."""
    return isinstance(actual, datetime.timedelta) and abs(actual - expected) < datetime.timedelta(milliseconds=1)


def _rules(entity: Any) -> list[AuthorizationRule]:
    """An entity's authorization rules as the SDK read them (None when it sent none)."""
    assert entity.authorization_rules is not None
    return list(entity.authorization_rules)


# --- names (#18 item 1) ------------------------------------------------------------------------------

def test_a_name_ending_in_a_newline_is_refused_not_created_unreachable(emulator: Emulator) -> None:
    body = ('<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml">'
            '<QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/>'
            "</content></entry>")
    status, _, text = call(emulator, "PUT", "/q%0A?api-version=2021-05", body)
    assert status == 400, text
    status, _, feed = call(emulator, "GET", "/$Resources/queues?api-version=2021-05")
    assert status == 200 and b"<title type=\"text\">q" not in feed


# --- management-API defaults (#24 item 8) ----------------------------------------------------------

def test_entities_created_through_the_api_get_service_bus_defaults(admin: ServiceBusAdministrationClient) -> None:
    """QueueProperties / SubscriptionProperties defaults ("Service Bus quotas", the SDK's docstrings):
    TTL and AutoDeleteOnIdle TimeSpan.MaxValue, MaxDeliveryCount 10, LockDuration 1 minute, duplicate
    detection window 10 minutes; not the official emulator's Config.json defaults (3, 1 hour, 20 s)."""
    q = admin.create_queue("plain")
    assert q.max_delivery_count == 10
    assert q.lock_duration == datetime.timedelta(minutes=1)
    assert _near(q.default_message_time_to_live, MAX_TIMESPAN)
    assert q.duplicate_detection_history_time_window == datetime.timedelta(minutes=10)
    assert _near(q.auto_delete_on_idle, MAX_TIMESPAN)
    assert q.max_message_size_in_kilobytes == 256
    t = admin.create_topic("plain-topic")
    assert _near(t.default_message_time_to_live, MAX_TIMESPAN)
    assert t.duplicate_detection_history_time_window == datetime.timedelta(minutes=10)
    s = admin.create_subscription("plain-topic", "s")
    assert (s.max_delivery_count, s.lock_duration) == (10, datetime.timedelta(minutes=1))
    assert _near(s.default_message_time_to_live, MAX_TIMESPAN)


def test_a_message_sent_without_ttl_to_an_api_queue_carries_none(emulator: Emulator,
                                                                 admin: ServiceBusAdministrationClient) -> None:
    admin.create_queue("no-ttl")
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        with sb.get_queue_sender("no-ttl") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with sb.get_queue_receiver("no-ttl", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as rx:
            (msg,) = rx.receive_messages(max_message_count=1, max_wait_time=10)
    assert msg.time_to_live is None


def test_config_file_entities_keep_the_official_emulators_defaults(admin: ServiceBusAdministrationClient) -> None:
    q = admin.get_queue("orders")  # declared in the fixture's Config.json without these properties
    assert q.max_delivery_count == 3 and q.duplicate_detection_history_time_window == 20 * datetime.timedelta(seconds=1)


# --- authorization rules (#24 item 2, storage) -----------------------------------------------------

def _rule(name: str, *rights: AccessRights, key: str | None = None) -> AuthorizationRule:
    return AuthorizationRule(key_name=name, rights=list(rights), primary_key=key, secondary_key=key)


def test_authorization_rules_are_stored_replaced_and_returned(emulator: Emulator,
                                                              admin: ServiceBusAdministrationClient) -> None:
    admin.create_queue("guarded", authorization_rules=[
        _rule("listener", AccessRights.LISTEN, key="a2V5LW9uZQ=="),
        _rule("sender", AccessRights.SEND),
    ])
    q = admin.get_queue("guarded")
    assert [(r.key_name, r.rights) for r in _rules(q)] == [("listener", ["Listen"]), ("sender", ["Send"])]
    assert _rules(q)[0].primary_key == "a2V5LW9uZQ=="
    assert _rules(q)[1].primary_key  # generated when not given, as Service Bus does
    generated = _rules(q)[1].primary_key
    q.authorization_rules = [_rules(q)[1], _rule("admin", AccessRights.MANAGE, AccessRights.SEND,
                                                             AccessRights.LISTEN)]
    admin.update_queue(q)
    q = admin.get_queue("guarded")
    assert [r.key_name for r in _rules(q)] == ["sender", "admin"]
    assert _rules(q)[0].primary_key == generated
    assert sorted(_rules(q)[1].rights or []) == ["Listen", "Manage", "Send"]
    t = admin.create_topic("guarded-topic", authorization_rules=[_rule("t", AccessRights.SEND)])
    assert [r.key_name for r in _rules(t)] == ["t"]
    assert [r.key_name for r in _rules(admin.get_topic("guarded-topic"))] == ["t"]


def test_more_than_twelve_authorization_rules_are_refused_with_403(admin: ServiceBusAdministrationClient) -> None:
    # Service Bus quotas: "Number of shared access authorization rules per namespace, queue, or topic: 12
    # ... Subsequent requests for creation of additional rules are rejected"
    twelve = [_rule(f"r{n}", AccessRights.LISTEN) for n in range(12)]
    admin.create_queue("twelve-rules", authorization_rules=twelve)
    with pytest.raises(HttpResponseError) as refused:
        admin.create_queue("thirteen-rules", authorization_rules=[*twelve, _rule("r12", AccessRights.SEND)])
    assert refused.value.status_code == 403 and "shared access authorization rules" in str(refused.value)
    assert "thirteen-rules" not in {q.name for q in admin.list_queues()}
    q = admin.get_queue("twelve-rules")
    q.authorization_rules = [*_rules(q), _rule("r12", AccessRights.SEND)]
    with pytest.raises(HttpResponseError) as refused:
        admin.update_queue(q)
    assert refused.value.status_code == 403
    assert len(_rules(admin.get_queue("twelve-rules"))) == 12  # nothing changed
    with pytest.raises(HttpResponseError) as refused:
        admin.create_topic("thirteen-topic", authorization_rules=[*twelve, _rule("r12", AccessRights.SEND)])
    assert refused.value.status_code == 403


def test_authorization_rules_survive_a_restart(tmp_path) -> None:
    with Emulator(in_memory=False, data_dir=tmp_path) as emu, _admin(emu) as admin:
        admin.create_queue("kept", authorization_rules=[_rule("k", AccessRights.LISTEN, key="c2VjcmV0")])
    with Emulator(in_memory=False, data_dir=tmp_path) as emu, _admin(emu) as admin:
        (rule,) = _rules(admin.get_queue("kept"))
        assert (rule.key_name, rule.rights, rule.primary_key) == ("k", ["Listen"], "c2VjcmV0")
        # what the auth layer reads: the queue's rules, also for its dead-letter queue
        from sbemulator.descriptions import AuthorizationRuleConfig

        (seen,) = emu.broker.authorization_rules("kept/$DeadLetterQueue")
        assert isinstance(seen, AuthorizationRuleConfig)
        assert (seen.key_name, seen.rights, seen.keys()[0]) == ("k", ("Listen",), "c2VjcmV0")


# --- ForwardTo edges (#24 item 9) ------------------------------------------------------------------

def test_forward_to_edges_as_the_live_service_accepts_them(admin: ServiceBusAdministrationClient) -> None:
    """test_mgmt_queue_update_success (azure-sdk-for-python) points ForwardTo and
    ForwardDeadLetteredMessagesTo of a queue at the queue itself and reads both back; a session queue
    may forward to a topic; AutoDeleteOnIdle is reset to the maximum only when a non-session entity
    forwards to another entity."""
    admin.create_topic("fan")
    ten = datetime.timedelta(minutes=10)
    q = admin.create_queue("sessions-fwd", requires_session=True, forward_to="fan", auto_delete_on_idle=ten)
    assert str(q.forward_to).endswith("/fan") and q.auto_delete_on_idle == ten
    q = admin.create_queue("self-fwd")
    q.forward_to = q.forward_dead_lettered_messages_to = "self-fwd"
    q.auto_delete_on_idle = ten
    admin.update_queue(q)
    q = admin.get_queue("self-fwd")
    assert str(q.forward_to).endswith("/self-fwd") and str(q.forward_dead_lettered_messages_to).endswith("/self-fwd")
    assert q.auto_delete_on_idle == ten
    q = admin.create_queue("other-fwd", forward_to="fan", auto_delete_on_idle=ten)
    assert _near(q.auto_delete_on_idle, MAX_TIMESPAN)


def test_a_queue_forwarding_to_itself_keeps_its_messages(emulator: Emulator,
                                                         admin: ServiceBusAdministrationClient) -> None:
    admin.create_queue("loop", forward_to="loop")
    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        with sb.get_queue_sender("loop") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with sb.get_queue_receiver("loop", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as rx:
            assert [str(m) for m in rx.receive_messages(max_message_count=1, max_wait_time=10)] == ["x"]


# --- message size on Standard (#24 item 10) --------------------------------------------------------

def test_standard_message_size_256_round_trips_and_1024_is_refused(admin: ServiceBusAdministrationClient) -> None:
    """MaxMessageSizeInKilobytes: 1 MB and more is a Premium feature ("Service Bus quotas")."""
    assert admin.create_queue("std", max_message_size_in_kilobytes=256).max_message_size_in_kilobytes == 256
    with pytest.raises(HttpResponseError) as err:
        admin.create_queue("big", max_message_size_in_kilobytes=1024)
    assert err.value.status_code == 400
    with pytest.raises(HttpResponseError):
        admin.create_topic("big-topic", max_message_size_in_kilobytes=1024)


# --- api-version (#24 item 11) ---------------------------------------------------------------------

def test_api_version_2017_04_refuses_and_omits_newer_properties(emulator: Emulator) -> None:
    with _admin(emulator, "2017-04") as old:
        with pytest.raises(HttpResponseError) as err:
            old.create_queue("sized", max_message_size_in_kilobytes=256)
        assert err.value.status_code == 400
        assert "has unsupported properties for api-version '2017-04'" in str(err.value)
        q = old.create_queue("plain-2017")
        assert q.max_message_size_in_kilobytes is None
        q.max_delivery_count = 7
        old.update_queue(q)  # an update of what a 2017-04 GET returned works
        assert old.get_queue("plain-2017").max_message_size_in_kilobytes is None
    for version in (ApiVersion.V2021_05, ApiVersion.V2024_05):
        with _admin(emulator, version) as client:
            name = f"sized-{version.value}"
            assert client.create_queue(name, max_message_size_in_kilobytes=128).max_message_size_in_kilobytes == 128
            assert client.get_queue("plain-2017").max_message_size_in_kilobytes == 256


# --- topic filter counts (#24 item 12) -------------------------------------------------------------

def test_topic_filter_counts_sum_the_subscriptions_rules(emulator: Emulator,
                                                          admin: ServiceBusAdministrationClient) -> None:
    """SqlFilterCount counts SQL, true and false filters ($Default included), CorrelationFilterCount the
    correlation filters, over the topic's subscriptions (api-version 2024-05, the SDK's default)."""
    admin.create_topic("counted")
    admin.create_subscription("counted", "all")  # $Default: a TrueFilter
    admin.create_subscription("counted", "mixed")
    admin.create_rule("counted", "mixed", "sql", filter=SqlRuleFilter("a = 1"))
    admin.create_rule("counted", "mixed", "corr", filter=CorrelationRuleFilter(label="x"))
    admin.delete_rule("counted", "mixed", "$Default")
    props = admin.get_topic_runtime_properties("counted")
    assert (props.sql_filter_count, props.correlation_filter_count) == (2, 1)
    with _admin(emulator, ApiVersion.V2021_05) as older:
        props = older.get_topic_runtime_properties("counted")
        assert (props.sql_filter_count, props.correlation_filter_count) == (None, None)


def test_filter_counts_follow_rule_changes(admin: ServiceBusAdministrationClient) -> None:
    admin.create_topic("recount")
    assert admin.get_topic_runtime_properties("recount").sql_filter_count == 0
    admin.create_subscription("recount", "one")
    assert admin.get_topic_runtime_properties("recount").sql_filter_count == 1


# --- the async client sees the same ----------------------------------------------------------------

def test_async_admin_client_sees_defaults_rules_and_filter_counts(emulator: Emulator) -> None:
    import asyncio

    from azure.servicebus.aio.management import ServiceBusAdministrationClient as AsyncAdmin

    async def run() -> tuple:
        assert emulator.admin_connection_string is not None
        async with AsyncAdmin.from_connection_string(emulator.admin_connection_string,
                                                     connection_verify=emulator.ca_path) as client:
            q = await client.create_queue("async-q", authorization_rules=[_rule("r", AccessRights.SEND)])
            await client.create_topic("async-t")
            await client.create_subscription("async-t", "s")
            counts = await client.get_topic_runtime_properties("async-t")
            return q, counts

    q, counts = asyncio.run(run())
    assert (q.max_delivery_count, q.lock_duration) == (10, datetime.timedelta(minutes=1))
    assert [r.key_name for r in q.authorization_rules] == ["r"]
    assert (counts.sql_filter_count, counts.correlation_filter_count) == (1, 0)
