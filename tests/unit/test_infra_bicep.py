"""Drift checks for the Bicep in infra/: it must parse, and it must agree with the topology, the code and
the least-privilege design.

No Bicep compiler can be installed here (every route downloads a binary), so the files are parsed with
two independent grammars: tree-sitter-bicep (syntax only) and pycep-parser, a Lark grammar for Bicep
whose output the structural checks walk. Its output is a dict per file (``parameters``, ``variables``,
``resources``, ``modules``, ``outputs``). Two quirks shape the helpers below: identifiers and string
literals both come out as plain strings (``'x'`` and ``x`` look alike), and its precedence for ``.?``,
``??`` and ``?:`` is not Bicep's, so the tests only walk plain member access (``a.b[i].c``) and look at
the rest as text. What pycep cannot tell us (types, BCP diagnostics, ARM validation) is listed in
docs/infra.md.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pycep import BicepParser

from infra import provision

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
MAIN = INFRA / "main.bicep"
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))

ROLES = ["sender", "consumer-high", "consumer-low", "leveler", "ordered"]
ROLE_GUIDS = {
    "serviceBusDataSender": "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    "serviceBusDataReceiver": "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
    "storageBlobDataOwner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "storageTableDataContributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    "monitoringMetricsPublisher": "3913510d-42f4-4e42-8a64-420c390055eb",
}
# Every app setting the code reads in Azure (see shared/settings.py and the Functions bindings).
REQUIRED_APP_SETTINGS = {
    "APP_ROLES",
    "AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentCalls",
    "AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentSessions",
    "ServiceBusConnection__fullyQualifiedNamespace",
    "AzureWebJobsStorage__accountName",
    "TableStorageConnection__tableServiceUri",
    "RESULTS_TABLE",
    "SENDER_SCHEDULE",
    "SENDER_BATCH_SIZE",
    "LEVELER_MAX_WRITES_PER_SECOND",
    "LEVELER_BUDGET_TABLE",
    "ORDERED_TABLE",
    "ORDERED_WORK_MS",
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
}


@functools.cache
def parse(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = dict(BicepParser().parse(file_path=Path(path)))
    for section in ("parameters", "variables", "resources", "modules", "outputs"):
        doc.setdefault(section, {})  # pycep leaves out empty sections
    return doc


def module_doc(name: str) -> dict[str, Any]:
    return parse(INFRA / "modules" / name)


def body(declaration: dict[str, Any]) -> dict[str, Any]:
    """The object a resource or module declares, whether it is plain, conditional or a loop."""
    config = declaration["config"]
    if "config" in config and ("loop_type" in config or "condition" in config):
        return config["config"]
    return config


def dotted(expr: Any) -> str | None:
    """``a.b[i].c`` for plain member/index access in pycep's tree; None for anything else."""
    if isinstance(expr, str | int):
        return str(expr)
    if isinstance(expr, dict) and set(expr) == {"operator"}:
        op = expr["operator"]
        left, right = dotted(op["operands"]["operand_1"]), dotted(op["operands"]["operand_2"])
        if left is None or right is None:
            return None
        if op["type"] == "property_accessor":
            return f"{left}.{right}"
        if op["type"] == "index_accessor":
            return f"{left}[{right}]"
    return None


def variable(doc: dict[str, Any], name: str) -> Any:
    return doc["variables"][name]["value"]


def resolve(doc: dict[str, Any], value: Any) -> Any:
    """Follow a bare identifier to its variable value or parameter default (recursively)."""
    if isinstance(value, str) and value in doc["variables"]:
        return resolve(doc, variable(doc, value))
    if isinstance(value, str) and value in doc["parameters"]:
        return resolve(doc, doc["parameters"][value].get("default"))
    if isinstance(value, list):
        return [resolve(doc, item) for item in value]
    if isinstance(value, dict) and not ({"operator", "function"} & set(value)):
        return {key: resolve(doc, item) for key, item in value.items()}
    return value


def decorators(doc: dict[str, Any], param: str) -> dict[str, Any]:
    return {d["type"]: d.get("argument") for d in doc["parameters"][param]["decorators"]}


