"""A partial evaluator for Bicep expressions, enough to see each resource body as ARM would receive it.

Parameters take their defaults (or the values a module call passes), variables and
``loadJsonContent`` are computed, loops over known arrays are unrolled, modules are followed. What is
only known at deployment (``uniqueString``, ``resource.id``, runtime properties, parameters without a
default) becomes :class:`Unknown` carrying the type the expression tells: an interpolated string is a
string, ``int()`` an int, ``resource.properties.x`` the type the API version's model gives ``x``.

Objects built from Bicep literals remember the line of each property (:class:`LDict`), so a finding can
name the line it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.check import schema as schemas
from infra.check.bicep import BicepFile, ModuleDecl, ResourceDecl, line_of, named, parse, text, unescape
from infra.check.findings import Findings
from infra.check.values import (
    GUID_RE,
    PLACEHOLDER_SUBSCRIPTION,
    LDict,
    ModuleRef,
    ResourceRef,
    RuntimeObject,
    Unknown,
    bicep_type,
    known,
    load_json,
)

__all__ = [
    "GUID_RE",
    "PLACEHOLDER_SUBSCRIPTION",
    "FileInstance",
    "LDict",
    "ModuleRef",
    "ResourceRef",
    "RuntimeObject",
    "Unknown",
    "bicep_type",
    "known",
    "load_json",
]

@dataclass
class FileInstance:
    """One use of a Bicep file: its parameter values and everything evaluated from them."""

    file: BicepFile
    args: dict[str, Any]
    label: str
    findings: Findings
    arg_lines: dict[str, int] = field(default_factory=dict)
    _vars: dict[str, Any] = field(default_factory=dict)
    _resources: dict[str, list[ResourceRef]] = field(default_factory=dict)
    _modules: dict[str, list[ModuleRef]] = field(default_factory=dict)
    _outputs: dict[str, Any] | None = None
    _resolving: set[str] = field(default_factory=set)
    current: str | None = None  # the resource whose body is being evaluated, for findings

    @property
    def where(self) -> str:
        return self.current or self.label

    # --- symbols -------------------------------------------------------------------------------

    def param(self, name: str) -> Any:
        decl = self.file.params[name]
        if name in self.args:
            return self.args[name]
        if decl.default is not None:
            return self.eval(decl.default, {})
        return Unknown(decl.type if decl.type in {"string", "int", "bool", "object", "array"} else "any",
                       origin=f"parameter {name}")

    def variable(self, name: str) -> Any:
        if name not in self._vars:
            if name in self._resolving:
                return Unknown("any")
            self._resolving.add(name)
            self._vars[name] = self.eval(self.file.variables[name], {})
            self._resolving.discard(name)
        return self._vars[name]

    def _loop_items(self, node: Any, env: dict[str, Any]) -> tuple[list[tuple[dict[str, Any], str]], Any]:
        """Per iteration: (bindings, label suffix) and the loop body node."""
        parts = named(node)
        head, source, body = parts[0], parts[1], parts[-1]
        names = [text(c) for c in named(head)] if head.type == "for_loop_parameters" else [text(head)]
        items = self.eval(source, env)
        bindings: dict[str, Any]
        if not isinstance(items, list):
            bindings = {names[0]: Unknown("any")}
            if len(names) > 1:
                bindings[names[1]] = Unknown("int")
            return [(env | bindings, "[*]")], body
        result = []
        for index, item in enumerate(items):
            bindings = {names[0]: item}
            if len(names) > 1:
                bindings[names[1]] = index
            result.append((env | bindings, f"[{index}]"))
        return result, body

    def _unwrap(self, body: Any, env: dict[str, Any], label: str) -> list[tuple[Any, dict[str, Any], str]]:
        """(object node, env, label) per instance of a resource or module body; conditions are ignored
        on purpose: a body deployed only sometimes must still be valid."""
        if body.type == "for_statement":
            iterations, inner = self._loop_items(body, env)
            out = []
            for loop_env, suffix in iterations:
                out.extend(self._unwrap(inner, loop_env, label + suffix))
            return out
        if body.type == "if_statement":
            return self._unwrap(named(body)[-1], env, label)
        return [(body, env, label)]

    def resource_refs(self, decl: ResourceDecl) -> list[ResourceRef]:
        if decl.symbol not in self._resources:
            parents: list[ResourceRef | None] = [None]
            if decl.parent is not None:  # a nested declaration, once per instance of its parent
                parents = list(self.resource_refs(decl.parent))
            refs = []
            for parent in parents:
                env = parent.env if parent is not None else {}
                label = f"{parent.label}::{decl.symbol}" if parent is not None else decl.symbol
                for obj, loop_env, name in self._unwrap(decl.body, env, label):
                    refs.append(ResourceRef(decl, self, loop_env, name, obj, nested_in=parent))
            self._resources[decl.symbol] = refs
        return self._resources[decl.symbol]

    def module_refs(self, decl: ModuleDecl) -> list[ModuleRef]:
        if decl.symbol not in self._modules:
            refs = []
            for obj, env, label in self._unwrap(decl.body, {}, decl.symbol):
                body = self.eval(obj, env)
                params = body.get("params", {}) if isinstance(body, dict) else {}
                path = (self.file.path.parent / decl.path).resolve()
                child = None
                try:
                    child_file = parse(path)
                except Exception as error:
                    self.findings.add(self.file.path, decl.line, label, "", f"module {decl.path}: {error}")
                else:
                    args = dict(params) if isinstance(params, dict) else {}
                    lines = params.lines if isinstance(params, LDict) else {}
                    child = FileInstance(child_file, args, f"{self.label} > {label}", self.findings, lines)
                    self._check_module_args(decl, label, child, params)
                refs.append(ModuleRef(decl, self, child, body.get("name") if isinstance(body, dict) else None))
            self._modules[decl.symbol] = refs
        return self._modules[decl.symbol]

    def _check_module_args(self, decl: ModuleDecl, label: str, child: FileInstance, params: Any) -> None:
        from infra.check.params import check_module_args  # one job per module

        check_module_args(self, decl, label, child, params)

    def outputs(self) -> dict[str, Any]:
        if self._outputs is None:
            self._outputs = {}
            for name, (_, node) in self.file.outputs.items():
                self._outputs[name] = self.eval(node, {})
        return self._outputs

    def lookup(self, name: str, env: dict[str, Any], node: Any) -> Any:
        if name in env:
            return env[name]
        if name in self.file.params:
            return self.param(name)
        if name in self.file.variables:
            return self.variable(name)
        if name in self.file.resources:
            refs = self.resource_refs(self.file.resources[name])
            return refs if self.file.resources[name].body.type == "for_statement" else refs[0]
        if name in self.file.modules:
            modules = self.module_refs(self.file.modules[name])
            return modules if self.file.modules[name].body.type == "for_statement" else modules[0]
        if name in {"az", "sys"}:
            return Unknown("object", origin=name)
        self.findings.add(self.file.path, line_of(node), self.where, "", f"unknown symbol '{name}'")
        return Unknown("any")

    # --- expressions ---------------------------------------------------------------------------

    def eval(self, node: Any, env: dict[str, Any]) -> Any:
        kind = node.type
        if kind == "string":
            return self._string(node, env)
        if kind == "number":
            return int(text(node))
        if kind == "boolean":
            return text(node) == "true"
        if kind == "null":
            return None
        if kind == "identifier":
            return self.lookup(text(node), env, node)
        if kind == "parenthesized_expression":
            return self.eval(named(node)[0], env)
        if kind == "object":
            return self._object(node, env)
        if kind == "array":
            return [self.eval(item, env) for item in named(node)]
        if kind == "for_statement":
            iterations, body = self._loop_items(node, env)
            out = []
            for loop_env, _ in iterations:
                item = body
                if item.type == "if_statement":
                    if self.eval(named(item)[0], loop_env) is False:
                        continue
                    item = named(item)[-1]
                out.append(self.eval(item, loop_env))
            return out
        if kind == "member_expression":
            return self._member(node, env)
        if kind == "subscript_expression":
            target = self.eval(node.child_by_field_name("object"), env)
            index = self.eval(node.child_by_field_name("index"), env)
            return self._index(target, index, node)
        if kind == "call_expression":
            return self._call(node, env)
        if kind == "unary_expression":
            operator = text(node.child_by_field_name("operator"))
            value = self.eval(named(node)[-1], env)
            if operator == "!":
                return (not value) if isinstance(value, bool) else Unknown("bool")
            if operator == "-":
                return -value if isinstance(value, int) else Unknown("int")
            return Unknown("any")
        if kind == "binary_expression":
            return self._binary(node, env)
        if kind == "ternary_expression":
            condition = self.eval(node.child_by_field_name("condition"), env)
            if condition is True:
                return self.eval(node.child_by_field_name("consequence"), env)
            if condition is False:
                return self.eval(node.child_by_field_name("alternative"), env)
            a = self.eval(node.child_by_field_name("consequence"), env)
            b = self.eval(node.child_by_field_name("alternative"), env)
            if a is None or b is None:  # null is "left out": the other branch is what gets checked
                return b if a is None else a
            ta, tb = bicep_type(a), bicep_type(b)
            return Unknown(ta if ta == tb else "any")
        if kind == "lambda_expression":
            return Unknown("any", origin="lambda")
        return Unknown("any", origin=kind)

    def _string(self, node: Any, env: dict[str, Any]) -> Any:
        parts: list[str] = []
        unknown = False
        for child in node.children:
            if child.type == "string_content":
                parts.append(text(child))
            elif child.type == "escape_sequence":
                parts.append(unescape(text(child)))
            elif child.type == "interpolation":
                value = self.eval(named(child)[0], env)
                if isinstance(value, str):
                    parts.append(value)
                elif isinstance(value, bool):
                    parts.append("true" if value else "false")
                elif isinstance(value, int):
                    parts.append(str(value))
                else:
                    unknown = True
        text_value = "".join(parts)
        if text_value.startswith("\n") and node.children and text(node.children[0]) == "'''":
            text_value = text_value[1:]
        return Unknown("string", origin="interpolation") if unknown else text_value

    def _object(self, node: Any, env: dict[str, Any]) -> LDict:
        result = LDict(file=self.file.path)
        for prop in named(node):
            if prop.type != "object_property":
                continue
            parts = named(prop)
            if not parts or parts[0].type == "resource_declaration":
                continue
            key_node, value_node = parts[0], parts[-1]
            key = self._string(key_node, env) if key_node.type == "string" else text(key_node)
            if not isinstance(key, str):
                continue
            result[key] = self.eval(value_node, env)
            result.lines[key] = line_of(prop)
        return result

    def _member(self, node: Any, env: dict[str, Any]) -> Any:
        # tree-sitter-bicep binds `c ? a : b.x` as `(c ? a : b).x`; Bicep means `c ? a : (b.x)`.
        chain: list[Any] = []
        base = node
        while base.type in ("member_expression", "subscript_expression"):
            chain.append(base)
            base = base.child_by_field_name("object")
        if base.type == "ternary_expression":
            condition = self.eval(base.child_by_field_name("condition"), env)
            if condition is True:
                return self.eval(base.child_by_field_name("consequence"), env)
            value = self.eval(base.child_by_field_name("alternative"), env)
            for access in reversed(chain):
                value = self._apply(access, value, env)
            if condition is False:
                return value
            return Unknown(bicep_type(value) if bicep_type(value) != "null" else "any")
        value = self.eval(base, env)
        for access in reversed(chain):
            value = self._apply(access, value, env)
        return value

    def _apply(self, access: Any, value: Any, env: dict[str, Any]) -> Any:
        if access.type == "subscript_expression":
            return self._index(value, self.eval(access.child_by_field_name("index"), env), access)
        name = text(access.child_by_field_name("property"))
        safe = any(c.type == ".?" for c in access.children)
        return self.member(value, name, safe, access)

    def member(self, value: Any, name: str, safe: bool, node: Any) -> Any:
        if value is None:
            if not safe:
                self.findings.add(self.file.path, line_of(node), self.where, "", f"reads '{name}' of null")
            return None
        if isinstance(value, dict):
            if name in value:
                return value[name]
            folded = {k.lower(): k for k in value}
            if name.lower() in folded:  # ARM template property access ignores case
                return value[folded[name.lower()]]
            if not safe:
                self.findings.add(
                    self.file.path, line_of(node), self.where, "",
                    f"reads property '{name}' that the object does not have (use '.?' if it is optional)",
                )
            return None if safe else Unknown("any")
        if isinstance(value, ResourceRef):
            return self._resource_member(value, name, node)
        if isinstance(value, ModuleRef):
            if name == "outputs":
                return value.child.outputs() if value.child else Unknown("object")
            if name == "name":
                return value.name
            return Unknown("any")
        if isinstance(value, RuntimeObject):
            return self._runtime_member(value, name, node)
        return Unknown("any")

    def _resource_member(self, ref: ResourceRef, name: str, node: Any) -> Any:
        if name == "id":
            return Unknown("string", ref=ref, origin="resource id")
        if name == "name":
            return ref.name
        if name in ("type", "apiVersion"):
            return ref.decl.type if name == "type" else ref.decl.api_version
        try:
            schema, _ = schemas.resource_schema(ref.decl.type, ref.decl.api_version or "", ref.name, runtime=True)
        except schemas.SchemaError:
            return Unknown("any")
        return self._runtime_member(RuntimeObject(schema, ref.decl.type), name, node)

    def _runtime_member(self, obj: RuntimeObject, name: str, node: Any) -> Any:
        if obj.schema is None or obj.schema.open:
            return Unknown("any")
        entry = obj.schema.fields.get(name)
        if entry is None:
            self.findings.add(
                self.file.path, line_of(node), self.where, "",
                f"reads '{name}', which {obj.schema.name} of {obj.label} does not have",
            )
            return Unknown("any")
        if isinstance(entry, schemas.ObjectSchema):
            return RuntimeObject(entry, obj.label)
        kind = entry.type.kind
        if kind == "model":
            return RuntimeObject(entry.type.model, obj.label)
        mapping = {"list": "array", "dict": "object", "duration": "string", "datetime": "string",
                   "date": "string", "number": "int"}
        return Unknown(mapping.get(kind, kind), origin=f"{obj.label}.{name}")

    def _index(self, target: Any, index: Any, node: Any) -> Any:
        if isinstance(target, list):
            if isinstance(index, int):
                if 0 <= index < len(target):
                    return target[index]
                self.findings.add(self.file.path, line_of(node), self.where, "", f"index {index} out of range")
                return Unknown("any")
            return target[0] if target and isinstance(target[0], ResourceRef | ModuleRef) else Unknown("any")
        if isinstance(target, dict | ResourceRef | ModuleRef | RuntimeObject) and isinstance(index, str):
            return self.member(target, index, False, node)
        return Unknown("any")

    def _binary(self, node: Any, env: dict[str, Any]) -> Any:
        operator = text(node.child_by_field_name("operator"))
        left = self.eval(node.child_by_field_name("left"), env)
        if operator == "??":
            if left is not None and not isinstance(left, Unknown):
                return left
            right = self.eval(node.child_by_field_name("right"), env)
            return right if left is None else Unknown(bicep_type(right))
        if operator in ("&&", "||"):
            if operator == "&&" and left is False:
                return False
            if operator == "||" and left is True:
                return True
            right = self.eval(node.child_by_field_name("right"), env)
            if isinstance(right, bool) and isinstance(left, bool):
                return right
            return Unknown("bool")
        right = self.eval(node.child_by_field_name("right"), env)
        both_known = known(left) and known(right)
        if operator in ("==", "!=", "=~", "!~"):
            if not both_known:
                return Unknown("bool")
            if operator in ("=~", "!~") and isinstance(left, str) and isinstance(right, str):
                equal = left.lower() == right.lower()
            else:
                equal = left == right
            return equal if operator in ("==", "=~") else not equal
        if operator in ("<", ">", "<=", ">="):
            if isinstance(left, int) and isinstance(right, int):
                return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[operator]
            return Unknown("bool")
        if operator in ("+", "-", "*", "/", "%"):
            if isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool):
                if operator in ("/", "%") and right == 0:
                    return Unknown("int")
                return {"+": left + right, "-": left - right, "*": left * right,
                        "/": int(left / right), "%": left % right}[operator]
            return Unknown("int")
        return Unknown("any")

    def _call(self, node: Any, env: dict[str, Any]) -> Any:
        from infra.check.functions import call_function  # the function table lives on its own

        function = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        arg_nodes = named(arguments) if arguments is not None else []
        if function.type == "member_expression":
            target = function.child_by_field_name("object")
            name = text(function.child_by_field_name("property"))
            if target.type == "identifier" and text(target) in ("az", "sys"):
                return call_function(self, name, arg_nodes, env, node)
            self.eval(target, env)
            return Unknown("any", origin=f"{name}()")  # resource functions such as listKeys()
        return call_function(self, text(function), arg_nodes, env, node)


