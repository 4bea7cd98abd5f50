"""Flex Consumption rules from the Azure Functions documentation (sources listed in docs/infra.md).

The SDK model accepts any int for instanceMemoryMB and any app setting name; what Flex Consumption
accepts is narrower and only written down in the docs, so it is checked here.
"""

from __future__ import annotations

from typing import Any

from infra.check.evaluate import ResourceRef, Unknown

# "Instance sizes" (flex-consumption-plan).
INSTANCE_MEMORY_MB = (512, 2048, 4096)
# "Considerations > Scale": the lowest maximumInstanceCount is 1 in the current page (earlier
# versions of the page said 40); the highest is 1000.
MAXIMUM_INSTANCE_COUNT = (1, 1000)
# "Supported language stack versions" (flex-consumption-plan), as functionAppConfig.runtime values.
RUNTIME_VERSIONS: dict[str, tuple[str, ...]] = {
    "python": ("3.10", "3.11", "3.12"),
    "node": ("20", "22"),
    "java": ("11", "17", "21"),
    "powershell": ("7.4",),
    "dotnet-isolated": ("8.0", "9.0"),
}
IDENTITY_AUTHENTICATION = ("SystemAssignedIdentity", "UserAssignedIdentity")
# "Flex Consumption plan deprecations" (functions-app-settings): app settings that must not be set.
DEPRECATED_APP_SETTINGS: dict[str, str] = {
    "ENABLE_ORYX_BUILD": "replaced by the remoteBuild deployment parameter",
    "FUNCTIONS_EXTENSION_VERSION": "set by the platform",
    "FUNCTIONS_WORKER_RUNTIME": "replaced by functionAppConfig.runtime.name",
    "FUNCTIONS_WORKER_RUNTIME_VERSION": "replaced by functionAppConfig.runtime.version",
    "FUNCTIONS_MAX_HTTP_CONCURRENCY": "replaced by functionAppConfig.scaleAndConcurrency.triggers",
    "FUNCTIONS_WORKER_PROCESS_COUNT": "not valid on Flex Consumption",
    "FUNCTIONS_WORKER_DYNAMIC_CONCURRENCY_ENABLED": "not valid on Flex Consumption",
    "SCM_DO_BUILD_DURING_DEPLOYMENT": "replaced by the remoteBuild deployment parameter",
    "WEBSITE_CONTENTAZUREFILECONNECTIONSTRING": "replaced by functionAppConfig.deployment",
    "WEBSITE_CONTENTOVERVNET": "not used for networking on Flex Consumption",
    "WEBSITE_CONTENTSHARE": "replaced by functionAppConfig.deployment",
    "WEBSITE_DNS_SERVER": "DNS comes from the integrated virtual network",
    "WEBSITE_MAX_DYNAMIC_APPLICATION_SCALE_OUT": "replaced by scaleAndConcurrency.maximumInstanceCount",
    "WEBSITE_NODE_DEFAULT_VERSION": "replaced by functionAppConfig.runtime.version",
    "WEBSITE_RUN_FROM_PACKAGE": "not used for deployments on Flex Consumption",
    "WEBSITE_SKIP_CONTENTSHARE_VALIDATION": "no content share on Flex Consumption",
    "WEBSITE_VNET_ROUTE_ALL": "not used for networking on Flex Consumption",
}
# Same table, site properties (on the site or in siteConfig).
DEPRECATED_SITE_PROPERTIES: dict[str, str] = {
    "alwaysOn": "not valid",
    "containerSize": "renamed instanceMemoryMB",
    "ftpsState": "FTPS is not supported",
    "isXenon": "not valid",
    "javaVersion": "replaced by functionAppConfig.runtime.version",
    "linuxFxVersion": "replaced by functionAppConfig.runtime",
    "netFrameworkVersion": "replaced by functionAppConfig.runtime.version",
    "powerShellVersion": "replaced by functionAppConfig.runtime.version",
    "functionAppScaleLimit": "renamed maximumInstanceCount",
    "preWarmedInstanceCount": "renamed alwaysReady",
    "use32BitWorkerProcess": "32-bit is not supported",
    "vnetBackupRestoreEnabled": "not used for networking",
    "vnetContentShareEnabled": "not used for networking",
    "vnetImagePullEnabled": "not used for networking",
    "vnetRouteAllEnabled": "not used for networking",
    "windowsFxVersion": "not valid",
}


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _line(obj: Any, key: str, default: int) -> int:
    return getattr(obj, "lines", {}).get(key, default) if isinstance(obj, dict) else default


def is_flex_plan(ref: ResourceRef) -> bool:
    sku = _get(ref.body, "sku")
    return isinstance(sku, dict) and (
        str(sku.get("tier", "")).lower() == "flexconsumption" or str(sku.get("name", "")).upper() == "FC1"
    )


def is_flex_site(ref: ResourceRef) -> bool:
    props = _get(ref.body, "properties")
    if isinstance(props, dict) and props.get("functionAppConfig") is not None:
        return True
    farm = _get(props, "serverFarmId")
    return isinstance(farm, Unknown) and isinstance(farm.ref, ResourceRef) and is_flex_plan(farm.ref)


def check_plan(ref: ResourceRef, report: Any) -> None:
    body = ref.body
    props = _get(body, "properties")
    if _get(props, "reserved") is not True:
        report(_line(props, "reserved", _line(body, "properties", ref.decl.line)), "properties.reserved",
               "a Flex Consumption plan runs Linux only: set reserved: true")