@functools.cache
def topology() -> dict[str, Any]:
    return json.loads((INFRA / "servicebus.json").read_text())["UserConfig"]["Namespaces"][0]


def function_apps() -> list[dict[str, Any]]:
    main = parse(MAIN)
    return variable(main, "functionApps")


def app_settings() -> dict[str, Any]:
    return body(parse(MAIN)["modules"]["apps"])["params"]["appSettings"]


# --- parsing ------------------------------------------------------------------------------------


def test_bicep_files_are_found() -> None:
    names = {p.relative_to(INFRA).as_posix() for p in BICEP_FILES}
    assert "main.bicep" in names
    assert len(names) >= 10


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(INFRA).as_posix())
def test_every_bicep_file_parses(path: Path) -> None:
    doc = parse(path)
    assert doc["resources"] or doc["modules"], f"{path.name} declares nothing"


def _tree_sitter_errors(source: bytes) -> list[str]:
    from tree_sitter_language_pack import get_parser  # pinned: newer versions fetch grammars at run time

    tree = get_parser("bicep").parse(source)
    found: list[str] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            row, col = node.start_point
            found.append(f"{row + 1}:{col + 1} {node.type} {(node.text or b'')[:40]!r}")
        stack.extend(node.children)
    return found


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(INFRA).as_posix())
def test_every_bicep_file_parses_with_tree_sitter(path: Path) -> None:
    """A second, independent grammar (tree-sitter-bicep): pycep and it disagree on some constructs."""
    assert _tree_sitter_errors(path.read_bytes()) == []


def test_tree_sitter_rejects_broken_bicep() -> None:
    assert _tree_sitter_errors(
        b"resource x 'Microsoft.Storage/storageAccounts@2023-05-01' = {\n  name: 'a'\n"
    )
    assert _tree_sitter_errors(b"param x int =\n")


def test_the_parser_rejects_broken_bicep(tmp_path: Path) -> None:
    # Guards the test above: pycep must not accept anything at all.
    broken = tmp_path / "broken.bicep"
    broken.write_text("resource x 'Microsoft.Storage/storageAccounts@2023-05-01' = {\n  name: 'a'\n")
    with pytest.raises(Exception):  # noqa: B017 - lark raises several exception types
        BicepParser().parse(file_path=broken)


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(INFRA).as_posix())
def test_referenced_modules_exist(path: Path) -> None:
    for name, module in parse(path)["modules"].items():
        assert module["type"] == "local", f"{name}: only local modules (no registry downloads)"
        assert (path.parent / module["detail"]["path"]).is_file(), f"{path.name}: module {name} is missing"


def test_every_module_file_is_used() -> None:
    used = {
        (path.parent / module["detail"]["path"]).resolve()
        for path in BICEP_FILES
        for module in parse(path)["modules"].values()
    }
    unused = [p.name for p in BICEP_FILES if p != MAIN and p.resolve() not in used]
    assert unused == []


def test_main_targets_subscription_and_creates_resource_group() -> None:
    main = parse(MAIN)
    assert main["globals"]["scope"]["value"] == "subscription"
    assert main["resources"]["rg"]["type"] == "Microsoft.Resources/resourceGroups"
    for name, module in main["modules"].items():
        assert body(module)["scope"] == "rg", name


# --- the topology comes from servicebus.json ----------------------------------------------------


def test_main_loads_servicebus_json() -> None:
    main = parse(MAIN)
    loads = [
        v["value"]["function"]["parameters"]["file_path"]
        for v in main["variables"].values()
        if isinstance(v["value"], dict) and v["value"].get("function", {}).get("type") == "load_json_content"
    ]
    assert loads == ["servicebus.json"]
    assert "loadJsonContent('servicebus.json')" in MAIN.read_text()
    assert dotted(variable(main, "serviceBusEntities")) == "topology.UserConfig.Namespaces[0]"
    assert body(main["modules"]["serviceBus"])["params"]["entities"] == "serviceBusEntities"


