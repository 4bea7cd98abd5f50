"""infra/provision.py: the pure plan and the script end to end against a fake ARM.

A real Azure Resource Manager cannot run here (no Azure subscription, no network), so the end-to-end
tests put a fake azure-core HttpTransport under the real ``ServiceBusManagementClient``: the requests
are built by the real SDK and the real policies, only the wire is replaced. The fake records every
request and answers with ARM-shaped JSON (the PUT body echoed back with ``provisioningState``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from azure.core.pipeline.transport import HttpTransport
from azure.core.rest._http_response_impl import HttpResponseImpl

from infra import provision
from infra.provision import PlannedOperation, TopologyError, load_topology, plan_from_topology

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY_PATH = ROOT / "infra" / "servicebus.json"
SUB = "00000000-0000-0000-0000-000000000001"
RG = "rg-test"
NS = "sb-test-ns"
NS_PATH = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.ServiceBus/namespaces/{NS}"


@pytest.fixture
def topology() -> dict:
    return load_topology(TOPOLOGY_PATH)


def _minimal(**namespace: object) -> dict:
    return {
        "UserConfig": {"Namespaces": [{"Name": "sbemulatorns", **namespace}], "Logging": {"Type": "File"}}
    }


# --- the pure plan ------------------------------------------------------------------------------


def test_plan_order_and_entities(topology: dict) -> None:
    plan = plan_from_topology(topology)
    assert [(op.kind, op.names) for op in plan] == [
        ("queue", ("leveling",)),
        ("queue", ("leader-election",)),
        ("queue", ("ordered-writes",)),
        ("queue", ("priority-fifo",)),
        ("topic", ("messages",)),
        ("subscription", ("messages", "highPriority")),
        ("rule", ("messages", "highPriority", "HighPriorityFilter")),
        ("subscription", ("messages", "lowPriority")),
        ("rule", ("messages", "lowPriority", "LowPriorityFilter")),
        ("subscription", ("messages", "unroutedPriority")),
        ("rule", ("messages", "unroutedPriority", "UnroutedPriorityFilter")),
    ]


def test_plan_maps_config_properties_to_arm_names(topology: dict) -> None:
    by_name = {op.names: op.body for op in plan_from_topology(topology)}
    assert by_name[("leveling",)] == {
        "properties": {
            "deadLetteringOnMessageExpiration": True,
            "defaultMessageTimeToLive": "PT1H",
            "duplicateDetectionHistoryTimeWindow": "PT20S",
            "lockDuration": "PT1M",
            "maxDeliveryCount": 5,
            "requiresDuplicateDetection": False,
            "requiresSession": False,
        }
    }
    leader = by_name[("leader-election",)]["properties"]
    assert leader["requiresSession"] is True and leader["lockDuration"] == "PT30S"
    assert by_name[("ordered-writes",)]["properties"]["requiresSession"] is True
    # Empty forwarding targets are left out, not sent as "".
    assert all("forwardTo" not in body["properties"] for body in by_name.values() if "properties" in body)
    assert by_name[("messages", "highPriority")]["properties"]["defaultMessageTimeToLive"] == "PT10M"


def test_plan_rules_are_sql_filters(topology: dict) -> None:
    rules = {op.names[1]: op.body for op in plan_from_topology(topology) if op.kind == "rule"}
    assert rules == {
        "highPriority": {
            "properties": {"filterType": "SqlFilter", "sqlFilter": {"sqlExpression": "Priority = 'High'"}}
        },
        "lowPriority": {
            "properties": {"filterType": "SqlFilter", "sqlFilter": {"sqlExpression": "Priority = 'Low'"}}
        },
        "unroutedPriority": {
            "properties": {
                "filterType": "SqlFilter",
                "sqlFilter": {"sqlExpression": "Priority IS NULL OR Priority NOT IN ('High', 'Low')"},
            }
        },
    }


def test_plan_is_pure(topology: dict) -> None:
    before = copy.deepcopy(topology)
    first = plan_from_topology(topology)
    assert topology == before
    assert plan_from_topology(topology) == first


def test_namespace_operation_only_when_asked(topology: dict) -> None:
    assert all(op.kind != "namespace" for op in plan_from_topology(topology))
    plan = plan_from_topology(topology, namespace_location="westeurope")
    assert plan[0] == PlannedOperation(
        "namespace",
        (),
        {
            "location": "westeurope",
            "sku": {"name": "Standard", "tier": "Standard"},
            "properties": {"disableLocalAuth": True, "minimumTlsVersion": "1.2"},
        },
    )


def test_correlation_filter_and_action() -> None:
    topology = _minimal(
        Queues=[],
        Topics=[
            {
                "Name": "t",
                "Subscriptions": [
                    {
                        "Name": "s",
                        "Rules": [
                            {
                                "Name": "r",
                                "Properties": {
                                    "FilterType": "Correlation",
                                    "CorrelationFilter": {"Label": "x", "Properties": {"Priority": "High"}},
                                    "Action": {"SqlExpression": "SET Routed = 'yes'"},
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    )
    rule = plan_from_topology(topology)[-1]
    assert rule.arm_path(SUB, RG, NS) == f"{NS_PATH}/topics/t/subscriptions/s/rules/r"
    assert rule.body == {
        "properties": {
            "filterType": "CorrelationFilter",
            "correlationFilter": {"label": "x", "properties": {"Priority": "High"}},
            "action": {"sqlExpression": "SET Routed = 'yes'"},
        }
    }


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ({"UserConfig": {}}, "Namespaces"),
        ({"UserConfig": {"Namespaces": [{}, {}]}}, "exactly one"),
        (_minimal(Queues=[{"Name": "q", "Properties": {"Lockduration": "PT1M"}}]), "unsupported"),
        (_minimal(Queues=[{"Name": "a"}, {"Name": "A"}]), "duplicate"),
        (_minimal(Queues=[{"Name": "a"}], Topics=[{"Name": "a", "Subscriptions": []}]), "duplicate"),
        (_minimal(Queues=[{"Properties": {}}]), "Name"),
        (
            _minimal(Topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [{"Name": "r"}]}]}]),
            "Properties",
        ),
        (
            _minimal(
                Topics=[
                    {
                        "Name": "t",
                        "Subscriptions": [
                            {"Name": "s", "Rules": [{"Name": "r", "Properties": {"FilterType": "Sql"}}]}
                        ],
                    }
                ]
            ),
            "SqlExpression",
        ),
    ],
)
def test_bad_topologies_are_rejected(topology: dict, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        plan_from_topology(topology)


def test_load_topology_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(TopologyError, match=r"broken\.json"):
        load_topology(bad)


# --- the script end to end, over a fake ARM ----------------------------------------------------


class _Closed:
    def close(self) -> None:
        pass


class FakeArmTransport(HttpTransport):
    """Records each request; answers 200 with the PUT body echoed back as an ARM resource."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[dict] = []
        self.status = status

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __exit__(self, *args: object) -> None:
        pass

    def send(self, request, **kwargs):
        body = json.loads(request.content) if request.content else None
        url = urlsplit(request.url)
        self.requests.append(
            {
                "method": request.method,
                "base": f"{url.scheme}://{url.netloc}",
                "path": url.path,
                "query": parse_qs(url.query),
                "authorization": request.headers.get("Authorization"),
                "body": body,
            }
        )
        if self.status >= 400:
            payload = {"error": {"code": "BadRequest", "message": "the fake ARM says no"}}
        else:
            payload = dict(body or {})
            payload["id"] = url.path
            payload["name"] = url.path.rsplit("/", 1)[-1]
            payload["properties"] = {**payload.get("properties", {}), "provisioningState": "Succeeded"}
        response = HttpResponseImpl(
            request=request,
            internal_response=_Closed(),
            block_size=4096,
            status_code=self.status,
            reason="OK" if self.status < 400 else "Bad Request",
            content_type="application/json",
            headers={"Content-Type": "application/json"},
            stream_download_generator=None,
        )
        response._content = json.dumps(payload).encode()
        return response


