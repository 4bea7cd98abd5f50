"""The broker's modules depend in one direction, and the admin plane uses only the broker's public API.

Imports are read with ``ast`` (including the ones under ``if TYPE_CHECKING:``, which are dependencies
too), so the check needs no import side effects.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sbemulator

PACKAGE = Path(sbemulator.__file__).parent
BROKER = PACKAGE / "broker"


def _broker_imports(path: Path) -> set[str]:
    """The sibling modules of ``sbemulator.broker`` that a module imports (``filters`` as one node)."""
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                names = [node.module] if node.module else [a.name for a in node.names]
            elif node.level == 0 and node.module and node.module.startswith("sbemulator.broker."):
                names = [node.module.split(".")[2]]
            elif node.level == 0 and node.module == "sbemulator.broker":
                names = ["__init__"]
            else:
                continue
            out.update(n.split(".")[0] for n in names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sbemulator.broker."):
                    out.add(alias.name.split(".")[2])
    return out


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in BROKER.glob("*.py") if p.stem != "__init__"}
    return {name: _broker_imports(path) & set(modules) - {name} for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_graph_reader_sees_a_cycle_when_there_is_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_broker_modules_depend_in_one_direction() -> None:
    graph = _graph()
    components = {"topology", "flow", "sessions", "settlement", "inspection", "timers", "wakeups"}
    assert {"core", "entity", "receiver", *components} <= set(graph)
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"
    # the layering the core docstring describes
    for leaf in ("errors", "views"):  # the message model is sbemulator.model, below the broker
        assert graph[leaf] == set(), f"{leaf} should import no other broker module"
    for module, deps in graph.items():
        if module != "core":
            assert "core" not in deps, f"{module} imports core"
    assert "receiver" not in graph["entity"]
    # components know each other by Protocol or by constructor argument; only the facade knows them all
    for module in components:
        assert "flow" not in graph[module] or module == "flow", f"{module} imports flow"
    assert graph["timers"] <= {"entity"}
    assert graph["wakeups"] <= {"entity", "receiver"}


def test_the_broker_is_components_without_mixins_or_borrowed_privates() -> None:
    """No class inherits from a mixin (the broker facade has no base class), and no broker module reads
    or writes a private attribute of another object (``x._y`` with ``x`` other than ``self``)."""
    offenders = []
    for path in sorted(BROKER.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith("Mixin") for b in bases) or (node.name == "Broker" and bases):
                    offenders.append(f"{path.name}:{node.lineno} class {node.name}({', '.join(bases)})")
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert offenders == []


def test_admin_plane_reads_no_broker_internals() -> None:
    """No ``broker._anything`` and no import of the broker's container classes in sbemulator/admin."""
    offenders = []
    for path in sorted((PACKAGE / "admin").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if base_name in ("broker", "_broker"):
                    offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module == "sbemulator.broker.entity":
                imported = {a.name for a in node.names} - {"QUEUE", "TOPIC", "SUBSCRIPTION"}
                if imported:
                    offenders.append(f"{path.name}:{node.lineno} imports {sorted(imported)}")
    assert offenders == []