def test_modules_hold_no_entity_names() -> None:
    # Entity names live in servicebus.json (and main.bicep's per-role wiring), never inside a module.
    names = {q["Name"] for q in topology()["Queues"]} | {t["Name"] for t in topology()["Topics"]}
    names |= {s["Name"] for t in topology()["Topics"] for s in t["Subscriptions"]}
    for path in BICEP_FILES:
        if path == MAIN:
            continue
        literals = set(re.findall(r"'([^'$]*)'", path.read_text()))
        assert not literals & names, f"{path.name} hard-codes {literals & names}"


def test_main_entity_names_exist_in_topology() -> None:
    main = parse(MAIN)
    topics = {t["Name"]: {s["Name"] for s in t["Subscriptions"]} for t in topology()["Topics"]}
    queues = {q["Name"] for q in topology()["Queues"]}
    for app in resolve(main, function_apps()):
        for topic in app["topicSenders"]:
            assert topic in topics, (app["role"], topic)
        for queue in app["queueSenders"] + app["queueReceivers"]:
            assert queue in queues, (app["role"], queue)
        for entry in app["subscriptionReceivers"]:
            assert entry["subscription"] in topics[entry["topic"]], (app["role"], entry)
    for queue in resolve(main, "sessionQueueNames"):
        assert queue in queues, queue


def _referenced_config_keys(properties: dict[str, Any]) -> dict[str, set[str]]:
    """ARM property -> the Config.json keys its Bicep expression mentions."""
    known = set(provision._QUEUE_PROPERTIES) | set(provision._SUBSCRIPTION_PROPERTIES)
    known |= set(provision._TOPIC_PROPERTIES)
    return {
        arm: {key for key in known if re.search(rf"\b{key}\b", json.dumps(expr))}
        for arm, expr in properties.items()
    }


@pytest.mark.parametrize(
    ("module", "resource", "mapping"),
    [
        ("servicebus.bicep", "queues", provision._QUEUE_PROPERTIES),
        ("servicebus-topic.bicep", "topicResource", provision._TOPIC_PROPERTIES),
        ("servicebus-subscription.bicep", "subscriptionResource", provision._SUBSCRIPTION_PROPERTIES),
    ],
)
def test_bicep_maps_config_properties_like_provision_py(module: str, resource: str, mapping: dict) -> None:
    """Bicep and provision.py translate Config.json -> ARM with the same table (ISO durations as-is)."""
    properties = body(module_doc(module)["resources"][resource])["properties"]
    referenced = _referenced_config_keys(properties)
    assert set(properties) == set(mapping.values())
    for config_key, arm_key in mapping.items():
        assert referenced[arm_key] == {config_key}, arm_key


def test_rules_become_sql_filters() -> None:
    rules = body(module_doc("servicebus-subscription.bicep")["resources"]["rules"])
    text = json.dumps(rules)
    for fragment in ('"SqlFilter"', '"sqlExpression"', '"SqlExpression"', '"Sql"', '"CorrelationFilter"'):
        assert fragment in text
    assert module_doc("servicebus-subscription.bicep")["resources"]["rules"]["type"] == (
        "Microsoft.ServiceBus/namespaces/topics/subscriptions/rules"
    )


def test_service_bus_entities_are_iterated_from_the_topology() -> None:
    sb = module_doc("servicebus.bicep")
    assert "Queues" in json.dumps(sb["resources"]["queues"]["config"]["loop_type"])
    assert "Topics" in json.dumps(sb["modules"]["topics"]["config"]["loop_type"])
    topic = module_doc("servicebus-topic.bicep")
    assert "Subscriptions" in json.dumps(topic["modules"]["subscriptions"]["config"]["loop_type"])
    sub = module_doc("servicebus-subscription.bicep")
    assert "Rules" in json.dumps(sub["resources"]["rules"]["config"]["loop_type"])


# --- identity only ------------------------------------------------------------------------------


def test_namespace_refuses_keys() -> None:
    namespace = module_doc("servicebus.bicep")["resources"]["namespace"]
    assert namespace["type"] == "Microsoft.ServiceBus/namespaces"
    props = body(namespace)["properties"]
    assert props["disableLocalAuth"] is True
    assert props["minimumTlsVersion"] == "1.2"
    assert resolve(module_doc("servicebus.bicep"), "skuName") == "Standard"


