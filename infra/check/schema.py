"""ARM request-body schemas taken from the Azure SDK for Python management packages.

The SDK is generated from the same REST specs that ARM validates against, one model set per API
version, so it is the closest offline stand-in for "what this API version accepts". Two generator
styles are in use and both are read here:

- msrest (multi-API packages such as azure-mgmt-authorization, azure-mgmt-applicationinsights): each
  model has ``_attribute_map`` (python name -> JSON key, flattened as ``properties.x``, and a type
  string such as ``str``, ``[Model]``, ``{str}``) and ``_validation`` (readonly, required, bounds);
- TypeSpec (single-API packages such as azure-mgmt-web 11, azure-mgmt-servicebus 10): fields are
  ``rest_field`` descriptors with a JSON name and a visibility list; ``["read"]`` means read-only and a
  non-Optional annotation means required.

Both become the same tree of :class:`ObjectSchema` nodes. Enum-typed fields are recognised from the
type hints (``Union[str, SomeEnum]``): Azure enums are "extensible" in the SDK (any string is accepted
by the client), but ARM rejects values its API version does not define, so a value outside the enum is
reported as an error.
"""

from __future__ import annotations

import enum
import functools
import importlib
import importlib.metadata
import pkgutil
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Resource provider namespace -> the SDK package (import path, distribution name) that models it.
PROVIDER_PACKAGES: dict[str, tuple[str, str]] = {
    "microsoft.web": ("azure.mgmt.web", "azure-mgmt-web"),
    "microsoft.storage": ("azure.mgmt.storage", "azure-mgmt-storage"),
    "microsoft.servicebus": ("azure.mgmt.servicebus", "azure-mgmt-servicebus"),
    "microsoft.operationalinsights": ("azure.mgmt.loganalytics", "azure-mgmt-loganalytics"),
    "microsoft.insights": ("azure.mgmt.applicationinsights", "azure-mgmt-applicationinsights"),
    "microsoft.authorization": ("azure.mgmt.authorization", "azure-mgmt-authorization"),
    "microsoft.resources": ("azure.mgmt.resource.resources", "azure-mgmt-resource"),
    "microsoft.managedidentity": ("azure.mgmt.msi", "azure-mgmt-msi"),
}

# Resource types whose provider namespace is modelled by more than one package: Microsoft.Insights holds
# Application Insights (components, workbooks: azure-mgmt-applicationinsights, multi-API) and Azure
# Monitor (alerts: azure-mgmt-monitor 7, one models module whose operation groups each pin their own API
# version, read from the operations module's default). Type -> (import path, distribution, operations module).
TYPE_PACKAGES: dict[str, tuple[str, str, str]] = {
    "microsoft.insights/metricalerts": ("azure.mgmt.monitor", "azure-mgmt-monitor", "_metric_alerts_operations"),
    "microsoft.insights/scheduledqueryrules": ("azure.mgmt.monitor", "azure-mgmt-monitor",
                                               "_scheduled_query_rules_operations"),
    "microsoft.insights/actiongroups": ("azure.mgmt.monitor", "azure-mgmt-monitor", "_action_groups_operations"),
}

