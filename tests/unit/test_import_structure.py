"""The import structure of the whole repository: no import cycles between modules; the emulator's
layers point one way (``amqp`` <- ``gateway`` <- ``runtime``; the broker and the store below the
gateway; the admin plane over the broker's public API only); and so do the project's parts (``shared``
<- ``sender``, ``consumers`` <- ``functions`` <- ``function_app``; ``devhost``, ``bench`` and ``tests``
over them), with every top-level package and module placed.

Imports are read with ``ast`` (those under ``if TYPE_CHECKING:`` and inside functions too: they are
dependencies as well), so the check has no import side effects. The broker's own module graph is
checked in more detail by test_broker_structure.py.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sbemulator", "shared", "sender", "consumers", "functions", "devhost", "infra", "bench", "tests")
SKIP_PARTS = {"node_modules", "examples", "__pycache__", "infra_bad"}

# Cycles that exist today and are someone's work in progress; this list may only shrink.
KNOWN_CYCLES: set[frozenset[str]] = set()


@functools.cache
def _modules() -> dict[str, Path]:
    out = {path.stem: path for path in ROOT.glob("*.py")}  # function_app.py
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if SKIP_PARTS & set(path.relative_to(ROOT).parts):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The repository modules ``name`` imports (a name imported from a package counts as its module
    when it is one, else as the package)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}




def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.add(frozenset(component))
    return out


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
    assert _cycles({"a": {"b"}, "b": set()}) == set()


def test_no_import_cycles_in_the_repository() -> None:
    cycles = _cycles(_graph())
    # a known cycle that is gone is fine (remove it from KNOWN_CYCLES then); only new ones fail
    new = {c for c in cycles if not any(c <= known for known in KNOWN_CYCLES)}
    assert not new, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in new)


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "sbemulator" or len(parts) == 1:
        return parts[0]
    layers = ("amqp", "filters", "broker", "store", "gateway", "runtime", "admin", "net", "scheduling")
    return parts[1] if len(parts) > 2 or parts[1] in layers else "root"


# What each layer of the emulator may import (besides itself and the shared root modules config,
# descriptions, auth, model and tracked, the collector-friendly dict). Read as "may depend on".
ALLOWED = {
    "scheduling": set(),  # the cooperative scheduler's core (jobs, budgets, slice settings): below every layer
    "amqp": {"scheduling"},  # its slice settings only (Slices: range and batch thresholds, the hold bound)
    "filters": {"amqp"},  # the rule language: message values are AMQP's (filters compare amqp.types)
    # the store is the Store Protocol, for types
    "broker": {"amqp", "filters", "scheduling"},
    # it stores the messages of sbemulator.model (a root module) in AMQP encoding; Slices: its commit and drop sizes
    "store": {"amqp", "scheduling"},
    "gateway": {"amqp", "filters", "broker", "scheduling"},
    "net": set(),  # listening sockets that tell protocols apart by their first bytes
    "admin": {"amqp", "filters", "broker", "gateway", "net", "scheduling"},
    "runtime": {"amqp", "filters", "broker", "store", "gateway", "admin", "net", "scheduling"},
}
ROOT_MODULES = {"sbemulator.config", "sbemulator.descriptions", "sbemulator.auth", "sbemulator.model",
                "sbemulator.tracked"}


def test_the_emulator_layers_point_one_way() -> None:
    offenders = []
    for module, deps in sorted(_graph().items()):
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        for dep in sorted(deps):
            dep_layer = _layer(dep)
            if dep in ROOT_MODULES or dep_layer == layer or not dep.startswith("sbemulator"):
                continue
            if layer == "broker" and dep == "sbemulator.store.base":
                continue  # the Store Protocol, for types
            if dep_layer not in ALLOWED[layer]:
                offenders.append(f"{module} -> {dep}")
    assert offenders == []


def test_the_root_modules_import_no_layer_above_them() -> None:
    graph = _graph()
    offenders = [
        f"{m} -> {d}"
        for m in sorted(ROOT_MODULES & set(graph))
        for d in sorted(graph[m])
        if _layer(d) in ("broker", "gateway", "runtime", "admin", "store")
    ]
    assert offenders == []


def test_the_shipped_package_imports_nothing_of_the_tests() -> None:
    graph = _graph()
    offenders = [f"{m} -> {d}" for m, deps in graph.items() if m.startswith("sbemulator") for d in deps
                 if not d.startswith("sbemulator")]
    assert offenders == []


def test_the_admin_plane_reaches_the_broker_only_through_its_public_modules() -> None:
    public = {"sbemulator.broker", "sbemulator.broker.api", "sbemulator.broker.errors",
              "sbemulator.broker.views", "sbemulator.broker.entity", "sbemulator.broker.clock",
              "sbemulator.broker.unit_of_work"}
    graph = _graph()
    offenders = [f"{m} -> {d}" for m, deps in sorted(graph.items()) if _layer(m) == "admin"
                 for d in sorted(deps) if _layer(d) == "broker" and d not in public]
    assert offenders == []


# What each top-level part of the repository may import of the others (read as "may depend on"):
# the pipeline's own code over ``shared``, the Functions adapters over what they adapt, the local
# host over the pipeline and the emulator (and infra's Bicep reader for the apps' scale settings);
# benchmarks and tests over anything but each other's dependants. sbemulator imports nothing of the
# project (test_the_shipped_package_imports_nothing_of_the_tests).
PROJECT_ALLOWED = {
    "shared": set(),
    "sender": {"shared"},
    "consumers": {"shared"},
    "functions": {"shared", "sender", "consumers"},
    "function_app": {"functions", "shared"},
    "infra": set(),
    "devhost": {"shared", "sender", "consumers", "infra", "sbemulator"},
    "bench": {"shared", "sender", "consumers", "functions", "function_app", "devhost", "infra", "sbemulator"},
    "tests": {"shared", "sender", "consumers", "functions", "function_app", "devhost", "infra", "sbemulator",
              "bench"},
}


def test_every_part_of_the_repository_is_placed() -> None:
    unplaced = sorted({m.split(".")[0] for m in _modules()} - set(PROJECT_ALLOWED) - {"sbemulator"})
    assert unplaced == []


def _project_offenders(graph: dict[str, set[str]]) -> list[str]:
    offenders = []
    for module, deps in sorted(graph.items()):
        part = module.split(".")[0]
        if part == "sbemulator":
            continue
        for dep in sorted(deps):
            dep_part = dep.split(".")[0]
            if dep_part != part and dep_part not in PROJECT_ALLOWED[part]:
                offenders.append(f"{module} -> {dep}")
    return offenders


def test_the_project_parts_point_one_way() -> None:
    assert _project_offenders(_graph()) == []


def test_the_project_check_finds_an_import_pointing_back_up() -> None:
    graph = {"shared.settings": {"consumers.priority"}, "consumers.priority": {"shared.settings"},
             "tests.unit.x": {"bench.y"}}
    assert _project_offenders(graph) == ["shared.settings -> consumers.priority"]
    assert "function_app" in _modules()


NO_DOCSTRING_YET: set[str] = set()


def test_every_package_says_what_lives_there() -> None:
    missing = []
    for name, path in sorted(_modules().items()):
        if path.name != "__init__.py" or name.startswith("tests") or name in NO_DOCSTRING_YET:
            continue
        if ast.get_docstring(ast.parse(path.read_text())) is None:
            missing.append(name)
    assert missing == []