def test_storage_refuses_keys_and_public_blobs() -> None:
    storage = module_doc("storage.bicep")
    props = body(storage["resources"]["storage"])["properties"]
    assert props["allowSharedKeyAccess"] is False
    assert props["allowBlobPublicAccess"] is False
    assert props["minimumTlsVersion"] == "TLS1_2"
    assert body(storage["resources"]["deploymentContainers"])["properties"]["publicAccess"] == "None"
    table = storage["resources"]["resultsTable"]
    assert table["type"] == "Microsoft.Storage/storageAccounts/tableServices/tables"
    assert body(table)["name"] == "tableName"
    main = parse(MAIN)
    storage_params = body(main["modules"]["storage"])["params"]
    assert storage_params["tableName"] == "resultsTableName"
    assert resolve(main, "resultsTableName") == "results"


def test_application_insights_refuses_keys() -> None:
    appi = module_doc("monitoring.bicep")["resources"]["applicationInsights"]
    assert body(appi)["properties"]["DisableLocalAuth"] is True
    assert app_settings()["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == "Authorization=AAD"


# --- the five Function Apps --------------------------------------------------------------------


def test_five_roles_with_their_own_instance_limits() -> None:
    main = parse(MAIN)
    apps = function_apps()
    assert [app["role"] for app in apps] == ROLES
    limit_params = [app["maximumInstanceCount"] for app in apps]
    assert len(set(limit_params)) == 5, "each role needs its own maximumInstanceCount parameter"
    for param in limit_params:
        assert main["parameters"][param]["type"] == "int"
        marks = decorators(main, param)
        assert marks["min_value"] >= 1 and marks["max_value"] <= 1000
    limits = {app["role"]: resolve(main, app["maximumInstanceCount"]) for app in apps}
    assert limits["consumer-high"] > limits["consumer-low"]
    assert limits == {"sender": 1, "consumer-high": 40, "consumer-low": 5, "leveler": 4, "ordered": 4}
    concurrency = [app["maxConcurrentCalls"] for app in apps]
    assert len(set(concurrency)) == 5 and all(c in main["parameters"] for c in concurrency)


def test_apps_module_wires_each_role() -> None:
    apps = parse(MAIN)["modules"]["apps"]
    assert apps["detail"]["path"] == "modules/functionapp.bicep"
    assert apps["config"]["loop_type"]["detail"] == {"item_name": "app", "array_name": "functionApps"}
    params = body(apps)["params"]
    assert dotted(params["maximumInstanceCount"]) == "app.maximumInstanceCount"
    tag = params["tags"]["function"]["parameters"]["arg_2"]["'azd-service-name'"]
    assert dotted(tag) == "app.role"
    assert params["deploymentContainerName"] == "deploy-${app.role}"
    containers = body(parse(MAIN)["modules"]["storage"])["params"]["deploymentContainerNames"]
    assert "deploy-${app.role}" in json.dumps(containers)


def test_function_app_is_flex_consumption_python_311() -> None:
    doc = module_doc("functionapp.bicep")
    plan = body(doc["resources"]["plan"])
    assert plan["sku"] == {"name": "FC1", "tier": "FlexConsumption"}
    site = body(doc["resources"]["site"])
    assert site["identity"] == {"type": "SystemAssigned"}
    config = site["properties"]["functionAppConfig"]
    assert config["scaleAndConcurrency"] == {
        "maximumInstanceCount": "maximumInstanceCount",
        "instanceMemoryMB": "instanceMemoryMB",
    }
    assert config["runtime"]["name"] == "python"
    assert resolve(doc, config["runtime"]["version"]) == "3.11"
    storage = config["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {"type": "SystemAssignedIdentity"}
    settings = body(doc["resources"]["site__settings"])
    assert settings["name"] == "appsettings" and settings["properties"] == "appSettings"


def test_app_settings_cover_what_the_code_reads() -> None:
    settings = app_settings()
    assert set(settings) >= REQUIRED_APP_SETTINGS
    assert dotted(settings["APP_ROLES"]) == "app.role"
    calls = settings["AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentCalls"]
    assert dotted(calls["function"]["parameters"]["value_to_convert"]) == "app.maxConcurrentCalls"
    sessions = settings["AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentSessions"]
    assert dotted(sessions["function"]["parameters"]["value_to_convert"]) == "app.maxConcurrentSessions"
    # Flex Consumption sets the runtime in functionAppConfig; these settings are rejected there.
    assert not {"FUNCTIONS_WORKER_RUNTIME", "FUNCTIONS_EXTENSION_VERSION"} & set(settings)
    main = parse(MAIN)
    assert resolve(main, settings["SENDER_SCHEDULE"]) == "0,30 * * * * *"
    assert settings["RESULTS_TABLE"] == "resultsTableName"


def test_the_write_cap_is_app_wide_not_split_by_instances() -> None:
    """The leveler instances share one budget (shared/write_budget.py): no per-instance split setting,
    and the budget table the code leases from is the one the storage module creates."""
    settings = app_settings()
    assert "LEVELER_MAX_INSTANCES" not in settings
    assert settings["LEVELER_BUDGET_TABLE"] == "levelerBudgetTableName"
    main = parse(MAIN)
    assert resolve(main, "levelerBudgetTableName") == "writebudget"


def test_every_setting_read_by_shared_settings_is_set() -> None:
    settings_py = ROOT / "shared" / "settings.py"
    if not settings_py.exists():
        pytest.skip("shared/settings.py not written yet")
    read = set(re.findall(r'_(?:get|int|float|table_name)\(env, "([A-Za-z_]+)"', settings_py.read_text()))
    assert read, "the pattern no longer matches how shared/settings.py reads settings"
    missing = read - set(app_settings())
    assert missing == set(), f"settings read by the code but not set by main.bicep: {missing}"


# --- least-privilege role assignments -----------------------------------------------------------


def _assignments(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: res
        for name, res in doc["resources"].items()
        if res["type"] == "Microsoft.Authorization/roleAssignments"
    }


def _role_key(assignment: dict[str, Any]) -> str:
    role = body(assignment)["properties"]["roleDefinitionId"]["function"]
    assert role["type"] == "subscription_resource_id"
    assert role["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
    ref = dotted(role["parameters"]["resource_name_1"])
    assert ref and ref.startswith("roleIds."), ref
    return ref.removeprefix("roleIds.")


@pytest.mark.parametrize(
    "module", ["servicebus-roles.bicep", "storage-roles.bicep", "monitoring-roles.bicep"]
)
def test_role_guids_are_the_built_in_ones(module: str) -> None:
    doc = module_doc(module)
    role_ids = variable(doc, "roleIds")
    assert role_ids == {key: ROLE_GUIDS[key] for key in role_ids}
    for name, assignment in _assignments(doc).items():
        config = body(assignment)
        assert _role_key(assignment) in role_ids, name
        assert config["properties"]["principalId"] == "principalId"
        principal_type = config["properties"]["principalType"]
        if principal_type == "principalType":  # a parameter: managed identities unless told otherwise
            principal_type = doc["parameters"]["principalType"]["default"]
        assert principal_type == "ServicePrincipal"
        # Deterministic, unique per (scope, identity, role).
        assert config["name"]["function"]["type"] == "guid"
        assert "principalId" in json.dumps(config["name"])
        assert _role_key(assignment) in json.dumps(config["name"])


def test_service_bus_roles_are_scoped_to_single_entities() -> None:
    doc = module_doc("servicebus-roles.bicep")
    expected = {
        # assignment: (role, scope resource type, the parameter its loop runs over)
        "topicSenderAssignments": (
            "serviceBusDataSender",
            "Microsoft.ServiceBus/namespaces/topics",
            "topicSenders",
        ),
        "queueSenderAssignments": (
            "serviceBusDataSender",
            "Microsoft.ServiceBus/namespaces/queues",
            "queueSenders",
        ),
        "queueReceiverAssignments": (
            "serviceBusDataReceiver",
            "Microsoft.ServiceBus/namespaces/queues",
            "queueReceivers",
        ),
        "subscriptionReceiverAssignments": (
            "serviceBusDataReceiver",
            "Microsoft.ServiceBus/namespaces/topics/subscriptions",
            "subscriptionReceivers",
        ),
    }
    assignments = _assignments(doc)
    assert set(assignments) == set(expected)
    for name, (role, scope_type, param) in expected.items():
        assignment = assignments[name]
        assert _role_key(assignment) == role, name
        assert assignment["config"]["loop_type"]["detail"]["array_name"] == param
        scope = dotted(body(assignment)["scope"])
        assert scope and scope.endswith("[i]"), name
        scope_resource = doc["resources"][scope.removesuffix("[i]")]
        assert scope_resource["existing"] is True
        assert scope_resource["type"] == scope_type, name
        assert scope_resource["config"]["loop_type"]["detail"]["array_name"] == param
    # Nothing is granted on the namespace itself.
    assert all(dotted(body(a)["scope"]) != "namespace" for a in assignments.values())


def test_each_role_gets_exactly_its_entities() -> None:
    main = parse(MAIN)
    roles = {app["role"]: app for app in resolve(main, function_apps())}
    empty: list[Any] = []
    assert roles["sender"] | {"role": None} == {
        "role": None,
        "maximumInstanceCount": 1,
        "maxConcurrentCalls": 1,
        "maxConcurrentSessions": 8,
        "topicSenders": ["messages"],
        "queueSenders": ["ordered-writes"],
        "queueReceivers": empty,
        "subscriptionReceivers": empty,
        "tableWriter": False,
    }
    for role, subscription in (("consumer-high", "highPriority"), ("consumer-low", "lowPriority")):
        app = roles[role]
        assert app["subscriptionReceivers"] == [{"topic": "messages", "subscription": subscription}]
        assert app["queueSenders"] == ["leveling"]
        assert app["topicSenders"] == empty and app["queueReceivers"] == empty
        assert app["tableWriter"] is False
    leveler = roles["leveler"]
    assert leveler["queueReceivers"] == ["leveling"]
    assert leveler["topicSenders"] == leveler["queueSenders"] == leveler["subscriptionReceivers"] == empty
    assert leveler["tableWriter"] is True
    ordered = roles["ordered"]
    assert ordered["queueReceivers"] == ["ordered-writes"]
    assert ordered["topicSenders"] == ordered["queueSenders"] == ordered["subscriptionReceivers"] == empty
    assert ordered["tableWriter"] is True
    # the only role that can send to ordered-writes is its feed, the sender
    senders = [role for role, app in roles.items() if "ordered-writes" in app["queueSenders"]]
    assert senders == ["sender"]


def test_ordered_writer_has_its_own_limits_and_a_session_queue() -> None:
    """The per-tenant writer: its own instance limit and maxConcurrentSessions, on a session queue.

    Functions docs ("Azure Service Bus trigger for Azure Functions", host.json serviceBus section):
    a session-enabled trigger processes up to maxConcurrentSessions sessions per instance, one message
    of a session at a time; app settings AzureFunctionsJobHost__extensions__serviceBus__* override
    host.json per app.
    """
    main = parse(MAIN)
    ordered = next(app for app in function_apps() if app["role"] == "ordered")
    assert ordered["maximumInstanceCount"] == "orderedMaximumInstanceCount"
    assert ordered["maxConcurrentSessions"] == "orderedMaxConcurrentSessions"
    assert resolve(main, "orderedMaxConcurrentSessions") == 2
    others = {resolve(main, app["maxConcurrentSessions"]) for app in function_apps() if app["role"] != "ordered"}
    host_json = json.loads((ROOT / "host.json").read_text())
    assert others == {host_json["extensions"]["serviceBus"]["maxConcurrentSessions"]}
    queue = next(q for q in topology()["Queues"] if q["Name"] == "ordered-writes")
    assert queue["Properties"]["RequiresSession"] is True


def test_role_modules_receive_each_apps_identity_and_lists() -> None:
    modules = parse(MAIN)["modules"]
    sb = body(modules["serviceBusRoles"])["params"]
    assert modules["serviceBusRoles"]["detail"]["path"] == "modules/servicebus-roles.bicep"
    assert dotted(sb["principalId"]) == "apps[i].outputs.principalId"
    for param in ("topicSenders", "queueSenders", "queueReceivers", "subscriptionReceivers"):
        assert dotted(sb[param]) == f"app.{param}", param
    st = body(modules["storageRoles"])["params"]
    assert dotted(st["principalId"]) == "apps[i].outputs.principalId"
    assert dotted(st["grantTableDataContributor"]) == "app.tableWriter"
    appi = body(modules["monitoringRoles"])["params"]
    assert dotted(appi["principalId"]) == "apps[i].outputs.principalId"
    for name in ("serviceBusRoles", "storageRoles", "monitoringRoles"):
        assert modules[name]["config"]["loop_type"]["detail"]["array_name"] == "functionApps"


def test_developer_gets_only_the_cli_entities() -> None:
    """Optional grant for a developer running the CLIs: topic send and the two session queues."""
    main = parse(MAIN)
    module = main["modules"]["developerServiceBusRoles"]
    assert module["detail"]["path"] == "modules/servicebus-roles.bicep"
    assert "developerPrincipalId" in json.dumps(module["config"]["condition"])
    assert resolve(main, "developerPrincipalId") == ""
    params = resolve(main, body(module)["params"])
    assert params["principalId"] == "" and params["principalType"] == "User"
    assert params["topicSenders"] == ["messages"]
    assert params["queueSenders"] == params["queueReceivers"] == ["leader-election", "ordered-writes"]
    assert params["subscriptionReceivers"] == []
    parameters = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert parameters["developerPrincipalId"] == {"value": "${AZURE_PRINCIPAL_ID}"}


def test_storage_roles() -> None:
    doc = module_doc("storage-roles.bicep")
    assignments = _assignments(doc)
    blob, table = assignments["blobDataOwner"], assignments["tableDataContributor"]
    assert _role_key(blob) == "storageBlobDataOwner"
    assert "condition" not in blob["config"], "every app needs blob access (AzureWebJobsStorage, deployment)"
    assert _role_key(table) == "storageTableDataContributor"
    assert table["config"]["condition"] == "grantTableDataContributor"
    for assignment in (blob, table):
        assert body(assignment)["scope"] == "storage"
    assert doc["resources"]["storage"]["existing"] is True


# --- outputs, parameters file -------------------------------------------------------------------


def test_main_outputs() -> None:
    outputs = parse(MAIN)["outputs"]
    for name in (
        "SERVICEBUS_NAMESPACE_NAME",
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE",
        "STORAGE_ACCOUNT_NAME",
        "FUNCTION_APP_NAMES",
        "AZURE_RESOURCE_GROUP",
    ):
        assert name in outputs


def test_parameters_file_matches_main() -> None:
    main = parse(MAIN)
    parameters = json.loads((INFRA / "main.parameters.json").read_text())["parameters"]
    assert parameters["environmentName"] == {"value": "${AZURE_ENV_NAME}"}
    assert parameters["location"] == {"value": "${AZURE_LOCATION}"}
    assert set(parameters) <= set(main["parameters"])
    required = {name for name, p in main["parameters"].items() if "default" not in p}
    assert required <= set(parameters)


# --- the code registers the same roles ----------------------------------------------------------


def _literal_assignment(path: Path, name: str) -> Any:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
                and node.value is not None:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} has no literal {name}")


def test_function_app_registers_the_bicep_roles() -> None:
    """function_app.py's blueprints per APP_ROLES value must be exactly the Function Apps Bicep creates."""
    function_app = ROOT / "function_app.py"
    if not function_app.exists():
        pytest.skip("function_app.py not written yet")
    role_modules = _literal_assignment(function_app, "ROLE_MODULES")
    assert sorted(role_modules) == sorted(app["role"] for app in function_apps())
    for module in role_modules.values():
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module
    settings_py = ROOT / "shared" / "settings.py"
    if settings_py.exists():
        assert list(_literal_assignment(settings_py, "ROLES")) == ROLES