def check_site(ref: ResourceRef, settings: list[tuple[Any, int]], report: Any) -> None:
    """settings: (app settings object, line) of every config/appsettings resource of this site."""
    body = ref.body
    props = _get(body, "properties")
    config = _get(props, "functionAppConfig")
    config_line = _line(props, "functionAppConfig", ref.decl.line)
    if not isinstance(config, dict):
        report(ref.decl.line, "properties.functionAppConfig",
               "a Flex Consumption app needs functionAppConfig (deployment, runtime, scaleAndConcurrency)")
        config = {}
    _check_scale(_get(config, "scaleAndConcurrency"), config, config_line, report)
    _check_runtime(_get(config, "runtime"), config, config_line, report)
    _check_deployment(body, _get(config, "deployment"), config, config_line, report)
    for holder, path in ((props, "properties"), (_get(props, "siteConfig"), "properties.siteConfig")):
        if not isinstance(holder, dict):
            continue
        for key in holder:
            if key in DEPRECATED_SITE_PROPERTIES and holder[key] is not None:
                report(_line(holder, key, ref.decl.line), f"{path}.{key}",
                       f"Flex Consumption deprecates {key}: {DEPRECATED_SITE_PROPERTIES[key]}")
    inline = _get(props, "siteConfig", "appSettings")
    if isinstance(inline, list):
        for item in inline:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                _check_setting(item["name"], _line(_get(props, "siteConfig"), "appSettings", ref.decl.line),
                               "properties.siteConfig.appSettings", report)
    for values, line in settings:
        if isinstance(values, dict):
            # The settings object may come from the module's caller: report the caller's line.
            lines = getattr(values, "lines", {})
            file = getattr(values, "file", None) if lines else None
            for name in values:
                _check_setting(name, lines.get(name, line), f"properties.{name}", report, file)


def _check_setting(name: str, line: int, path: str, report: Any, file: Any = None) -> None:
    for deprecated, reason in DEPRECATED_APP_SETTINGS.items():
        if name.upper() == deprecated:
            message = f"app setting {name} is rejected on Flex Consumption: {reason}"
            if file is not None:
                report(line, path, message, file)
            else:
                report(line, path, message)


def _check_scale(scale: Any, config: Any, line: int, report: Any) -> None:
    if not isinstance(scale, dict):
        return
    scale_line = _line(config, "scaleAndConcurrency", line)
    memory = scale.get("instanceMemoryMB")
    if isinstance(memory, int) and memory not in INSTANCE_MEMORY_MB:
        report(_line(scale, "instanceMemoryMB", scale_line),
               "properties.functionAppConfig.scaleAndConcurrency.instanceMemoryMB",
               f"{memory} MB is not a Flex Consumption instance size {INSTANCE_MEMORY_MB}")
    count = scale.get("maximumInstanceCount")
    low, high = MAXIMUM_INSTANCE_COUNT
    if isinstance(count, int) and not low <= count <= high:
        report(_line(scale, "maximumInstanceCount", scale_line),
               "properties.functionAppConfig.scaleAndConcurrency.maximumInstanceCount",
               f"{count} is outside the Flex Consumption range {low}..{high}")


def _check_runtime(runtime: Any, config: Any, line: int, report: Any) -> None:
    path = "properties.functionAppConfig.runtime"
    if not isinstance(runtime, dict):
        report(line, path, "Flex Consumption takes the language from functionAppConfig.runtime: it is missing")
        return
    runtime_line = _line(config, "runtime", line)
    name, version = runtime.get("name"), runtime.get("version")
    if isinstance(name, str):
        if name.lower() not in RUNTIME_VERSIONS:
            report(_line(runtime, "name", runtime_line), f"{path}.name",
                   f"{name!r} is not a Flex Consumption language ({', '.join(RUNTIME_VERSIONS)})")
        elif isinstance(version, str) and version not in RUNTIME_VERSIONS[name.lower()]:
            report(_line(runtime, "version", runtime_line), f"{path}.version",
                   f"{name} {version} is not supported on Flex Consumption "
                   f"({', '.join(RUNTIME_VERSIONS[name.lower()])})")


def _check_deployment(body: Any, deployment: Any, config: Any, line: int, report: Any) -> None:
    path = "properties.functionAppConfig.deployment.storage"
    storage = _get(deployment, "storage")
    if not isinstance(storage, dict):
        report(line, path, "Flex Consumption deploys from a blob container: deployment.storage is missing")
        return
    storage_line = _line(deployment, "storage", _line(config, "deployment", line))
    auth = storage.get("authentication")
    kind = _get(auth, "type")
    auth_line = _line(storage, "authentication", storage_line)
    if isinstance(kind, str) and kind not in IDENTITY_AUTHENTICATION:
        report(auth_line, f"{path}.authentication.type",
               f"{kind}: the deployment container must be reached with a managed identity "
               f"({' or '.join(IDENTITY_AUTHENTICATION)}), not a connection string")
    elif kind is None:
        report(auth_line, f"{path}.authentication", "authentication is missing: use a managed identity")
    identity = str(_get(body, "identity", "type") or "")
    if kind == "SystemAssignedIdentity" and "systemassigned" not in identity.lower().replace(" ", ""):
        report(auth_line, f"{path}.authentication.type",
               "SystemAssignedIdentity, but the site has no system-assigned identity")
    if kind == "UserAssignedIdentity" and not _get(auth, "userAssignedIdentityResourceId"):
        report(auth_line, f"{path}.authentication.userAssignedIdentityResourceId",
               "UserAssignedIdentity needs userAssignedIdentityResourceId")