def _args(*extra: str) -> list[str]:
    return [
        "--topology",
        str(TOPOLOGY_PATH),
        "--subscription-id",
        SUB,
        "--resource-group",
        RG,
        "--namespace",
        NS,
        "--credential",
        "none",
        "--token",
        "test-token",
        *extra,
    ]


def test_end_to_end_puts_every_entity(capsys: pytest.CaptureFixture[str]) -> None:
    transport = FakeArmTransport()
    assert provision.main(_args("--base-url", "http://127.0.0.1:1"), transport=transport) == 0
    assert "applied 11 operations" in capsys.readouterr().out
    reqs = transport.requests
    assert {r["method"] for r in reqs} == {"PUT"}
    assert {r["base"] for r in reqs} == {"http://127.0.0.1:1"}
    assert {r["authorization"] for r in reqs} == {"Bearer test-token"}
    assert all(r["query"] == {"api-version": [provision.API_VERSION]} for r in reqs)
    assert provision.API_VERSION == "2026-01-01"  # the version main.bicep uses
    assert [r["path"] for r in reqs] == [
        f"{NS_PATH}/queues/leveling",
        f"{NS_PATH}/queues/leader-election",
        f"{NS_PATH}/queues/ordered-writes",
        f"{NS_PATH}/queues/priority-fifo",
        f"{NS_PATH}/topics/messages",
        f"{NS_PATH}/topics/messages/subscriptions/highPriority",
        f"{NS_PATH}/topics/messages/subscriptions/highPriority/rules/HighPriorityFilter",
        f"{NS_PATH}/topics/messages/subscriptions/lowPriority",
        f"{NS_PATH}/topics/messages/subscriptions/lowPriority/rules/LowPriorityFilter",
        f"{NS_PATH}/topics/messages/subscriptions/unroutedPriority",
        f"{NS_PATH}/topics/messages/subscriptions/unroutedPriority/rules/UnroutedPriorityFilter",
    ]
    bodies = {r["path"].removeprefix(NS_PATH): r["body"] for r in reqs}
    expressions = {
        path.split("/")[4]: body["properties"]["sqlFilter"]["sqlExpression"]
        for path, body in bodies.items()
        if "/rules/" in path
    }
    assert expressions == {
        "highPriority": "Priority = 'High'",
        "lowPriority": "Priority = 'Low'",
        "unroutedPriority": "Priority IS NULL OR Priority NOT IN ('High', 'Low')",
    }
    assert all(
        body["properties"]["filterType"] == "SqlFilter" for path, body in bodies.items() if "/rules/" in path
    )
    leader = bodies["/queues/leader-election"]["properties"]
    assert leader["lockDuration"] == "PT30S" and leader["requiresSession"] is True
    assert bodies["/queues/ordered-writes"]["properties"]["requiresSession"] is True
    assert bodies["/queues/leveling"]["properties"]["requiresSession"] is False
    assert bodies["/queues/leveling"]["properties"]["maxDeliveryCount"] == 5
    assert bodies["/topics/messages/subscriptions/highPriority"]["properties"]["lockDuration"] == "PT1M"
    # What went over the wire is exactly the pure plan.
    plan = plan_from_topology(load_topology(TOPOLOGY_PATH))
    assert [r["body"] for r in reqs] == [op.body for op in plan]