# ARM resource type -> the SDK model of its PUT body. Where the SDK has a separate create model (storage
# accounts, role assignments) that one is used: it is what the PUT accepts.
RESOURCE_MODELS: dict[str, str] = {
    "microsoft.web/serverfarms": "AppServicePlan",
    "microsoft.web/sites": "Site",
    "microsoft.storage/storageaccounts": "StorageAccountCreateParameters",
    "microsoft.storage/storageaccounts/blobservices": "BlobServiceProperties",
    "microsoft.storage/storageaccounts/blobservices/containers": "BlobContainer",
    "microsoft.storage/storageaccounts/queueservices": "QueueServiceProperties",
    "microsoft.storage/storageaccounts/queueservices/queues": "StorageQueue",
    "microsoft.storage/storageaccounts/tableservices": "TableServiceProperties",
    "microsoft.storage/storageaccounts/tableservices/tables": "Table",
    "microsoft.servicebus/namespaces": "SBNamespace",
    "microsoft.servicebus/namespaces/queues": "SBQueue",
    "microsoft.servicebus/namespaces/topics": "SBTopic",
    "microsoft.servicebus/namespaces/topics/subscriptions": "SBSubscription",
    "microsoft.servicebus/namespaces/topics/subscriptions/rules": "Rule",
    "microsoft.operationalinsights/workspaces": "Workspace",
    "microsoft.insights/components": "ApplicationInsightsComponent",
    "microsoft.insights/workbooks": "Workbook",
    "microsoft.insights/metricalerts": "MetricAlertResource",
    "microsoft.insights/scheduledqueryrules": "ScheduledQueryRuleResource",
    "microsoft.insights/actiongroups": "ActionGroupResource",
    "microsoft.authorization/roleassignments": "RoleAssignmentCreateParameters",
    "microsoft.resources/resourcegroups": "ResourceGroup",
    "microsoft.managedidentity/userassignedidentities": "Identity",
}

# Where the PUT body model differs from what a deployed resource returns, reads such as
# ``storage.properties.primaryEndpoints`` go to the GET model.
RUNTIME_MODELS: dict[str, str] = {
    "microsoft.storage/storageaccounts": "StorageAccount",
    "microsoft.authorization/roleassignments": "RoleAssignment",
}

# Microsoft.Web/sites/config: the model depends on the resource name.
SITE_CONFIG_MODELS: dict[str, str] = {
    "appsettings": "StringDictionary",
    "metadata": "StringDictionary",
    "connectionstrings": "ConnectionStringDictionary",
    "web": "SiteConfigResource",
    "logs": "SiteLogsConfig",
    "authsettings": "SiteAuthSettings",
    "authsettingsv2": "SiteAuthSettingsV2",
}

# Keys of a Bicep resource body that are Bicep/ARM template syntax, not part of the request body.
TEMPLATE_KEYS = {"name", "parent", "scope", "dependsOn"}

PRIMITIVES = {
    "str": "string",
    "int": "int",
    "long": "int",
    "float": "number",
    "decimal": "number",
    "bool": "bool",
    "object": "any",
    "duration": "duration",
    "iso-8601": "datetime",
    "rfc-1123": "datetime",
    "unix-time": "datetime",
    "date": "date",
    "time": "string",
    "bytearray": "string",
    "base64": "string",
}


@dataclass
class TypeRef:
    """The type of one field: a primitive, a nested model, a list/dict of something, or an enum."""

    kind: str  # "string" "int" "number" "bool" "duration" "datetime" "date" "any" "model" "list" "dict"
    name: str = ""
    item: TypeRef | None = None
    enum_values: tuple[str, ...] = ()
    model: ObjectSchema | None = None

    def describe(self) -> str:
        if self.kind == "model":
            return self.name
        if self.kind == "list":
            return f"array of {self.item.describe() if self.item else 'any'}"
        if self.kind == "dict":
            return f"object of {self.item.describe() if self.item else 'any'}"
        if self.enum_values:
            return f"{self.name} ({', '.join(self.enum_values)})"
        return self.kind


@dataclass
class FieldSchema:
    json_name: str
    type: TypeRef
    readonly: bool = False
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None


@dataclass
class ObjectSchema:
    """A JSON object: named fields and nested (flattened) objects; open if extra keys are allowed."""

    name: str
    fields: dict[str, FieldSchema | ObjectSchema] = field(default_factory=dict)
    open: bool = False
    required: bool = False
    #: polymorphic models (msrest ``_subtype_map``): the JSON key that picks the subtype, and
    #: discriminator value -> the subtype's model (read on first use)
    discriminator: str | None = None
    subtype_classes: dict[str, type] = field(default_factory=dict)

    def field_names(self) -> list[str]:
        return sorted(self.fields)

    def subtype(self, value: str) -> ObjectSchema | None:
        """The schema of the subtype a discriminator value names (case-insensitive), or None."""
        for known, cls in self.subtype_classes.items():
            if known.lower() == value.lower():
                return schema_of(cls)
        return None


