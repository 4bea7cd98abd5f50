"""`python -m infra.check`: the Bicep in infra/ against the Azure SDK for Python management models of each
resource's API version, the Flex Consumption rules and the built-in role table.

Nothing here reaches Azure: ARM itself cannot run on this machine, so the models the SDK is generated
from stand in for it (what ARM would still catch is listed in docs/infra.md). Every rule is shown to
fail on a deliberate mistake, either in tests/fixtures/infra_bad/*.bicep or in a copy of infra/ changed
by one text substitution.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import provision
from infra.check import check
from infra.check import schema as schemas
from infra.check.bicep import parse
from infra.check.body import BodyChecker
from infra.check.roles import BUILT_IN_ROLES, claimed_role

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
BAD = ROOT / "tests" / "fixtures" / "infra_bad"


def messages(findings: list) -> list[str]:
    return [str(f) for f in findings]


def infra_copy(tmp_path: Path, file: str, old: str, new: str) -> list:
    """Check a copy of infra/ in which one text substitution has been made."""
    copy = tmp_path / "infra"
    shutil.copytree(INFRA, copy, ignore=shutil.ignore_patterns("check", "__pycache__", "*.py"))
    target = copy / file
    source = target.read_text()
    assert source.count(old) >= 1, f"{file} no longer contains {old!r}: update the test"
    target.write_text(source.replace(old, new, 1))
    return check([copy / "main.bicep"], root=tmp_path)


def declaration_line(file: str, old: str) -> int:
    """The line of the resource declaration that encloses the first occurrence of `old` in `file`."""
    source = (INFRA / file).read_text()
    start = source.rindex("\nresource ", 0, source.index(old)) + 1
    return source.count("\n", 0, start) + 1


def edited_line(file: str, old: str, new: str) -> int:
    """The 1-based line of the first character where the substitution changes `file`, so that the expected
    finding follows the mistake wherever unrelated edits to infra/ move it."""
    source = (INFRA / file).read_text()
    start = source.index(old)
    common = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    return source.count("\n", 0, start) + old.count("\n", 0, common) + 1


# --- infra/ as it is ------------------------------------------------------------------------------


def test_infra_passes() -> None:
    assert messages(check()) == []


def test_command_line_passes_on_infra() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "infra.check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok: ")


def test_command_line_fails_with_one_line_per_finding() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "infra.check", str(BAD / "storage_mistakes.bicep")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 5
    assert all(line.startswith("tests/fixtures/infra_bad/storage_mistakes.bicep:") for line in lines)


def test_the_check_covers_every_module_and_resource() -> None:
    # Every module file is reached through main.bicep, and every app of the functionApps loop is
    # checked (so a sixth role is checked too without touching the checker).
    from infra.check import checked_resources

    used = {p.name for p in INFRA.rglob("*.bicep")}
    assert len(used) >= 10
    assert checked_resources() >= 60


def test_a_new_function_app_role_is_checked_without_changes_to_the_checker(tmp_path: Path) -> None:
    extra = """  {
    role: 'extra'
    maximumInstanceCount: 2000
    maxConcurrentCalls: levelerMaxConcurrentCalls
    topicSenders: []
    queueSenders: []
    queueReceivers: []
    subscriptionReceivers: []
    tableWriter: false
  }
]