def test_end_to_end_creates_namespace_first() -> None:
    transport = FakeArmTransport()
    args = _args("--base-url", "http://127.0.0.1:1", "--create-namespace", "--location", "swedencentral")
    assert provision.main(args, transport=transport) == 0
    first = transport.requests[0]
    assert first["path"] == NS_PATH
    assert first["body"] == {
        "location": "swedencentral",
        "sku": {"name": "Standard", "tier": "Standard"},
        "properties": {"disableLocalAuth": True, "minimumTlsVersion": "1.2"},
    }
    assert len(transport.requests) == 12


def test_running_twice_sends_the_same_puts() -> None:
    first, second = FakeArmTransport(), FakeArmTransport()
    provision.main(_args("--base-url", "http://127.0.0.1:1"), transport=first)
    provision.main(_args("--base-url", "http://127.0.0.1:1"), transport=second)
    assert first.requests == second.requests


def test_arm_error_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    transport = FakeArmTransport(status=400)
    assert provision.main(_args("--base-url", "http://127.0.0.1:1"), transport=transport) == 1
    assert "the fake ARM says no" in capsys.readouterr().err
    assert len(transport.requests) == 1  # stops at the first refusal


def test_dry_run_prints_plan_and_sends_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    transport = FakeArmTransport()
    assert provision.main(_args("--dry-run"), transport=transport) == 0
    out = capsys.readouterr().out
    assert transport.requests == []
    assert f"PUT {NS_PATH}/queues/leveling?api-version={provision.API_VERSION}" in out
    assert "Priority IS NULL OR Priority NOT IN ('High', 'Low')" in out


def test_dry_run_needs_no_azure_identifiers(capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    for name in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "SERVICEBUS_NAMESPACE_NAME"):
        monkeypatch.delenv(name, raising=False)
    assert provision.main(["--dry-run"]) == 0
    assert "/namespaces/<namespace>/topics/messages" in capsys.readouterr().out


def test_missing_arguments_are_an_error(monkeypatch) -> None:
    for name in ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "SERVICEBUS_NAMESPACE_NAME"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exc:
        provision.main([], transport=FakeArmTransport())
    assert exc.value.code == 2


def test_plain_http_needs_static_token() -> None:
    # DefaultAzureCredential tokens must never travel over plain http.
    args = _args("--base-url", "http://127.0.0.1:1")
    args[args.index("--credential") + 1] = "default"
    with pytest.raises(SystemExit):
        provision.main(args, transport=FakeArmTransport())


def test_invalid_topology_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(_minimal(Queues=[{"Name": "q", "Properties": {"Bogus": 1}}])))
    args = _args("--dry-run")
    args[args.index("--topology") + 1] = str(bad)
    assert provision.main(args) == 2
    assert "Bogus" in capsys.readouterr().err