class SchemaError(Exception):
    """No model for this type@apiVersion: the message says why."""


@dataclass
class ModelSet:
    """The models module of one package at one API version."""

    package: str
    distribution: str
    api_version: str
    module: types.ModuleType

    @property
    def label(self) -> str:
        try:
            version = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        return f"{self.distribution} {version} (API {self.api_version})"


def _module_api_versions(package: types.ModuleType) -> dict[str, str]:
    """API version -> models module path, for multi-API (``vYYYY_MM_DD``) and single-API packages."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(package.__path__):
        match = re.fullmatch(r"v(\d{4})_(\d{2})_(\d{2})(_preview)?", info.name)
        if match:
            version = f"{match[1]}-{match[2]}-{match[3]}" + ("-preview" if match[4] else "")
            found[version] = f"{package.__name__}.{info.name}.models"
    if not found:
        config = sys.modules.get(f"{package.__name__}._configuration") or importlib.import_module(
            f"{package.__name__}._configuration"
        )
        if config.__file__ is None:
            return found
        source = Path(config.__file__).read_text(encoding="utf-8")
        match = re.search(r'api_version[^=\n]*=\s*kwargs\.pop\("api_version",\s*"([^"]+)"\)', source)
        if match:
            found[match[1]] = f"{package.__name__}.models"
    return found


@functools.cache
def available_versions(provider: str) -> dict[str, str]:
    """API versions the installed SDK package of this provider namespace models (empty: not installed)."""
    entry = PROVIDER_PACKAGES.get(provider.lower())
    if entry is None:
        return {}
    try:
        package = importlib.import_module(entry[0])
    except ImportError:
        return {}
    return _module_api_versions(package)


@functools.cache
def _type_versions(resource_type: str) -> dict[str, str]:
    """API version -> models module for a type of :data:`TYPE_PACKAGES` (empty: not installed)."""
    package, _, operations = TYPE_PACKAGES[resource_type]
    try:
        module = importlib.import_module(f"{package}.operations.{operations}")
    except ImportError:
        return {}
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    found = set(re.findall(r'kwargs\.pop\("api_version",\s*_params\.pop\("api-version",\s*"([^"]+)"\)', source))
    return {version: f"{package}.models" for version in found}


def model_set(resource_type: str, api_version: str) -> ModelSet:
    if resource_type.lower() in TYPE_PACKAGES:
        package, distribution, _ = TYPE_PACKAGES[resource_type.lower()]
        versions = _type_versions(resource_type.lower())
        if not versions:
            raise SchemaError(f"{distribution} is not installed: cannot check {resource_type}")
        if api_version not in versions:
            raise SchemaError(f"API version {api_version} of {resource_type} is in no installed SDK "
                              f"({distribution} models {', '.join(sorted(versions))})")
        return ModelSet(package, distribution, api_version, importlib.import_module(versions[api_version]))
    provider = resource_type.split("/")[0]
    entry = PROVIDER_PACKAGES.get(provider.lower())
    if entry is None:
        raise SchemaError(f"no Azure SDK package is mapped for provider {provider}")
    versions = available_versions(provider)
    if not versions:
        raise SchemaError(f"{entry[1]} is not installed: cannot check {resource_type}")
    if api_version not in versions:
        listed = ", ".join(sorted(versions)[-6:])
        raise SchemaError(
            f"API version {api_version} of {resource_type} is in no installed SDK "
            f"({entry[1]} has {listed})"
        )
    return ModelSet(entry[0], entry[1], api_version, importlib.import_module(versions[api_version]))


def model_name_for(resource_type: str, resource_name: Any, runtime: bool = False) -> str:
    key = resource_type.lower()
    if runtime and key in RUNTIME_MODELS:
        return RUNTIME_MODELS[key]
    if key == "microsoft.web/sites/config":
        leaf = resource_name.split("/")[-1].lower() if isinstance(resource_name, str) else ""
        if leaf not in SITE_CONFIG_MODELS:
            raise SchemaError(f"Microsoft.Web/sites/config name {resource_name!r} has no known model")
        return SITE_CONFIG_MODELS[leaf]
    if key not in RESOURCE_MODELS:
        raise SchemaError(f"no SDK model is mapped for resource type {resource_type}")
    return RESOURCE_MODELS[key]


def resource_schema(
    resource_type: str, api_version: str, resource_name: Any = None, runtime: bool = False
) -> tuple[ObjectSchema, ModelSet]:
    """The schema of a PUT body, or with ``runtime`` of the resource as ARM returns it."""
    models = model_set(resource_type, api_version)
    name = model_name_for(resource_type, resource_name, runtime)
    cls = getattr(models.module, name, None)
    if cls is None:
        raise SchemaError(f"{models.label} has no model {name} for {resource_type}")
    return schema_of(cls), models


# --- reading the models --------------------------------------------------------------------------


def _enum_values(cls: type) -> tuple[str, ...]:
    return tuple(str(member.value) for member in cls)  # type: ignore[attr-defined]


def _hint_type(hint: Any, module: types.ModuleType) -> TypeRef:
    """A TypeRef from a resolved typing hint (TypeSpec models and msrest __init__ signatures)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        enums = [a for a in args if isinstance(a, type) and issubclass(a, enum.Enum)]
        if enums:
            return TypeRef("string", name=enums[0].__name__, enum_values=_enum_values(enums[0]))
        if len(args) == 1:
            return _hint_type(args[0], module)
        return TypeRef("any")
    if origin in (list, typing.List):  # noqa: UP006 - typing.List appears in generated code
        (item,) = typing.get_args(hint) or (Any,)
        return TypeRef("list", item=_hint_type(item, module))
    if origin in (dict, typing.Dict):  # noqa: UP006
        key_value = typing.get_args(hint)
        return TypeRef("dict", item=_hint_type(key_value[1], module) if len(key_value) == 2 else TypeRef("any"))
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return TypeRef("string", name=hint.__name__, enum_values=_enum_values(hint))
        if issubclass(hint, bool):
            return TypeRef("bool")
        if issubclass(hint, int):
            return TypeRef("int")
        if issubclass(hint, float):
            return TypeRef("number")
        if issubclass(hint, str):
            return TypeRef("string")
        if hint.__name__ == "timedelta":
            return TypeRef("duration")
        if hint.__name__ in ("datetime", "date"):
            return TypeRef("datetime")
        if hasattr(hint, "_calculated") or hasattr(hint, "_attribute_map"):
            return TypeRef("model", name=hint.__name__, model=schema_of(hint))
    return TypeRef("any")


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _type_hints(obj: Any, module: types.ModuleType) -> dict[str, Any]:
    namespace = dict(vars(module))
    models_pkg = sys.modules.get(module.__name__.rsplit(".", 1)[0])
    if models_pkg is not None:
        namespace.setdefault("_models", models_pkg)
    try:
        return typing.get_type_hints(obj, globalns=namespace)
    except Exception:
        return {}