resource rg"""
    found = messages(infra_copy(tmp_path, "main.bicep", "]\n\nresource rg", extra))
    assert any("maximumInstanceCount: 2000 breaks @maxValue(1000)" in m for m in found), found


# --- negative cases: each rule can fail ---------------------------------------------------------


def test_standalone_fixture_storage_mistakes() -> None:
    found = messages(check([BAD / "storage_mistakes.bicep"], root=ROOT))
    prefix = "tests/fixtures/infra_bad/storage_mistakes.bicep"
    assert found == [
        f"{prefix}:13: misspelled (Microsoft.Storage/storageAccounts) properties.allowSharedKeyAcess: unknown "
        "property: StorageAccountPropertiesCreateParameters has no 'allowSharedKeyAcess'; did you mean "
        "'allowSharedKeyAccess'?",
        f"{prefix}:20: badEnum (Microsoft.Storage/storageAccounts) kind: 'StorageV3' is not a value of Kind in "
        "this API version (allowed: Storage, StorageV2, BlobStorage, FileStorage, BlockBlobStorage)",
        f"{prefix}:34: readOnly (Microsoft.Storage/storageAccounts) properties.creationTime: is read-only "
        "(StorageAccountProperties returns it; StorageAccountPropertiesCreateParameters does not accept it)",
        f"{prefix}:46: wrongType (Microsoft.Storage/storageAccounts) properties.supportsHttpsTrafficOnly: wrong "
        "type: expects bool, got string 'true'",
        f"{prefix}:50: noSuchVersion (Microsoft.Storage/storageAccounts): API version 2023-13-01 of "
        "Microsoft.Storage/storageAccounts is in no installed SDK (azure-mgmt-storage has 2026-09-01)",
    ]


def test_standalone_fixture_flex_and_role_mistakes() -> None:
    found = messages(check([BAD / "flex_mistakes.bicep"], root=ROOT))
    expected = [
        (37, "properties.siteConfig.appSettings: app setting FUNCTIONS_WORKER_RUNTIME is rejected on Flex"),
        (49, "authentication.type: StorageAccountConnectionString: the deployment container must be reached "
             "with a managed identity"),
        (56, "maximumInstanceCount: 0 is outside the Flex Consumption range 1..1000"),
        (57, "instanceMemoryMB: 1024 MB is not a Flex Consumption instance size (512, 2048, 4096)"),
        (61, "runtime.version: python 3.8 is not supported on Flex Consumption (3.10, 3.11, 3.12)"),
        (69, "properties.FUNCTIONS_EXTENSION_VERSION: app setting FUNCTIONS_EXTENSION_VERSION is rejected"),
        (70, "properties.WEBSITE_RUN_FROM_PACKAGE: app setting WEBSITE_RUN_FROM_PACKAGE is rejected"),
        (79, "ba92f5b4-2d11-453d-a403-e96b0029c9fe is Storage Blob Data Contributor, not Storage Blob Data Owner"),
    ]
    assert len(found) == len(expected), found
    for (line, fragment), message in zip(expected, found, strict=True):
        assert message.startswith(f"tests/fixtures/infra_bad/flex_mistakes.bicep:{line}: "), message
        assert fragment in message, message


@pytest.mark.parametrize(
    ("file", "old", "new", "expected"),
    [
        pytest.param(
            "modules/servicebus.bicep", "    lockDuration: queue.Properties.?LockDuration\n",
            "    lockDuration: queue.Properties.?LockDuration\n    maxDeliveryCounts: 3\n",
            "modules/servicebus.bicep:{line}: queues (Microsoft.ServiceBus/namespaces/queues) "
            "properties.maxDeliveryCounts: unknown property: SBQueueProperties has no 'maxDeliveryCounts'; "
            "did you mean 'maxDeliveryCount'?",
            id="misspelled-property",
        ),
        pytest.param(
            "modules/servicebus.bicep", "Microsoft.ServiceBus/namespaces@2026-01-01' = {",
            "Microsoft.ServiceBus/namespaces@2019-13-01' = {",
            "modules/servicebus.bicep:{line}: namespace (Microsoft.ServiceBus/namespaces): API version 2019-13-01 "
            "of Microsoft.ServiceBus/namespaces is in no installed SDK (azure-mgmt-servicebus has 2026-01-01)",
            id="api-version-that-does-not-exist",
        ),
        pytest.param(
            "modules/functionapp.bicep", "    httpsOnly: true\n",
            "    httpsOnly: true\n    defaultHostName: 'x.azurewebsites.net'\n",
            "modules/functionapp.bicep:{line}: site (Microsoft.Web/sites) properties.defaultHostName: is read-only "
            "in SiteProperties: ARM sets it, a template may not",
            id="read-only-property",
        ),
        pytest.param(
            "modules/servicebus.bicep", "disableLocalAuth: true", "disableLocalAuth: 'yes'",
            "modules/servicebus.bicep:{line}: namespace (Microsoft.ServiceBus/namespaces) properties.disableLocalAuth: "
            "wrong type: expects bool, got string 'yes'",
            id="wrong-type",
        ),
        pytest.param(
            "modules/functionapp.bicep", "httpsOnly: true", "httpsOnly: '${name}'",
            "modules/functionapp.bicep:{line}: site (Microsoft.Web/sites) properties.httpsOnly: wrong type: expects "
            "bool, got string",
            id="wrong-type-known-only-at-deployment",
        ),
        pytest.param(
            "modules/storage.bicep", "minimumTlsVersion: 'TLS1_2'", "minimumTlsVersion: 'TLS1_9'",
            "modules/storage.bicep:{line}: storage (Microsoft.Storage/storageAccounts) properties.minimumTlsVersion: "
            "'TLS1_9' is not a value of MinimumTlsVersion in this API version (allowed: TLS1_0, TLS1_1, TLS1_2, "
            "TLS1_3)",
            id="bad-enum-value",
        ),
        pytest.param(
            "main.bicep", "      APP_ROLES: app.role\n",
            "      APP_ROLES: app.role\n      FUNCTIONS_WORKER_RUNTIME: 'python'\n",
            "main.bicep:{line}: site (Microsoft.Web/sites) properties.FUNCTIONS_WORKER_RUNTIME: app setting "
            "FUNCTIONS_WORKER_RUNTIME is rejected on Flex Consumption: replaced by functionAppConfig.runtime.name",
            id="flex-rejected-app-setting",
        ),
        pytest.param(
            "modules/storage-roles.bicep", "storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'",
            "storageTableDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'",
            "modules/storage-roles.bicep:36: tableDataContributor (Microsoft.Authorization/roleAssignments) "
            "properties.roleDefinitionId: ba92f5b4-2d11-453d-a403-e96b0029c9fe is Storage Blob Data Contributor, "
            "not Storage Table Data Contributor (Storage Table Data Contributor is "
            "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3)",
            id="role-guid-not-the-named-role",
        ),
        pytest.param(
            "modules/servicebus-roles.bicep", "scope: sendTopics[i]", "scope: namespace",
            "modules/servicebus-roles.bicep:66: topicSenderAssignments (Microsoft.Authorization/roleAssignments) "
            "scope: Azure Service Bus Data Sender is granted on a Microsoft.ServiceBus/namespaces; narrowest that "
            "works: send to one queue or topic",
            id="role-scope-wider-than-needed",
        ),
        pytest.param(
            "modules/monitoring-roles.bicep", "  scope: applicationInsights\n", "",
            "modules/monitoring-roles.bicep:18: metricsPublisher (Microsoft.Authorization/roleAssignments) scope: "
            "Monitoring Metrics Publisher is granted on the deployment's resource group; narrowest that works: the "
            "Application Insights resource",
            id="role-without-scope-lands-on-the-resource-group",
        ),
        pytest.param(
            "modules/functionapp.bicep", "  identity: {\n    type: 'SystemAssigned'\n  }\n", "",
            "modules/functionapp.bicep:72: site (Microsoft.Web/sites) "
            "properties.functionAppConfig.deployment.storage.authentication.type: SystemAssignedIdentity, but the "
            "site has no system-assigned identity",
            id="flex-deployment-identity-the-site-does-not-have",
        ),
        pytest.param(
            "modules/functionapp.bicep", "    reserved: true\n", "    reserved: false\n",
            "modules/functionapp.bicep:{line}: plan (Microsoft.Web/serverfarms) properties.reserved: a Flex "
            "Consumption plan runs Linux only: set reserved: true",
            id="flex-plan-not-linux",
        ),
        pytest.param(
            "modules/storage.bicep", "  kind: 'StorageV2'\n", "",
            "modules/storage.bicep:{resource}: storage (Microsoft.Storage/storageAccounts) kind: is required by "
            "StorageAccountCreateParameters and missing",
            id="required-property-missing",
        ),
        pytest.param(
            "modules/servicebus.bicep", "lockDuration: queue.Properties.?LockDuration", "lockDuration: '1 minute'",
            "modules/servicebus.bicep:{line}: queues (Microsoft.ServiceBus/namespaces/queues) properties.lockDuration: "
            "'1 minute' is not an ISO 8601 duration",
            id="duration-not-iso-8601",
        ),
        pytest.param(
            "main.bicep", "    instanceMemoryMB: instanceMemoryMB\n",
            "    instanceMemoryMB: instanceMemoryMB\n    instanceMemory: 3\n",
            "main.bicep:{line}: apps (modules/functionapp.bicep) params.instanceMemory: modules/functionapp.bicep "
            "declares no parameter 'instanceMemory'",
            id="module-parameter-that-does-not-exist",
        ),
        pytest.param(
            "modules/servicebus.bicep", "maxDeliveryCount: queue.Properties.?MaxDeliveryCount",
            "maxDeliveryCount: queue.Properties.MaxDeliveries",
            "modules/servicebus.bicep:{line}: queues (Microsoft.ServiceBus/namespaces/queues): reads property "
            "'MaxDeliveries' that the object does not have (use '.?' if it is optional)",
            id="expression-reads-a-missing-topology-property",
        ),
    ],
)
def test_a_mistake_in_infra_is_reported(tmp_path: Path, file: str, old: str, new: str, expected: str) -> None:
    found = messages(infra_copy(tmp_path, file, old, new))
    resource = declaration_line(file, old) if "{resource}" in expected else None
    expected = expected.format(line=edited_line(file, old, new), resource=resource)
    assert f"infra/{expected}" in found, "\n".join(found)


def test_flex_instance_memory_outside_the_documented_sizes(tmp_path: Path) -> None:
    found = messages(infra_copy(tmp_path, "main.bicep", "param instanceMemoryMB int = 2048",
                                "param instanceMemoryMB int = 1024"))
    assert any("1024 MB is not a Flex Consumption instance size (512, 2048, 4096)" in m for m in found), found
    assert any("1024 is not one of the allowed values [512, 2048, 4096]" in m for m in found), found


# --- the pieces -------------------------------------------------------------------------------------


def _field(schema: schemas.ObjectSchema, name: str) -> schemas.FieldSchema:
    """A field of ``schema`` that is a plain field, not a flattened object (``fields`` holds both)."""
    field = schema.fields[name]
    assert isinstance(field, schemas.FieldSchema), name
    return field


def test_multi_api_package_resolves_the_version_folder() -> None:
    schema, models = schemas.resource_schema("Microsoft.Authorization/roleAssignments", "2022-04-01")
    assert models.module.__name__ == "azure.mgmt.authorization.v2022_04_01.models"
    properties = schema.fields["properties"]  # msrest flattening: "properties.roleDefinitionId"
    assert isinstance(properties, schemas.ObjectSchema)
    assert properties.fields["roleDefinitionId"].required
    assert _field(properties, "principalType").type.enum_values == ("User", "Group", "ServicePrincipal",
                                                                    "ForeignGroup", "Device")


def test_version_missing_from_a_multi_api_package_is_an_error() -> None:
    with pytest.raises(schemas.SchemaError, match=r"API version 2099-01-01 of Microsoft\.Insights/components"):
        schemas.resource_schema("Microsoft.Insights/components", "2099-01-01")


def test_typespec_models_give_read_only_required_and_enums() -> None:
    schema, _ = schemas.resource_schema("Microsoft.Web/sites", "2025-05-01")
    assert schema.fields["location"].required
    assert _field(schema, "id").readonly
    auth = schema
    for name in ("properties", "functionAppConfig", "deployment", "storage", "authentication"):
        model = _field(auth, name).type.model
        assert model is not None, name
        auth = model
    assert set(_field(auth, "type").type.enum_values) == {
        "SystemAssignedIdentity", "UserAssignedIdentity", "StorageAccountConnectionString"}


def test_site_config_model_depends_on_the_name() -> None:
    schema, _ = schemas.resource_schema("Microsoft.Web/sites/config", "2025-05-01", "appsettings")
    assert schema.name == "StringDictionary"
    with pytest.raises(schemas.SchemaError):
        schemas.resource_schema("Microsoft.Web/sites/config", "2025-05-01", "nonsense")


def test_role_claim_is_read_from_the_expression() -> None:
    assert claimed_role("subscriptionResourceId('Microsoft.Authorization/roleDefinitions', "
                        "roleIds.serviceBusDataReceiver)") == "Azure Service Bus Data Receiver"
    assert claimed_role("storageBlobDataOwnerRoleId") == "Storage Blob Data Owner"
    assert claimed_role("'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'") is None


def test_role_table_agrees_with_the_drift_tests() -> None:
    from tests.unit.test_infra_bicep import ROLE_GUIDS

    for key, guid in ROLE_GUIDS.items():
        role = claimed_role(key)
        assert role is not None and BUILT_IN_ROLES[role] == guid, key


# --- provision.py, the Bicep and servicebus.json agree --------------------------------------------


def test_provision_targets_the_api_version_of_every_service_bus_resource() -> None:
    versions = {
        decl.api_version
        for path in INFRA.rglob("*.bicep")
        for decl in parse(path).resources.values()
        if decl.type.lower().startswith("microsoft.servicebus/")
    }
    assert versions == {provision.API_VERSION}


SB_TYPES = {
    "namespace": "Microsoft.ServiceBus/namespaces",
    "queue": "Microsoft.ServiceBus/namespaces/queues",
    "topic": "Microsoft.ServiceBus/namespaces/topics",
    "subscription": "Microsoft.ServiceBus/namespaces/topics/subscriptions",
    "rule": "Microsoft.ServiceBus/namespaces/topics/subscriptions/rules",
}


def _check_body(kind: str, body: dict) -> list[str]:
    found: list[str] = []
    schema, _ = schemas.resource_schema(SB_TYPES[kind], provision.API_VERSION)
    BodyChecker(lambda line, path, message, file=None: found.append(f"{path}: {message}")).check_resource(
        body, schema, 0
    )
    return found


def test_every_body_provision_py_puts_is_valid_for_its_api_version() -> None:
    topology = provision.load_topology(provision.DEFAULT_TOPOLOGY)
    operations = [provision.namespace_operation("westeurope"), *provision.plan_from_topology(topology)]
    assert {op.kind for op in operations} == set(SB_TYPES)
    for operation in operations:
        assert _check_body(operation.kind, operation.body) == [], operation.name


def test_the_body_check_rejects_a_provision_body_with_a_wrong_property() -> None:
    assert _check_body("queue", {"properties": {"lockDuration": "PT1M", "maxDeliveryCount": "5"}}) == [
        "properties.maxDeliveryCount: wrong type: expects int, got string '5'"
    ]


# --- the evaluator ----------------------------------------------------------------------------------


def _variables(tmp_path: Path, source: str) -> dict:
    from infra.check.evaluate import FileInstance
    from infra.check.findings import Findings

    path = tmp_path / "eval.bicep"
    path.write_text(source)
    doc = parse(path)
    instance = FileInstance(doc, {}, "eval.bicep", Findings(tmp_path))
    return {name: instance.variable(name) for name in doc.variables}


def test_evaluator_rebinds_a_ternary_before_member_access_the_bicep_way(tmp_path: Path) -> None:
    # tree-sitter-bicep parses `c ? a : b.x` as `(c ? a : b).x`; Bicep means `c ? a : (b.x)`.
    source = "var o = {\n  x: 'inner'\n}\nvar yes = true ? 'first' : o.x\nvar no = false ? 'first' : o.x\n"
    values = _variables(tmp_path, source)
    assert values["yes"] == "first"
    assert values["no"] == "inner"


def test_evaluator_unrolls_loops_and_computes_functions(tmp_path: Path) -> None:
    source = """param names array = [
  'a'
  'b'
]
var pairs = [for (n, i) in names: '${n}-${i}']
var merged = union({
  x: 1
}, {
  y: toLower('Z')
})
var kept = [for n in names: if (n != 'a') {
  name: n
}]
var known = string(length(names))
var unknown = uniqueString(names[0])
var typed = int('7')
"""
    values = _variables(tmp_path, source)
    assert values["pairs"] == ["a-0", "b-1"]
    assert values["merged"] == {"x": 1, "y": "z"}
    assert values["kept"] == [{"name": "b"}]
    assert values["known"] == "2"
    assert values["unknown"].type == "string"
    assert values["typed"] == 7
