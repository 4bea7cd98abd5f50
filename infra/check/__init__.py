"""Offline check of infra/*.bicep against Azure's own API models and the Flex Consumption rules.

``python -m infra.check [BICEP_FILES...]`` (default: infra/main.bicep and every module it uses) prints
one line per finding (file, line, resource, property path, what is wrong) and exits 1 if there is any.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.check import flex, roles
from infra.check import schema as schemas
from infra.check.bicep import BicepSyntaxError, named, parse, text
from infra.check.body import BodyChecker
from infra.check.evaluate import FileInstance, ResourceRef
from infra.check.findings import Finding, Findings
from infra.check.params import check_param_defaults
from infra.check.values import InstanceView

INFRA = Path(__file__).resolve().parents[1]
DEFAULT_FILES = (INFRA / "main.bicep",)

__all__ = ["DEFAULT_FILES", "Finding", "check"]


def check(paths: list[Path] | tuple[Path, ...] = DEFAULT_FILES, root: Path | None = None) -> list[Finding]:
    """Findings for the given entry files and every module they use (empty: all good)."""
    findings = Findings(root or INFRA.parent)
    for path in paths:
        try:
            doc = parse(Path(path).resolve())
        except (BicepSyntaxError, OSError) as error:
            findings.add(path, 1, Path(path).name, "", str(error))
            continue
        entry = FileInstance(doc, {}, Path(path).name, findings)
        check_param_defaults(entry)
        _visit(entry, findings)
    return findings.sorted()


def checked_resources(paths: list[Path] | tuple[Path, ...] = DEFAULT_FILES) -> int:
    """How many resource instances the check covers (for the summary line)."""
    findings = Findings()
    count = 0
    for path in paths:
        instances: list[InstanceView] = [FileInstance(parse(Path(path).resolve()), {}, Path(path).name, findings)]
        while instances:
            instance = instances.pop()
            for resource in instance.file.resources.values():
                count += len(instance.resource_refs(resource))
            for module in instance.file.modules.values():
                instances.extend(m.child for m in instance.module_refs(module) if m.child)
    return count


def _property_node(obj: Any, *keys: str) -> Any:
    node = obj
    for key in keys:
        if node is None or node.type != "object":
            return None
        found = None
        for prop in named(node):
            parts = named(prop)
            if prop.type == "object_property" and parts and text(parts[0]).strip("'") == key:
                found = parts[-1]
        node = found
    return node


def _visit(instance: InstanceView, findings: Findings) -> None:
    for module_decl in instance.file.modules.values():
        for module in instance.module_refs(module_decl):
            if module.child is not None:
                _visit(module.child, findings)
    app_settings: dict[int, list[tuple[Any, int]]] = {}
    flex_sites: list[ResourceRef] = []
    for decl in instance.file.resources.values():
        for ref in instance.resource_refs(decl):
            try:
                _check_resource(instance, ref, findings)
            except Exception as error:  # a checker bug must fail the check, not hide it
                _reporter(instance, ref, findings)(ref.decl.line, "", f"could not be checked: {error!r}")
                continue
            kind = ref.decl.type.lower()
            is_settings = isinstance(ref.name, str) and ref.name.lower().endswith("appsettings")
            if kind == "microsoft.web/sites/config" and is_settings:
                parent = ref.parent_ref()
                if parent is not None:
                    props = ref.body.get("properties") if isinstance(ref.body, dict) else None
                    line = getattr(ref.body, "lines", {}).get("properties", ref.decl.line)
                    app_settings.setdefault(id(parent.decl), []).append((props, line))
            elif kind == "microsoft.web/sites" and not ref.decl.existing and flex.is_flex_site(ref):
                flex_sites.append(ref)
            elif kind == "microsoft.web/serverfarms" and not ref.decl.existing and flex.is_flex_plan(ref):
                flex.check_plan(ref, _reporter(instance, ref, findings))
    for site in flex_sites:
        flex.check_site(site, app_settings.get(id(site.decl), []), _reporter(instance, site, findings))


def _reporter(instance: InstanceView, ref: ResourceRef, findings: Findings) -> Any:
    label = f"{ref.label} ({ref.decl.type})"

    def report(line: int, path: str, message: str, file: Path | None = None) -> None:
        findings.add(file or instance.file.path, line, label, path, message)

    return report


def _check_resource(instance: InstanceView, ref: ResourceRef, findings: Findings) -> None:
    report = _reporter(instance, ref, findings)
    decl = ref.decl
    if not decl.api_version:
        report(decl.line, "", f"{decl.type} has no API version")
        return
    try:
        schema, _ = schemas.resource_schema(decl.type, decl.api_version, ref.name)
    except schemas.SchemaError as error:
        report(decl.line, "", str(error))
        return
    if decl.existing:
        return
    runtime = None
    if decl.type.lower() in schemas.RUNTIME_MODELS:
        runtime, _ = schemas.resource_schema(decl.type, decl.api_version, ref.name, runtime=True)
    BodyChecker(report).check_resource(ref.body, schema, decl.line, runtime)
    if decl.type.lower() == "microsoft.authorization/roleassignments":
        node = _property_node(ref.node, "properties", "roleDefinitionId")
        roles.check_role_assignment(ref, text(node) if node is not None else "", report)
