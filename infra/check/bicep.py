"""Bicep files as declarations over a tree-sitter syntax tree.

tree-sitter-bicep (from tree-sitter-language-pack 0.13.0, the last version that ships its grammars
instead of downloading them) keeps every node's position, which the checker needs to name the line of
each error, and it tells identifiers from string literals, which pycep-parser does not.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class BicepSyntaxError(Exception):
    pass


@dataclass
class ParamDecl:
    name: str
    type: str
    default: Any  # tree-sitter node or None
    decorators: dict[str, list[Any]]
    line: int


@dataclass
class ResourceDecl:
    symbol: str
    type: str  # "Microsoft.X/y" (full type, also for nested declarations)
    api_version: str | None
    existing: bool
    body: Any  # object | for_statement | if_statement node
    line: int
    parent: ResourceDecl | None = None  # the enclosing declaration of a nested resource

    @property
    def type_and_version(self) -> str:
        return f"{self.type}@{self.api_version}"


@dataclass
class ModuleDecl:
    symbol: str
    path: str
    body: Any
    line: int


@dataclass
class BicepFile:
    path: Path
    source: bytes
    target_scope: str = "resourceGroup"
    params: dict[str, ParamDecl] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, ResourceDecl] = field(default_factory=dict)
    modules: dict[str, ModuleDecl] = field(default_factory=dict)
    outputs: dict[str, tuple[str, Any]] = field(default_factory=dict)


def text(node: Any) -> str:
    return node.text.decode("utf-8")


def line_of(node: Any) -> int:
    return node.start_point[0] + 1


def named(node: Any) -> list[Any]:
    return [c for c in node.children if c.is_named and c.type != "comment"]


def string_literal(node: Any) -> str:
    """The value of a string node without interpolation (module paths, resource types)."""
    if node.type != "string":
        raise BicepSyntaxError(f"line {line_of(node)}: expected a string literal, got {node.type}")
    parts = []
    for child in node.children:
        if child.type == "string_content":
            parts.append(text(child))
        elif child.type == "escape_sequence":
            parts.append(unescape(text(child)))
        elif child.type == "interpolation":
            raise BicepSyntaxError(f"line {line_of(node)}: interpolation where a literal is required")
    return "".join(parts)


def unescape(sequence: str) -> str:
    simple = {"\\'": "'", "\\\\": "\\", "\\n": "\n", "\\r": "\r", "\\t": "\t", "\\$": "$"}
    if sequence in simple:
        return simple[sequence]
    if sequence.startswith("\\u{"):
        return chr(int(sequence[3:-1], 16))
    return sequence


def _syntax_errors(root: Any) -> list[str]:
    found: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            found.append(f"line {line_of(node)}: syntax error near {text(node)[:40]!r}")
        stack.extend(node.children)
    return found


@functools.cache
def _parser() -> Any:
    from tree_sitter_language_pack import get_parser  # pinned: newer versions fetch grammars at run time

    return get_parser("bicep")


def _decorators(node: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    if node is None or node.type != "decorators":
        return found
    for decorator in named(node):
        call = named(decorator)[0]
        if call.type == "call_expression":
            name = text(call.child_by_field_name("function"))
            args = call.child_by_field_name("arguments")
            found[name.split(".")[-1]] = named(args) if args is not None else []
        else:
            found[text(call)] = []
    return found


def _split_type(type_and_version: str) -> tuple[str, str | None]:
    if "@" in type_and_version:
        kind, version = type_and_version.split("@", 1)
        return kind, version
    return type_and_version, None


def _resource(node: Any, parent: ResourceDecl | None, into: dict[str, ResourceDecl]) -> None:
    parts = named(node)
    symbol = text(parts[0])
    kind, version = _split_type(string_literal(parts[1]))
    if parent is not None and "/" not in kind:  # nested: 'config' or 'config@2024-04-01'
        kind = f"{parent.type}/{kind}"
        version = version or parent.api_version
    existing = any(c.type == "existing" for c in node.children)
    body = parts[-1]
    decl = ResourceDecl(symbol, kind, version, existing, body, line_of(node), parent)
    into[symbol] = decl
    obj = body
    if obj.type == "for_statement":
        obj = obj.child_by_field_name("body") or named(obj)[-1]
    if obj.type == "if_statement":
        obj = named(obj)[-1]
    if obj.type == "object":
        for prop in named(obj):
            for child in named(prop):
                if child.type == "resource_declaration":
                    _resource(child, decl, into)


@functools.cache
def parse(path: Path) -> BicepFile:
    """The declarations of a Bicep file, read once per path (a checker run reads a module many times)."""
    return read(path)


def read(path: Path) -> BicepFile:
    """The declarations of a Bicep file as it is now (a long-running reader, such as devhost, that
    notices edits calls this instead of :func:`parse`)."""
    source = Path(path).read_bytes()
    root = _parser().parse(source).root_node
    errors = _syntax_errors(root)
    if errors:
        raise BicepSyntaxError(f"{path}: " + "; ".join(errors[:3]))
    doc = BicepFile(Path(path), source)
    pending: Any = None
    for node in named(root):
        if node.type == "decorators":
            pending = node
            continue
        decorators = _decorators(pending)
        pending = None
        parts = named(node)
        if node.type == "target_scope_assignment":
            doc.target_scope = string_literal(parts[-1])
        elif node.type == "parameter_declaration":
            default = parts[2] if len(parts) > 2 else None
            doc.params[text(parts[0])] = ParamDecl(
                text(parts[0]), text(parts[1]), default, decorators, line_of(node)
            )
        elif node.type == "variable_declaration":
            doc.variables[text(parts[0])] = parts[-1]
        elif node.type == "resource_declaration":
            _resource(node, None, doc.resources)
        elif node.type == "module_declaration":
            doc.modules[text(parts[0])] = ModuleDecl(
                text(parts[0]), string_literal(parts[1]), parts[-1], line_of(node)
            )
        elif node.type == "output_declaration":
            doc.outputs[text(parts[0])] = (text(parts[1]), parts[-1])
    return doc
