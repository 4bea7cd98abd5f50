"""SAS rights, entity-level rules and put-token for missing entities, as the SDKs' live tests expect.

"Service Bus authentication and authorization with Shared Access Signatures": a rule has the rights
Listen, Send and Manage (Manage implies the other two); a rule on a queue or topic is valid for that
entity only. azure-servicebus's own live tests (tests/test_sb_client.py,
test_sb_client_readonly_credentials / test_sb_client_writeonly_credentials /
test_sb_client_incorrect_queue_conn_str) assert that a Listen-only key receives and its sender raises
ServiceBusAuthorizationError, that a Send-only key sends and its receiver fails, and that a queue's
own rule opens that queue only.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime
import time
from collections.abc import Iterator

import pytest
from azure.core.credentials import AzureSasCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import (
    ServiceBusAuthenticationError,
    ServiceBusAuthorizationError,
    ServiceBusError,
)
from azure.servicebus.management import AccessRights, AuthorizationRule, ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.admin import arm_auth
from sbemulator.auth import DEFAULT_KEY, DEFAULT_KEY_NAME, LISTEN, SEND, sign
from sbemulator.config import parse_config
from sbemulator.descriptions import AuthorizationRuleConfig
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive
from tests.integration.test_admin_hardening import API, ARM_QUEUE, arm

LISTEN_KEY, SEND_KEY, MANAGE_KEY = "listen-secret", "send-secret", "manage-secret"
QUEUE_RULE_KEY, TOPIC_RULE_KEY = "queue-rule-secret", "topic-rule-secret"


def _config():
    raw = copy.deepcopy(STANDARD_TOPOLOGY)
    raw["UserConfig"]["Namespaces"][0]["SasKeys"] = [
        {"KeyName": "Listener", "Key": LISTEN_KEY, "Rights": ["Listen"]},
        {"KeyName": "Sender", "Key": SEND_KEY, "Rights": ["Send"]},
        {"KeyName": "Manager", "Key": MANAGE_KEY, "Rights": ["Manage"]},
        {"KeyName": "Everything", "Key": "all-secret"},
    ]
    ns = parse_config(raw, "<test>")
    # Entity-level rules (AuthorizationRules of the queue's and the topic's descriptions).
    queues = tuple(
        dataclasses.replace(q, authorization_rules=(
            AuthorizationRuleConfig("orders-rw", QUEUE_RULE_KEY, "orders-second", (LISTEN, SEND)),
            AuthorizationRuleConfig("orders-listen", "orders-listen-secret", "", (LISTEN,)),
        )) if q.name == "orders" else q
        for q in ns.queues
    )
    topics = tuple(
        dataclasses.replace(t, authorization_rules=(
            AuthorizationRuleConfig("events-rw", TOPIC_RULE_KEY, "", (LISTEN, SEND)),))
        if t.name == "events" else t
        for t in ns.topics
    )
    return dataclasses.replace(ns, queues=queues, topics=topics)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(config=_config(), in_memory=True) as emulator:
        yield emulator


def _conn(emu: Emulator, key_name: str, key: str, entity: str | None = None) -> str:
    conn = (f"Endpoint=sb://127.0.0.1:{emu.port};SharedAccessKeyName={key_name};SharedAccessKey={key};"
            "UseDevelopmentEmulator=true;")
    return conn + (f"EntityPath={entity};" if entity else "")


def _send(client: ServiceBusClient, queue: str = "orders", body: str = "x") -> None:
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(body))


# --- rights (issue item 1) ---------------------------------------------------------------------------
def test_a_listen_only_key_receives_but_its_sender_is_refused_with_an_authorization_error(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as root:
        _send(root, body="for the listener")
    with ServiceBusClient.from_connection_string(_conn(emu, "Listener", LISTEN_KEY), retry_total=0) as client:
        with client.get_queue_receiver("orders") as receiver:
            got = receive(receiver, 1)
            assert [str(m) for m in got] == ["for the listener"]
            receiver.complete_message(got[0])
            assert receiver.peek_messages(max_message_count=5) == []
        with pytest.raises(ServiceBusAuthorizationError) as raised:
            _send(client)
    assert "'Send' claim(s) are required" in str(raised.value)


def test_a_send_only_key_sends_and_schedules_but_its_receiver_is_refused(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(_conn(emu, "Sender", SEND_KEY), retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("sent"))
            # scheduling goes over $management and needs Send, which this key has
            [number] = sender.schedule_messages(
                ServiceBusMessage("later"), datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=10))
            sender.cancel_scheduled_messages(number)
        with pytest.raises(ServiceBusAuthorizationError) as raised:
            with client.get_queue_receiver("orders") as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=1)
    assert "'Listen' claim(s) are required" in str(raised.value)
    with ServiceBusClient.from_connection_string(emu.connection_string) as root:
        with root.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["sent"]


def test_manage_implies_listen_and_send(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(_conn(emu, "Manager", MANAGE_KEY)) as client:
        _send(client, body="managed")
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["managed"]


def test_a_key_without_rights_in_the_config_file_keeps_every_right(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(_conn(emu, "Everything", "all-secret")) as client:
        _send(client, body="old config")
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["old config"]


def test_async_clients_meet_the_same_rights(emu: Emulator) -> None:
    async def scenario() -> None:
        async with AsyncServiceBusClient.from_connection_string(_conn(emu, "Listener", LISTEN_KEY),
                                                               retry_total=0) as client:
            async with client.get_queue_receiver("orders") as receiver:
                assert await receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
            with pytest.raises(ServiceBusAuthorizationError):
                async with client.get_queue_sender("orders") as sender:
                    await sender.send_messages(ServiceBusMessage("no"))
        async with AsyncServiceBusClient.from_connection_string(_conn(emu, "Sender", SEND_KEY),
                                                               retry_total=0) as client:
            async with client.get_queue_sender("orders") as sender:
                await sender.send_messages(ServiceBusMessage("yes"))
            with pytest.raises(ServiceBusError):
                async with client.get_queue_receiver("orders") as receiver:
                    await receiver.receive_messages(max_message_count=1, max_wait_time=1)

    asyncio.run(scenario())


def test_the_management_plane_needs_manage(emu: Emulator) -> None:
    admin_conn = emu.admin_connection_string
    assert admin_conn is not None
    endpoint = admin_conn.split(";", 1)[0]
    for name, key in (("Listener", LISTEN_KEY), ("Sender", SEND_KEY)):
        conn = f"{endpoint};SharedAccessKeyName={name};SharedAccessKey={key};"
        with ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=emu.ca_path) as adm:
            with pytest.raises((ClientAuthenticationError, HttpResponseError)) as raised:
                adm.get_queue("orders")
            # Service Bus's text for a read (azservicebus admin_client_test.go, TestAdminClient_LackPermissions_Queue)
            assert "Manage,EntityRead claims required for this operation" in str(raised.value)
    conn = f"{endpoint};SharedAccessKeyName=Manager;SharedAccessKey={MANAGE_KEY};"
    with ServiceBusAdministrationClient.from_connection_string(conn, connection_verify=emu.ca_path) as adm:
        assert adm.get_queue("orders").name == "orders"


def test_the_arm_surface_needs_manage_too(emu: Emulator) -> None:
    root = f"https://127.0.0.1:{emu.admin_port}/"
    expiry = int(time.time()) + 300
    listen = "Bearer " + arm_auth.bearer_token(root, "Listener", LISTEN_KEY, expiry)
    status, body = arm(emu, "GET", ARM_QUEUE + API, listen)
    assert (status, body["error"]["code"]) == (401, "AuthorizationFailed")
    assert "'Manage' claim(s) are required" in body["error"]["message"]
    manage = "Bearer " + arm_auth.bearer_token(root, "Manager", MANAGE_KEY, expiry)
    assert arm(emu, "GET", ARM_QUEUE + API, manage)[0] == 200


# --- entity-level rules, the authorization side (issue item 2) ----------------------------------------
def test_a_queue_rule_with_entity_path_sends_and_receives_there_only(emu: Emulator) -> None:
    conn = _conn(emu, "orders-rw", QUEUE_RULE_KEY, entity="orders")
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
        _send(client, body="by the queue's rule")
        with client.get_queue_receiver("orders", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["by the queue's rule"]
    # the same rule means nothing to another queue (the SDK refuses a different queue name with an
    # EntityPath connection string itself, so the token goes in by hand)
    token = sign(f"sb://127.0.0.1:{emu.port}/retry3", "orders-rw", QUEUE_RULE_KEY, int(time.time()) + 600)
    with ServiceBusClient(f"127.0.0.1:{emu.port}", AzureSasCredential(token), use_tls=False,
                          retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send(client, "retry3")


def test_a_rule_added_through_the_management_api_opens_its_queue(emu: Emulator) -> None:
    """The SDK's live tests create entity rules through the management plane (its preparers), then use
    the rule's connection string."""
    admin_conn = emu.admin_connection_string
    assert admin_conn is not None
    with ServiceBusAdministrationClient.from_connection_string(admin_conn, connection_verify=emu.ca_path) as adm:
        adm.create_queue("ruled", authorization_rules=[AuthorizationRule(
            type="SharedAccessAuthorizationRule", key_name="ruled-send", primary_key="ruled-primary-key",
            secondary_key="ruled-secondary-key", rights=[AccessRights.send.value])])
    conn = _conn(emu, "ruled-send", "ruled-primary-key", entity="ruled")
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
        _send(client, "ruled", body="through a rule the API added")
        with pytest.raises(ServiceBusAuthorizationError):
            with client.get_queue_receiver("ruled") as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=1)


