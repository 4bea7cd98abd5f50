"""The values the Bicep evaluator works with: plain JSON values where they are known, typed
placeholders where only the deployment will know them, and references to declared resources and modules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from infra.check import schema as schemas
from infra.check.bicep import BicepFile, ModuleDecl, ResourceDecl
from infra.check.findings import Findings

PLACEHOLDER_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


class InstanceView(Protocol):
    """What the value, function and parameter modules use of the evaluator's ``evaluate.FileInstance``
    (one use of a Bicep file), so that they do not import the evaluator that imports them."""

    file: BicepFile
    args: dict[str, Any]
    findings: Findings
    current: str | None

    @property
    def where(self) -> str: ...

    def param(self, name: str) -> Any: ...

    def eval(self, node: Any, env: dict[str, Any]) -> Any: ...

    def resource_refs(self, decl: ResourceDecl) -> list[ResourceRef]: ...

    def module_refs(self, decl: ModuleDecl) -> list[ModuleRef]: ...

    def outputs(self) -> dict[str, Any]: ...


def load_json(instance: InstanceView, relative: str) -> Any:
    """A JSON file next to the Bicep file (``loadJsonContent``)."""
    path = instance.file.path.parent / relative
    return json.loads(Path(path).read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Unknown:
    """A value known only at deployment, with the Bicep type its expression guarantees."""

    type: str = "any"  # string int bool object array any
    ref: Any = None  # the resource whose .id this is, if it is one
    origin: str = ""


class LDict(dict):
    """An object literal that remembers the source line of each property."""

    def __init__(self, *args: Any, lines: dict[str, int] | None = None, file: Path | None = None) -> None:
        super().__init__(*args)
        self.lines: dict[str, int] = lines or {}
        self.file = file


def bicep_type(value: Any) -> str:
    if isinstance(value, Unknown):
        return value.type
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict | ResourceRef | ModuleRef | RuntimeObject):
        return "object"
    return "any"


def known(value: Any) -> bool:
    """True when no part of the value waits for deployment."""
    if isinstance(value, Unknown | ResourceRef | ModuleRef | RuntimeObject):
        return False
    if isinstance(value, dict):
        return all(known(v) for v in value.values())
    if isinstance(value, list):
        return all(known(v) for v in value)
    return True


@dataclass
class RuntimeObject:
    """Part of a deployed resource (``x.properties``), typed by the API version's model."""

    schema: schemas.ObjectSchema | None
    label: str


@dataclass
class ResourceRef:
    decl: ResourceDecl
    instance: InstanceView
    env: dict[str, Any]
    label: str
    node: Any
    nested_in: ResourceRef | None = None
    _body: Any = None
    _evaluated: bool = False

    @property
    def body(self) -> Any:
        if not self._evaluated:
            self._evaluated = True
            outer, self.instance.current = self.instance.current, f"{self.label} ({self.decl.type})"
            try:
                self._body = self.instance.eval(self.node, self.env)
            finally:
                self.instance.current = outer
        return self._body

    @property
    def name(self) -> Any:
        body = self.body
        return body.get("name", Unknown("string")) if isinstance(body, dict) else Unknown("string")

    @property
    def type(self) -> str:
        return self.decl.type

    def parent_ref(self) -> ResourceRef | None:
        if self.nested_in is not None:
            return self.nested_in
        body = self.body
        parent = body.get("parent") if isinstance(body, dict) else None
        return parent if isinstance(parent, ResourceRef) else None


@dataclass
class ModuleRef:
    decl: ModuleDecl
    instance: InstanceView
    child: InstanceView | None
    name: Any


GUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
