"""Module calls: every argument is a declared parameter of the right type, inside its decorators'
bounds, and no required parameter is left out (what the Bicep compiler reports as BCP035/BCP037/BCP036)."""

from __future__ import annotations

from typing import Any

from infra.check.bicep import ModuleDecl, line_of
from infra.check.values import InstanceView, LDict, Unknown, bicep_type


def _compatible(declared: str, value: Any) -> bool:
    actual = bicep_type(value)
    if declared not in {"string", "int", "bool", "object", "array"} or actual in ("any", "null"):
        return True
    return actual == declared


def check_module_args(parent: InstanceView, decl: ModuleDecl, label: str, child: InstanceView, params: Any) -> None:
    module_file = child.file
    lines = params.lines if isinstance(params, LDict) else {}
    where = f"{label} ({decl.path})"
    if not isinstance(params, dict):
        return
    for name, value in params.items():
        line = lines.get(name, decl.line)
        if name not in module_file.params:
            parent.findings.add(parent.file.path, line, where, f"params.{name}",
                                f"{decl.path} declares no parameter '{name}'")
            continue
        param = module_file.params[name]
        if not _compatible(param.type, value):
            parent.findings.add(parent.file.path, line, where, f"params.{name}",
                                f"parameter is {param.type}, the value is {bicep_type(value)}")
            continue
        _check_decorators(parent, child, name, value, line, where)
    for name, param in module_file.params.items():
        if param.default is None and name not in params and "nullable" not in param.type:
            parent.findings.add(parent.file.path, decl.line, where, f"params.{name}",
                                f"required parameter '{name}' of {decl.path} is not given")


def _check_decorators(parent: InstanceView, child: InstanceView, name: str, value: Any, line: int, where: str) -> None:
    decorators = child.file.params[name].decorators
    if isinstance(value, Unknown):
        return
    if decorators.get("allowed"):
        allowed = child.eval(decorators["allowed"][0], {})
        if isinstance(allowed, list) and value not in allowed:
            parent.findings.add(parent.file.path, line, where, f"params.{name}",
                                f"{value!r} is not one of the allowed values {allowed}")
    bounds = {"minValue": ">=", "maxValue": "<=", "minLength": ">=", "maxLength": "<="}
    for decorator, op in bounds.items():
        if decorator not in decorators or not decorators[decorator]:
            continue
        limit = child.eval(decorators[decorator][0], {})
        measured = len(value) if decorator.endswith("Length") and isinstance(value, str | list) else value
        if isinstance(limit, int) and isinstance(measured, int) and not isinstance(measured, bool):
            ok = measured >= limit if op == ">=" else measured <= limit
            if not ok:
                parent.findings.add(parent.file.path, line, where, f"params.{name}",
                                    f"{measured} breaks @{decorator}({limit}) at line "
                                    f"{line_of(decorators[decorator][0])} of {child.file.path.name}")


def check_param_defaults(instance: InstanceView) -> None:
    """An entry file's defaults must respect their own decorators (what a deployment without a
    parameters file would send)."""
    for name, param in instance.file.params.items():
        if param.default is None or name in instance.args:
            continue
        value = instance.param(name)
        where = f"param {name}"
        if not _compatible(param.type, value):
            instance.findings.add(instance.file.path, param.line, where, "",
                                  f"default is {bicep_type(value)}, the parameter is {param.type}")
            continue
        _check_decorators(instance, instance, name, value, line_of(param.default), where)