_IN_PROGRESS: dict[type, ObjectSchema] = {}


def schema_of(cls: type) -> ObjectSchema:
    """The JSON shape of one SDK model class (cached; recursive models refer to the same node)."""
    cached = _SCHEMAS.get(cls) or _IN_PROGRESS.get(cls)
    if cached is not None:
        return cached
    schema = ObjectSchema(cls.__name__)
    _IN_PROGRESS[cls] = schema
    try:
        if hasattr(cls, "_attr_to_rest_field") or hasattr(cls, "_calculated"):
            _read_typespec(cls, schema)
        else:
            _read_msrest(cls, schema)
    finally:
        del _IN_PROGRESS[cls]
    _SCHEMAS[cls] = schema
    return schema


_SCHEMAS: dict[type, ObjectSchema] = {}


def _read_typespec(cls: type, schema: ObjectSchema) -> None:
    module = sys.modules[cls.__module__]
    hints = _type_hints(cls, module)
    for attr, rest in _rest_fields(cls).items():
        hint = hints.get(attr, Any)
        visibility = rest._visibility or []
        readonly = bool(visibility) and set(visibility) <= {"read"}
        json_name = rest._rest_name_input or attr
        schema.fields[json_name] = FieldSchema(
            json_name=json_name,
            type=_hint_type(hint, module),
            readonly=readonly,
            required=not readonly and hint is not Any and not _optional(hint),
        )