def test_a_queue_rule_signed_with_its_secondary_key_is_valid(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(_conn(emu, "orders-rw", "orders-second", entity="orders")) as client:
        _send(client, body="secondary")


def test_a_queue_rule_carries_its_own_rights(emu: Emulator) -> None:
    conn = _conn(emu, "orders-listen", "orders-listen-secret", entity="orders")
    with ServiceBusClient.from_connection_string(conn, retry_total=0) as client:
        with client.get_queue_receiver("orders") as receiver:
            assert receiver.receive_messages(max_message_count=1, max_wait_time=1) == []
        with pytest.raises(ServiceBusAuthorizationError):
            _send(client)


def test_a_topic_rule_opens_the_topic_and_its_subscriptions(emu: Emulator) -> None:
    with ServiceBusClient.from_connection_string(_conn(emu, "events-rw", TOPIC_RULE_KEY, entity="events")) as client:
        with client.get_topic_sender("events") as sender:
            sender.send_messages(ServiceBusMessage("to the topic"))
        with client.get_subscription_receiver("events", "all",
                                              receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["to the topic"]


# --- put-token for an entity that does not exist (issue item 3) ----------------------------------------
def test_a_put_token_for_a_missing_entity_is_refused_before_the_attach(emu: Emulator) -> None:
    # FACTS: the SDK raises ServiceBusAuthenticationError for a put-token answered with 404.
    with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        with pytest.raises(ServiceBusAuthenticationError):
            _send(client, "no-such-queue")
        with pytest.raises(ServiceBusAuthenticationError):
            with client.get_queue_receiver("no-such-queue", sub_queue="deadletter") as receiver:
                receiver.receive_messages(max_message_count=1, max_wait_time=1)
        with pytest.raises(ServiceBusAuthenticationError):
            with client.get_subscription_receiver("events", "no-such-subscription") as receiver:
                receiver.peek_messages()


def test_a_bad_token_for_a_missing_entity_is_still_a_401() -> None:
    # Unit-level view of the same exchange: the reply's status is what differs (the SDK raises the same
    # exception for both), so it is asserted on the put-token outcome itself.
    from sbemulator.amqp.message import ParsedMessage
    from sbemulator.amqp.performatives import Properties
    from sbemulator.auth import SasValidator
    from sbemulator.gateway.cbs import handle_put_token

    def request(audience: str, key: str) -> ParsedMessage:
        token = sign(audience, DEFAULT_KEY_NAME, key, int(time.time()) + 600)
        return ParsedMessage(properties=Properties(message_id="1"),
                             application_properties={"operation": "put-token", "type": "jwt", "name": audience},
                             body_sections=[(0x77, token)])

    validator = SasValidator({DEFAULT_KEY_NAME: DEFAULT_KEY})
    exists = {"orders", "orders/$deadletterqueue"}.__contains__
    now = time.time()
    missing = handle_put_token(request("sb://h/nope", DEFAULT_KEY), validator, now, exists)
    assert (missing.status_code, missing.description) == (404, "The messaging entity 'sb://h/nope' could not be found.")
    assert handle_put_token(request("sb://h/nope", "wrong"), validator, now, exists).status_code == 401
    for audience, status in (("sb://h/orders/$management", 202), ("sb://h/nope/$management", 404),
                             ("sb://h/orders/$DeadLetterQueue", 202), ("sb://h/", 202)):
        assert handle_put_token(request(audience, DEFAULT_KEY), validator, now, exists).status_code == status
