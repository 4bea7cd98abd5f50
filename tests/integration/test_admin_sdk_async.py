"""The unchanged async ServiceBusAdministrationClient (azure.servicebus.management.aio, aiohttp transport)
against the emulator's HTTPS port: every operation once, plus runtime counts from the async data plane."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator

import pytest
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.servicebus import ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.aio.management import ServiceBusAdministrationClient
from azure.servicebus.management import CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter, TrueRuleFilter

from sbemulator import Emulator


@pytest.fixture
async def admin(emulator: Emulator) -> AsyncIterator[ServiceBusAdministrationClient]:
    assert emulator.admin_connection_string is not None
    async with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as client:
        yield client


async def names(pager) -> list[str]:
    return [item.name async for item in pager]


async def test_async_namespace_and_queue_operations(admin: ServiceBusAdministrationClient,
                                                    emulator: Emulator) -> None:
    assert (await admin.get_namespace_properties()).name == "sbemulatorns"
    created = await admin.create_queue("aq", max_delivery_count=6, requires_session=True)
    assert (created.max_delivery_count, created.requires_session) == (6, True)
    queue = await admin.get_queue("aq")
    queue.max_delivery_count = 3
    await admin.update_queue(queue)
    assert (await admin.get_queue("aq")).max_delivery_count == 3
    assert "aq" in await names(admin.list_queues())
    assert "aq" in await names(admin.list_queues_runtime_properties())

    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    async with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        async with sb.get_queue_sender("aq") as sender:
            await sender.send_messages([ServiceBusMessage(f"m{i}", session_id="s") for i in range(3)])
            await sender.schedule_messages(ServiceBusMessage("later", session_id="s"), later)
    runtime = await admin.get_queue_runtime_properties("aq")
    assert (runtime.active_message_count, runtime.scheduled_message_count, runtime.total_message_count) == (3, 1, 4)

    await admin.delete_queue("aq")
    with pytest.raises(ResourceNotFoundError):
        await admin.get_queue("aq")
    with pytest.raises(ResourceExistsError):
        await admin.create_queue("orders")
    with pytest.raises(HttpResponseError) as bad:
        await admin.create_queue("-leading-dash")
    assert bad.value.status_code == 400


async def test_async_topic_subscription_and_rule_operations(admin: ServiceBusAdministrationClient,
                                                            emulator: Emulator) -> None:
    await admin.create_topic("at")
    topic = await admin.get_topic("at")
    topic.default_message_time_to_live = datetime.timedelta(minutes=3)
    await admin.update_topic(topic)
    assert (await admin.get_topic("at")).default_message_time_to_live == datetime.timedelta(minutes=3)
    assert "at" in await names(admin.list_topics())
    assert "at" in await names(admin.list_topics_runtime_properties())

    await admin.create_subscription("at", "s1", max_delivery_count=2)
    sub = await admin.get_subscription("at", "s1")
    sub.max_delivery_count = 5
    await admin.update_subscription("at", sub)
    assert (await admin.get_subscription("at", "s1")).max_delivery_count == 5
    assert await names(admin.list_subscriptions("at")) == ["s1"]

    await admin.create_rule("at", "s1", "sql", filter=SqlRuleFilter("n > 1"), action=SqlRuleAction("SET seen = 1"))
    await admin.create_rule("at", "s1", "corr", filter=CorrelationRuleFilter(properties={"k": "v"}))
    await admin.delete_rule("at", "s1", "$Default")
    rule = await admin.get_rule("at", "s1", "sql")
    assert isinstance(rule.filter, SqlRuleFilter) and rule.filter.sql_expression == "n > 1"
    rule.filter = SqlRuleFilter("n > 2")
    await admin.update_rule("at", "s1", rule)
    updated = (await admin.get_rule("at", "s1", "sql")).filter
    assert isinstance(updated, SqlRuleFilter) and updated.sql_expression == "n > 2"
    assert sorted(await names(admin.list_rules("at", "s1"))) == ["corr", "sql"]

    async with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        async with sb.get_topic_sender("at") as sender:
            await sender.send_messages([
                ServiceBusMessage("3", application_properties={"n": 3}),
                ServiceBusMessage("1", application_properties={"n": 1}),
                ServiceBusMessage("kv", application_properties={"k": "v"}),
            ])
        async with sb.get_subscription_receiver("at", "s1") as receiver:
            msgs = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
            await receiver.dead_letter_message(msgs[0], reason="async-test")
    runtime = await admin.get_subscription_runtime_properties("at", "s1")
    assert (runtime.active_message_count, runtime.dead_letter_message_count) == (1, 1)
    assert {r.name: r.total_message_count async for r in admin.list_subscriptions_runtime_properties("at")} == {
        "s1": 2}
    assert (await admin.get_topic_runtime_properties("at")).subscription_count == 1

    await admin.delete_rule("at", "s1", "corr")
    with pytest.raises(ResourceNotFoundError):
        await admin.get_rule("at", "s1", "corr")
    await admin.create_rule("at", "s1", "all", filter=TrueRuleFilter())
    await admin.delete_subscription("at", "s1")
    with pytest.raises(ResourceNotFoundError):
        await admin.get_subscription_runtime_properties("at", "s1")
    await admin.delete_topic("at")
    with pytest.raises(ResourceNotFoundError):
        await admin.get_topic("at")


async def test_async_wrong_key_is_rejected(emulator: Emulator) -> None:
    assert emulator.admin_connection_string is not None
    wrong = emulator.admin_connection_string.replace("SAS_KEY_VALUE", "not-the-key")
    async with ServiceBusAdministrationClient.from_connection_string(wrong, connection_verify=emulator.ca_path) as c:
        with pytest.raises(ClientAuthenticationError):
            await c.get_namespace_properties()
