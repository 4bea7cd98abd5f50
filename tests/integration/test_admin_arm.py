"""The Azure Resource Manager subset on the admin port: infra/provision.py (azure-mgmt-servicebus, the code
path it runs against Azure) builds the project's topology in an emulator started with an empty config, a
second run changes nothing, and the ARM operations (get, list, delete) behave like ARM's."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import ServiceBusAdministrationClient, SqlRuleFilter

from sbemulator import Emulator
from sbemulator.config import load_config
from tests.fixtures.process import REPO_ROOT

TOPOLOGY = REPO_ROOT / "infra" / "servicebus.json"
SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def empty_emulator() -> Iterator[Emulator]:
    with Emulator(config=None, in_memory=True) as emu:
        yield emu


def run_provision(emu: Emulator, *, ca_env: bool = False) -> subprocess.CompletedProcess[str]:
    """The real script as a user runs it; the CA comes from --ca-cert or from REQUESTS_CA_BUNDLE."""
    trust = [] if ca_env else ["--ca-cert", str(emu.ca_path)]
    env = {**os.environ, "REQUESTS_CA_BUNDLE": str(emu.ca_path)} if ca_env else None
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "provision.py"), "--topology", str(TOPOLOGY),
         "--subscription-id", SUBSCRIPTION_ID, "--resource-group", "rg-local", "--namespace", "sb-prod-name",
         "--base-url", str(emu.admin_url), "--credential", "sas", "--sas-key", emu.key, *trust],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False, env=env,
    )


def _seconds(duration: object) -> float:
    """A duration the SDK read back (typed ``timedelta | str | None``), in seconds."""
    assert isinstance(duration, datetime.timedelta), duration
    return duration.total_seconds()


def applied_line() -> str:
    """What provision.py prints for the whole topology: counted from its own plan, so a topology that
    grows (a queue added for a new pattern) does not break these tests."""
    sys.path.insert(0, str(REPO_ROOT / "infra"))
    try:
        import provision  # type: ignore[import-not-found]  # infra/provision.py, put on the path above
    finally:
        sys.path.pop(0)
    return f"applied {len(provision.plan_from_topology(provision.load_topology(TOPOLOGY)))} operations"


def snapshot(admin: ServiceBusAdministrationClient) -> dict[str, Any]:
    """Everything the admin client reports about the topology, including the update times."""
    out: dict[str, Any] = {}
    for q in admin.list_queues():
        out[f"queue:{q.name}"] = (q.lock_duration, q.max_delivery_count, q.requires_session,
                                  q.default_message_time_to_live, q.dead_lettering_on_message_expiration,
                                  q.duplicate_detection_history_time_window, q.requires_duplicate_detection,
                                  admin.get_queue_runtime_properties(q.name).updated_at_utc)
    for t in admin.list_topics():
        out[f"topic:{t.name}"] = (t.default_message_time_to_live, t.requires_duplicate_detection,
                                  admin.get_topic_runtime_properties(t.name).updated_at_utc)
        for s in admin.list_subscriptions(t.name):
            rules = [(r.name, getattr(r.filter, "sql_expression", None)) for r in admin.list_rules(t.name, s.name)]
            out[f"sub:{t.name}/{s.name}"] = (
                s.lock_duration, s.max_delivery_count, s.requires_session, s.default_message_time_to_live,
                s.dead_lettering_on_message_expiration, rules,
                admin.get_subscription_runtime_properties(t.name, s.name).updated_at_utc)
    return out


def test_provision_builds_the_topology_and_a_second_run_changes_nothing(empty_emulator: Emulator) -> None:
    emu = empty_emulator
    assert emu.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emu.admin_connection_string, connection_verify=emu.ca_path
    ) as admin:
        assert list(admin.list_queues()) == [] and list(admin.list_topics()) == []

        first = run_provision(emu)
        assert first.returncode == 0, first.stderr
        expected = load_config(TOPOLOGY)
        assert sorted(q.name for q in admin.list_queues()) == sorted(q.name for q in expected.queues)
        for q in expected.queues:
            got = admin.get_queue(q.name)
            assert _seconds(got.lock_duration) == q.lock_duration
            assert got.max_delivery_count == q.max_delivery_count
            assert got.requires_session == q.requires_session
            assert _seconds(got.default_message_time_to_live) == q.default_message_ttl
            assert got.dead_lettering_on_message_expiration == q.dead_lettering_on_message_expiration
        for t in expected.topics:
            assert _seconds(admin.get_topic(t.name).default_message_time_to_live) == t.default_message_ttl
            assert [s.name for s in admin.list_subscriptions(t.name)] == [s.name for s in t.subscriptions]
            for s in t.subscriptions:
                got_sub = admin.get_subscription(t.name, s.name)
                assert got_sub.max_delivery_count == s.max_delivery_count
                assert _seconds(got_sub.lock_duration) == s.lock_duration
                # As in Azure: the first rule created through ARM replaces the automatic $Default.
                rules = list(admin.list_rules(t.name, s.name))
                assert [r.name for r in rules] == [r.name for r in s.rules]
                assert [getattr(r.filter, "sql_expression", None) for r in rules] == [r.sql_expression for r in s.rules]

        before = snapshot(admin)
        second = run_provision(emu)
        assert second.returncode == 0, second.stderr
        assert applied_line() in second.stdout
        assert snapshot(admin) == before

    # The provisioned pipeline routes by priority over AMQP straight away.
    with ServiceBusClient.from_connection_string(emu.connection_string) as sb:
        with sb.get_topic_sender("messages") as sender:
            sender.send_messages([ServiceBusMessage("h", application_properties={"Priority": "High"}),
                                  ServiceBusMessage("l", application_properties={"Priority": "Low"})])
        with sb.get_subscription_receiver("messages", "highPriority",
                                          receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
            assert [str(m) for m in r.receive_messages(max_message_count=5, max_wait_time=3)] == ["h"]


def test_provision_trusts_the_ca_through_requests_ca_bundle(empty_emulator: Emulator) -> None:
    result = run_provision(empty_emulator, ca_env=True)
    assert result.returncode == 0, result.stderr
    assert applied_line() in result.stdout
    assert "leveling" in empty_emulator.call(empty_emulator.broker.entity_paths)


def test_provision_without_trusting_the_ca_fails_cleanly(empty_emulator: Emulator) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "infra" / "provision.py"), "--subscription-id", SUBSCRIPTION_ID,
         "--resource-group", "rg", "--namespace", "ns", "--base-url", str(empty_emulator.admin_url),
         "--credential", "sas", "--sas-key", empty_emulator.key],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr or "SSLError" in result.stderr


@pytest.fixture
def mgmt(emulator: Emulator) -> Any:
    from azure.mgmt.servicebus import ServiceBusManagementClient

    sys.path.insert(0, str(REPO_ROOT / "infra"))
    try:
        import provision
    finally:
        sys.path.pop(0)
    client: ServiceBusManagementClient = provision.build_client(
        SUBSCRIPTION_ID, credential_kind="sas", sas_key=emulator.key, base_url=emulator.admin_url,
        ca_cert=emulator.ca_path)
    return client


def test_arm_get_list_delete_of_every_resource(mgmt: Any, emulator: Emulator) -> None:
    rg, ns = "rg", "any-namespace-name"
    namespace = mgmt.namespaces.begin_create_or_update(
        rg, ns, {"location": "westeurope", "sku": {"name": "Standard", "tier": "Standard"},
                 "properties": {"disableLocalAuth": True}}).result()
    assert namespace.name == ns and namespace.properties.provisioning_state == "Succeeded"
    assert mgmt.namespaces.get(rg, ns).location == "westeurope"
    assert [n.name for n in mgmt.namespaces.list_by_resource_group(rg)] == ["sbemulatorns"]
    assert [n.name for n in mgmt.namespaces.list()] == ["sbemulatorns"]

    queue = mgmt.queues.create_or_update(rg, ns, "arm-q", {"properties": {
        "lockDuration": "PT30S", "maxDeliveryCount": 4, "requiresSession": False}})
    assert queue.name == "arm-q"
    assert queue.properties.lock_duration == datetime.timedelta(seconds=30)
    assert queue.properties.max_delivery_count == 4
    assert queue.id.endswith(f"/namespaces/{ns}/queues/arm-q")
    assert "arm-q" in [q.name for q in mgmt.queues.list_by_namespace(rg, ns)]
    assert mgmt.queues.get(rg, ns, "arm-q").properties.max_delivery_count == 4

    mgmt.topics.create_or_update(rg, ns, "arm-t", {"properties": {"defaultMessageTimeToLive": "PT10M"}})
    assert mgmt.topics.get(rg, ns, "arm-t").properties.default_message_time_to_live == datetime.timedelta(minutes=10)
    assert "arm-t" in [t.name for t in mgmt.topics.list_by_namespace(rg, ns)]
    mgmt.subscriptions.create_or_update(rg, ns, "arm-t", "arm-s", {"properties": {"maxDeliveryCount": 2}})
    assert [s.name for s in mgmt.subscriptions.list_by_topic(rg, ns, "arm-t")] == ["arm-s"]
    rule = mgmt.rules.create_or_update(rg, ns, "arm-t", "arm-s", "corr", {"properties": {
        "filterType": "CorrelationFilter", "correlationFilter": {"label": "x", "properties": {"k": "v"}},
        "action": {"sqlExpression": "SET seen = 'yes'"}}})
    assert rule.properties.correlation_filter.label == "x"
    assert rule.properties.correlation_filter.properties == {"k": "v"}
    assert [r.name for r in mgmt.rules.list_by_subscriptions(rg, ns, "arm-t", "arm-s")] == ["corr"]
    assert mgmt.rules.get(rg, ns, "arm-t", "arm-s", "corr").properties.action.sql_expression == "SET seen = 'yes'"

    # The same entities through the Service Bus admin API.
    assert emulator.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emulator.admin_connection_string, connection_verify=emulator.ca_path
    ) as admin:
        admin.create_rule("arm-t", "arm-s", "extra", filter=SqlRuleFilter("1=1"))
        assert admin.get_queue("arm-q").max_delivery_count == 4

    mgmt.rules.delete(rg, ns, "arm-t", "arm-s", "corr")
    assert [r.name for r in mgmt.rules.list_by_subscriptions(rg, ns, "arm-t", "arm-s")] == ["extra"]
    mgmt.subscriptions.delete(rg, ns, "arm-t", "arm-s")
    mgmt.topics.delete(rg, ns, "arm-t")
    mgmt.queues.delete(rg, ns, "arm-q")
    mgmt.queues.delete(rg, ns, "arm-q")  # deleting what is gone is not an error in ARM
    with pytest.raises(ResourceNotFoundError):
        mgmt.queues.get(rg, ns, "arm-q")
    with pytest.raises(ResourceNotFoundError):
        mgmt.topics.get(rg, ns, "arm-t")


def test_arm_rejects_bad_input_with_arm_errors(mgmt: Any) -> None:
    rg, ns = "rg", "ns"
    with pytest.raises(HttpResponseError) as bad_duration:
        mgmt.queues.create_or_update(rg, ns, "q1", {"properties": {"lockDuration": "ten seconds"}})
    assert bad_duration.value.status_code == 400
    error = bad_duration.value.error
    assert error is not None and error.code == "BadRequest"
    assert "lockDuration" in str(error.message)
    with pytest.raises(HttpResponseError) as bad_name:
        mgmt.queues.create_or_update(rg, ns, "bad_name_", {"properties": {}})
    assert bad_name.value.status_code == 400
    with pytest.raises(ResourceNotFoundError):
        mgmt.subscriptions.create_or_update(rg, ns, "no-topic", "s", {"properties": {}})
    with pytest.raises(HttpResponseError) as bad_filter:
        mgmt.rules.create_or_update(rg, ns, "events", "all", "r", {"properties": {
            "filterType": "SqlFilter", "sqlFilter": {"sqlExpression": "a = = 1"}}})
    assert bad_filter.value.status_code == 400
