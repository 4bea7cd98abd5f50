"""The unchanged azure-servicebus ServiceBusAdministrationClient (sync) against the emulator's HTTPS port.

The only things a user changes: the connection string's Endpoint carries the admin port
(``emulator.admin_connection_string``) and ``connection_verify`` names the emulator's CA.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusSubQueue
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    ServiceBusAdministrationClient,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY

SECOND = datetime.timedelta(seconds=1)


@pytest.fixture
def admin(emulator: Emulator) -> Iterator[ServiceBusAdministrationClient]:
    assert emulator.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as client:
        yield client


@pytest.fixture
def sb(emulator: Emulator) -> Iterator[ServiceBusClient]:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        yield client


def receive_all(sb: ServiceBusClient, entity: str, subscription: str | None = None, **kwargs) -> list[str]:
    mode = ServiceBusReceiveMode.RECEIVE_AND_DELETE
    if subscription is None:
        receiver = sb.get_queue_receiver(entity, receive_mode=mode, **kwargs)
    else:
        receiver = sb.get_subscription_receiver(entity, subscription, receive_mode=mode, **kwargs)
    with receiver:
        return sorted(str(m) for m in receiver.receive_messages(max_message_count=50, max_wait_time=2))


def test_namespace_properties(admin: ServiceBusAdministrationClient) -> None:
    ns = admin.get_namespace_properties()
    assert ns.name == "sbemulatorns"
    assert ns.messaging_sku == "Standard"
    assert ns.namespace_type == "Messaging"
    assert ns.created_at_utc is not None and ns.modified_at_utc is not None
    assert ns.created_at_utc <= ns.modified_at_utc


def test_queue_lifecycle_and_immediate_amqp_use(admin: ServiceBusAdministrationClient, sb: ServiceBusClient) -> None:
    created = admin.create_queue(
        "billing", lock_duration=datetime.timedelta(seconds=45), max_delivery_count=7,
        default_message_time_to_live=datetime.timedelta(minutes=10), dead_lettering_on_message_expiration=True,
        requires_duplicate_detection=True, duplicate_detection_history_time_window=datetime.timedelta(minutes=2),
        user_metadata="owned by billing", auto_delete_on_idle=datetime.timedelta(hours=1),
    )
    assert created.name == "billing"
    assert created.lock_duration == 45 * SECOND
    assert created.max_delivery_count == 7
    assert created.default_message_time_to_live == datetime.timedelta(minutes=10)
    assert created.dead_lettering_on_message_expiration is True
    assert created.requires_duplicate_detection is True
    assert created.duplicate_detection_history_time_window == datetime.timedelta(minutes=2)
    assert created.user_metadata == "owned by billing"
    assert created.auto_delete_on_idle == datetime.timedelta(hours=1)
    assert created.status == "Active"

    # Usable over AMQP at once, with the settings given (duplicate detection drops the second send).
    with sb.get_queue_sender("billing") as sender:
        sender.send_messages(ServiceBusMessage("one", message_id="m1"))
        sender.send_messages(ServiceBusMessage("one again", message_id="m1"))
    assert receive_all(sb, "billing") == ["one"]

    got = admin.get_queue("billing")
    got.max_delivery_count = 9
    got.lock_duration = datetime.timedelta(seconds=20)
    got.user_metadata = "changed"
    admin.update_queue(got)
    after = admin.get_queue("billing")
    assert (after.max_delivery_count, after.lock_duration, after.user_metadata) == (9, 20 * SECOND, "changed")
    assert after.requires_duplicate_detection is True

    # update_queue takes keyword overrides too.
    admin.update_queue(after, max_delivery_count=2)
    assert admin.get_queue("billing").max_delivery_count == 2

    assert "billing" in [q.name for q in admin.list_queues()]
    admin.delete_queue("billing")
    assert "billing" not in [q.name for q in admin.list_queues()]
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("billing")


def test_updated_lock_duration_applies_to_new_receives(admin: ServiceBusAdministrationClient,
                                                       sb: ServiceBusClient) -> None:
    queue = admin.get_queue("orders")
    admin.update_queue(queue, lock_duration=datetime.timedelta(seconds=11))
    with sb.get_queue_sender("orders") as sender:
        sender.send_messages(ServiceBusMessage("x"))
    with sb.get_queue_receiver("orders") as receiver:
        (msg,) = receiver.receive_messages(max_wait_time=5)
        assert msg.locked_until_utc is not None and msg.enqueued_time_utc is not None
        held = msg.locked_until_utc - msg.enqueued_time_utc
        receiver.complete_message(msg)
    assert 9 <= held.total_seconds() <= 13


def test_queue_runtime_properties_count_what_the_data_plane_did(
    admin: ServiceBusAdministrationClient, sb: ServiceBusClient
) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with sb.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        sender.schedule_messages([ServiceBusMessage("s1"), ServiceBusMessage("s2")], later)
    with sb.get_queue_receiver("orders") as receiver:
        received = receiver.receive_messages(max_message_count=2, max_wait_time=5)
        assert len(received) == 2
        for msg in received:
            receiver.dead_letter_message(msg, reason="test", error_description="counted")

    runtime = admin.get_queue_runtime_properties("orders")
    assert runtime.name == "orders"
    assert runtime.active_message_count == 3
    assert runtime.dead_letter_message_count == 2
    assert runtime.scheduled_message_count == 2
    assert runtime.transfer_dead_letter_message_count == 0
    assert runtime.transfer_message_count == 0
    assert runtime.total_message_count == 7
    assert (runtime.size_in_bytes or 0) > 0
    assert runtime.created_at_utc and runtime.updated_at_utc and runtime.accessed_at_utc
    assert runtime.created_at_utc <= runtime.updated_at_utc <= runtime.accessed_at_utc

    listed = {r.name: r for r in admin.list_queues_runtime_properties()}
    assert listed["orders"].active_message_count == 3
    assert listed["retry3"].total_message_count == 0

    # Receiving the dead letters changes the count.
    with sb.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                               receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as dlq:
        assert len(dlq.receive_messages(max_message_count=5, max_wait_time=5)) == 2
    assert admin.get_queue_runtime_properties("orders").dead_letter_message_count == 0


def test_topic_and_subscription_lifecycle(admin: ServiceBusAdministrationClient, sb: ServiceBusClient) -> None:
    topic = admin.create_topic("alerts", default_message_time_to_live=datetime.timedelta(minutes=30),
                               max_message_size_in_kilobytes=128)
    assert topic.name == "alerts"
    assert topic.default_message_time_to_live == datetime.timedelta(minutes=30)
    assert topic.max_message_size_in_kilobytes == 128

    sub = admin.create_subscription("alerts", "ops", lock_duration=datetime.timedelta(seconds=30),
                                    max_delivery_count=4, dead_lettering_on_filter_evaluation_exceptions=False)
    assert (sub.name, sub.lock_duration, sub.max_delivery_count) == ("ops", 30 * SECOND, 4)
    assert sub.dead_lettering_on_filter_evaluation_exceptions is False
    admin.create_subscription("alerts", "audit")

    assert [s.name for s in admin.list_subscriptions("alerts")] == ["ops", "audit"]
    # A new subscription has the catch-all $Default rule.
    rules = list(admin.list_rules("alerts", "ops"))
    assert [r.name for r in rules] == ["$Default"]
    assert isinstance(rules[0].filter, TrueRuleFilter)

    with sb.get_topic_sender("alerts") as sender:
        sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    runtime = admin.get_topic_runtime_properties("alerts")
    assert runtime.subscription_count == 2
    assert runtime.scheduled_message_count == 0
    sub_runtime = admin.get_subscription_runtime_properties("alerts", "ops")
    assert (sub_runtime.active_message_count, sub_runtime.total_message_count) == (2, 2)
    assert {r.name: r.active_message_count for r in admin.list_subscriptions_runtime_properties("alerts")} == {
        "ops": 2, "audit": 2}
    assert [t.name for t in admin.list_topics_runtime_properties() if t.name == "alerts"] == ["alerts"]

    sub.max_delivery_count = 8
    admin.update_subscription("alerts", sub)
    assert admin.get_subscription("alerts", "ops").max_delivery_count == 8

    topic = admin.get_topic("alerts")
    topic.default_message_time_to_live = datetime.timedelta(minutes=5)
    admin.update_topic(topic)
    assert admin.get_topic("alerts").default_message_time_to_live == datetime.timedelta(minutes=5)
    assert "alerts" in [t.name for t in admin.list_topics()]

    admin.delete_subscription("alerts", "audit")
    assert [s.name for s in admin.list_subscriptions("alerts")] == ["ops"]
    with pytest.raises(ResourceNotFoundError):
        admin.get_subscription("alerts", "audit")
    admin.delete_topic("alerts")
    with pytest.raises(ResourceNotFoundError):
        admin.get_topic("alerts")


def test_rules_of_every_kind_filter_amqp_delivery(admin: ServiceBusAdministrationClient,
                                                   sb: ServiceBusClient) -> None:
    admin.create_subscription("events", "red")
    admin.delete_rule("events", "red", "$Default")
    admin.create_rule("events", "red", "only-red", filter=SqlRuleFilter("color = 'red'"),
                      action=SqlRuleAction("SET tagged = 'yes'"))
    admin.create_rule("events", "red", "by-correlation",
                      filter=CorrelationRuleFilter(correlation_id="c-1", label="L", properties={"kind": "x", "n": 5}))
    admin.create_rule("events", "red", "never", filter=FalseRuleFilter())

    rules = {r.name: r for r in admin.list_rules("events", "red")}
    assert sorted(rules) == ["by-correlation", "never", "only-red"]
    assert isinstance(rules["only-red"].filter, SqlRuleFilter)
    assert rules["only-red"].filter.sql_expression == "color = 'red'"
    action = rules["only-red"].action
    assert action is not None and action.sql_expression == "SET tagged = 'yes'"
    assert isinstance(rules["never"].filter, FalseRuleFilter)
    corr = admin.get_rule("events", "red", "by-correlation").filter
    assert isinstance(corr, CorrelationRuleFilter)
    assert (corr.correlation_id, corr.label) == ("c-1", "L")
    assert dict(corr.properties or {}) == {"kind": "x", "n": 5}

    with sb.get_topic_sender("events") as sender:
        sender.send_messages([
            ServiceBusMessage("red", application_properties={"color": "red"}),
            ServiceBusMessage("blue", application_properties={"color": "blue"}),
            ServiceBusMessage("corr", correlation_id="c-1", subject="L", application_properties={"kind": "x", "n": 5}),
        ])
    with sb.get_subscription_receiver("events", "red", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
        got = {str(m): m for m in r.receive_messages(max_message_count=10, max_wait_time=3)}
    assert sorted(got) == ["corr", "red"]
    assert (got["red"].application_properties or {})[b"tagged"] == b"yes"

    rule = admin.get_rule("events", "red", "only-red")
    rule.filter = SqlRuleFilter("color = 'blue'")
    admin.update_rule("events", "red", rule)
    updated = admin.get_rule("events", "red", "only-red").filter
    assert isinstance(updated, SqlRuleFilter) and updated.sql_expression == "color = 'blue'"
    with sb.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage("red", application_properties={"color": "red"}),
                              ServiceBusMessage("blue", application_properties={"color": "blue"})])
    assert receive_all(sb, "events", "red") == ["blue"]

    admin.delete_rule("events", "red", "never")
    assert "never" not in [r.name for r in admin.list_rules("events", "red")]
    with pytest.raises(ResourceNotFoundError):
        admin.get_rule("events", "red", "never")
    with pytest.raises(ResourceExistsError):
        admin.create_rule("events", "red", "only-red", filter=TrueRuleFilter())
    with pytest.raises(HttpResponseError) as bad:
        admin.create_rule("events", "red", "broken", filter=SqlRuleFilter("color = = 'red'"))
    assert bad.value.status_code == 400


def test_forward_to_created_through_admin(admin: ServiceBusAdministrationClient, sb: ServiceBusClient) -> None:
    admin.create_queue("inbox", forward_to="retry3")
    assert str(admin.get_queue("inbox").forward_to).endswith("/retry3")
    with sb.get_queue_sender("inbox") as sender:
        sender.send_messages(ServiceBusMessage("moved"))
    assert receive_all(sb, "retry3") == ["moved"]


def test_errors_carry_service_bus_status_and_detail(admin: ServiceBusAdministrationClient,
                                                    emulator: Emulator) -> None:
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("nope")
    with pytest.raises(ResourceNotFoundError):
        admin.get_topic_runtime_properties("nope")
    with pytest.raises(ResourceNotFoundError):
        admin.create_subscription("no-such-topic", "s")
    with pytest.raises(ResourceExistsError) as exists:
        admin.create_queue("orders")
    response = exists.value.response
    assert response is not None
    assert "<Code>409</Code>" in response.text()
    assert "already exists" in response.text()
    with pytest.raises(HttpResponseError) as bad_name:
        admin.create_queue("bad name!")
    assert bad_name.value.status_code == 400
    assert "invalid" in bad_name.value.message
    with pytest.raises(HttpResponseError) as too_long:
        admin.create_queue("long-lock", lock_duration=datetime.timedelta(minutes=6))
    assert too_long.value.status_code == 400
    with pytest.raises(HttpResponseError) as no_target:
        admin.create_queue("fwd", forward_to="missing-queue")
    assert no_target.value.status_code == 400
    with pytest.raises(ResourceNotFoundError):
        admin.delete_queue("nope")

    assert emulator.admin_connection_string is not None
    wrong_key = emulator.admin_connection_string.replace("SAS_KEY_VALUE", "wrong")
    with ServiceBusAdministrationClient.from_connection_string(wrong_key, connection_verify=emulator.ca_path) as bad:
        with pytest.raises(ClientAuthenticationError):
            bad.get_queue("orders")


def test_list_pages_through_many_queues(admin: ServiceBusAdministrationClient) -> None:
    for i in range(7):
        admin.create_queue(f"page-{i}")
    pages = [list(page) for page in admin.list_queues(max_page_size=4).by_page()]
    names = [q.name for page in pages for q in page]
    assert all(len(page) <= 4 for page in pages) and len(pages) >= 4
    assert sorted(n for n in names if n.startswith("page-")) == [f"page-{i}" for i in range(7)]
    standard = len(STANDARD_TOPOLOGY["UserConfig"]["Namespaces"][0]["Queues"])
    assert len(names) == len(set(names)) == standard + 7