def _rest_fields(cls: type) -> dict[str, Any]:
    """python attribute -> rest_field, the way model_base computes it on first instantiation."""
    fields: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            if not attr.startswith("_") and hasattr(value, "_rest_name_input") and hasattr(value, "_visibility"):
                fields[attr] = value
    return fields


_SPLIT_KEY = re.compile(r"(?<!\\)\.")


def _msrest_type(type_string: str, module: types.ModuleType) -> TypeRef:
    if type_string.startswith("[") and type_string.endswith("]"):
        return TypeRef("list", item=_msrest_type(type_string[1:-1], module))
    if type_string.startswith("{") and type_string.endswith("}"):
        return TypeRef("dict", item=_msrest_type(type_string[1:-1], module))
    if type_string in PRIMITIVES:
        return TypeRef(PRIMITIVES[type_string])
    cls = getattr(module, type_string, None)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return TypeRef("string", name=cls.__name__, enum_values=_enum_values(cls))
    if isinstance(cls, type):
        return TypeRef("model", name=type_string, model=schema_of(cls))
    return TypeRef("any")


def _read_msrest(cls: type, schema: ObjectSchema) -> None:
    module = sys.modules[cls.__module__]
    models_module = sys.modules.get(module.__name__.rsplit(".", 1)[0], module)
    validation: dict[str, dict[str, Any]] = getattr(cls, "_validation", {}) or {}
    init_hints = _type_hints(cls.__init__, module)  # type: ignore[misc]  # a class's, not an instance's
    attribute_map = getattr(cls, "_attribute_map", {}) or {}
    for attr, subtypes in (cls.__dict__.get("_subtype_map") or {}).items():
        # a base model such as MetricAlertCriteria: the body's discriminator (``odata.type``) picks the model
        schema.discriminator = attribute_map[attr]["key"].replace("\\.", ".")
        schema.subtype_classes = {value: getattr(models_module, name) for value, name in subtypes.items()
                                  if getattr(models_module, name, None) is not None}
    for attr, spec in (getattr(cls, "_attribute_map", {}) or {}).items():
        key = spec["key"]
        if key == "":
            schema.open = True  # additional_properties: any extra key is allowed
            continue
        type_ref = _msrest_type(spec["type"], models_module)
        hint = init_hints.get(attr)
        if type_ref.kind == "string" and not type_ref.enum_values and hint is not None:
            hinted = _hint_type(hint, module)
            if hinted.enum_values:
                type_ref = hinted
        rules = validation.get(attr, {})
        parts = [p.replace("\\.", ".") for p in _SPLIT_KEY.split(key)]
        node = schema
        for part in parts[:-1]:
            child = node.fields.get(part)
            if not isinstance(child, ObjectSchema):
                child = ObjectSchema(f"{node.name}.{part}")
                node.fields[part] = child
            node = child
        node.fields[parts[-1]] = FieldSchema(
            json_name=parts[-1],
            type=type_ref,
            readonly=bool(rules.get("readonly")),
            required=bool(rules.get("required")),
            minimum=rules.get("minimum"),
            maximum=rules.get("maximum"),
        )
