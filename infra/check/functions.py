"""Bicep's built-in functions, computed where the arguments are known, typed where they are not."""

from __future__ import annotations

from typing import Any

from infra.check.bicep import line_of
from infra.check.values import (
    PLACEHOLDER_SUBSCRIPTION,
    InstanceView,
    LDict,
    Unknown,
    bicep_type,
    known,
    load_json,
)

# Functions whose result is only known at deployment, with the type they return.
DEPLOYMENT_TIME = {
    "uniqueString": "string",
    "guid": "string",
    "newGuid": "string",
    "utcNow": "string",
    "reference": "object",
    "environment": "object",
    "deployment": "object",
    "managementGroup": "object",
    "listKeys": "object",
    "listAccountSas": "object",
    "pickZones": "array",
    "getSecret": "string",
}


def _string_function(name: str, args: list[Any]) -> Any:
    if not all(isinstance(a, str | int) and not isinstance(a, bool) for a in args):
        return Unknown("bool" if name in ("startsWith", "endsWith") else "string")
    if name == "toLower":
        return str(args[0]).lower()
    if name == "toUpper":
        return str(args[0]).upper()
    if name == "trim":
        return str(args[0]).strip()
    if name == "replace":
        return str(args[0]).replace(str(args[1]), str(args[2]))
    if name == "startsWith":
        return str(args[0]).lower().startswith(str(args[1]).lower())
    if name == "endsWith":
        return str(args[0]).lower().endswith(str(args[1]).lower())
    if name == "substring":
        start = int(args[1])
        return str(args[0])[start : start + int(args[2])] if len(args) > 2 else str(args[0])[start:]
    if name == "format":
        template = str(args[0])
        for index, value in enumerate(args[1:]):
            template = template.replace("{" + str(index) + "}", str(value))
        return template
    return Unknown("string")


def _resource_id(name: str, args: list[Any]) -> Any:
    """subscriptionResourceId('Microsoft.Authorization/roleDefinitions', guid) and friends, with a
    placeholder subscription: the role check needs the type and the last name, not the subscription."""
    if not all(isinstance(a, str) for a in args):
        return Unknown("string", origin=f"{name}()")
    strings = [str(a) for a in args]
    if name == "tenantResourceId":
        prefix = ""
    elif name == "subscriptionResourceId":
        if len(strings) > 1 and "/" not in strings[0] and strings[0].count("-") == 4:
            strings = strings[1:]
        prefix = f"/subscriptions/{PLACEHOLDER_SUBSCRIPTION}"
    else:
        return Unknown("string", origin=f"{name}()")
    kind, names = strings[0], strings[1:]
    provider, *types = kind.split("/")
    path = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=False))
    return f"{prefix}/providers/{provider}/{path}"


def call_function(instance: InstanceView, name: str, arg_nodes: list[Any], env: dict[str, Any], node: Any) -> Any:
    if name == "loadJsonContent":
        path = instance.eval(arg_nodes[0], env)
        if not isinstance(path, str):
            return Unknown("any")
        try:
            return load_json(instance, path)
        except (OSError, ValueError) as error:
            instance.findings.add(instance.file.path, line_of(node), instance.where, "", f"loadJsonContent: {error}")
            return Unknown("any")
    if name == "loadTextContent":
        path = instance.eval(arg_nodes[0], env)
        return (instance.file.path.parent / path).read_text() if isinstance(path, str) else Unknown("string")
    args = [instance.eval(a, env) for a in arg_nodes]
    if name in DEPLOYMENT_TIME:
        return Unknown(DEPLOYMENT_TIME[name], origin=f"{name}()")
    if name == "subscription":
        return LDict({"id": f"/subscriptions/{PLACEHOLDER_SUBSCRIPTION}", "subscriptionId": PLACEHOLDER_SUBSCRIPTION,
                      "tenantId": Unknown("string"), "displayName": Unknown("string")})
    if name == "tenant":
        return LDict({"tenantId": Unknown("string"), "id": Unknown("string")})
    if name == "resourceGroup":
        return LDict({"id": Unknown("string"), "name": Unknown("string"), "location": Unknown("string")})
    if name in ("toLower", "toUpper", "trim", "replace", "startsWith", "endsWith", "substring", "format"):
        return _string_function(name, args)
    if name in ("subscriptionResourceId", "tenantResourceId", "resourceId", "extensionResourceId"):
        return _resource_id(name, args)
    if name == "string":
        value = args[0] if args else None
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | str):
            return str(value)
        return Unknown("string")
    if name == "int":
        value = args[0] if args else None
        try:
            return int(value) if isinstance(value, int | str) and not isinstance(value, bool) else Unknown("int")
        except ValueError:
            return Unknown("int")
    if name == "bool":
        value = args[0] if args else None
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        return Unknown("bool")
    if name == "empty":
        value = args[0] if args else None
        if value is None:
            return True
        if isinstance(value, str | list | dict):
            return len(value) == 0
        return Unknown("bool")
    if name == "length":
        value = args[0] if args else None
        return len(value) if isinstance(value, str | list | dict) else Unknown("int")
    if name == "contains":
        container, item = ([*args, None, None])[:2]
        if isinstance(container, str) and isinstance(item, str):
            return item in container
        if isinstance(container, list) and known(item):
            return item in container
        if isinstance(container, dict) and isinstance(item, str):
            return item in container
        return Unknown("bool")
    if name == "union":
        if all(isinstance(a, dict) for a in args):
            merged = LDict(file=instance.file.path)
            for a in args:
                merged.update(a)
                merged.lines.update(getattr(a, "lines", {}))
            return merged
        if all(isinstance(a, list) for a in args):
            out: list[Any] = []
            for a in args:
                out.extend(x for x in a if x not in out)
            return out
        return Unknown("object" if any(bicep_type(a) == "object" for a in args) else "any")
    if name == "concat":
        if all(isinstance(a, list) for a in args):
            return [x for a in args for x in a]
        if all(isinstance(a, str | int) for a in args):
            return "".join(str(a) for a in args)
        return Unknown("array" if any(isinstance(a, list) for a in args) else "string")
    if name == "coalesce":
        for a in args:
            if a is not None:
                return a
        return None
    if name in ("first", "last"):
        value = args[0] if args else None
        if isinstance(value, list | str) and value:
            return value[0] if name == "first" else value[-1]
        return Unknown("any")
    if name == "split":
        if isinstance(args[0], str) and isinstance(args[1], str):
            return args[0].split(args[1])
        return Unknown("array")
    if name == "join":
        if isinstance(args[0], list) and all(isinstance(x, str) for x in args[0]) and isinstance(args[1], str):
            return args[1].join(args[0])
        return Unknown("string")
    if name == "range":
        if all(isinstance(a, int) for a in args):
            return list(range(args[0], args[0] + args[1]))
        return Unknown("array")
    if name in ("min", "max"):
        values = args[0] if len(args) == 1 and isinstance(args[0], list) else args
        if values and all(isinstance(v, int) for v in values):
            return min(values) if name == "min" else max(values)
        return Unknown("int")
    if name == "items" and args and isinstance(args[0], dict):
        return [LDict({"key": k, "value": args[0][k]}) for k in sorted(args[0], key=str.lower)]
    if name == "objectKeys" and args and isinstance(args[0], dict):
        return sorted(args[0], key=str.lower)
    if name in ("take", "skip") and len(args) == 2 and isinstance(args[0], list | str) and isinstance(args[1], int):
        return args[0][: args[1]] if name == "take" else args[0][args[1] :]
    if name == "any":
        return args[0] if args else None
    if name in ("json",):
        return Unknown("any")
    if name in ("base64", "uri", "uriComponent", "dataUri", "padLeft", "take", "skip", "items",
                "filter", "map", "reduce", "sort", "toObject", "flatten", "objectKeys", "shallowMerge"):
        return Unknown({"base64": "string", "uri": "string", "uriComponent": "string", "dataUri": "string",
                        "padLeft": "string", "items": "array", "filter": "array", "map": "array",
                        "sort": "array", "toObject": "object", "flatten": "array", "objectKeys": "array",
                        "shallowMerge": "object"}.get(name, "any"))
    instance.findings.add(instance.file.path, line_of(node), instance.where, "", f"unknown function '{name}'")
    return Unknown("any")
