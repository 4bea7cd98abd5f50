"""Findings: one line each, naming file, line, resource, property path and what is wrong."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, order=True)
class Finding:
    file: str
    line: int
    resource: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.resource} {self.path}".strip() if self.path else self.resource
        return f"{self.file}:{self.line}: {where}: {self.message}"


@dataclass
class Findings:
    """Collects findings once each: loops and repeated module uses would otherwise repeat them."""

    root: Path = field(default_factory=Path.cwd)
    items: set[Finding] = field(default_factory=set)

    def add(self, file: Path | str, line: int, resource: str, path: str, message: str) -> None:
        shown = Path(file)
        try:
            shown = shown.resolve().relative_to(self.root.resolve())
        except ValueError:
            pass
        # The instance label (module chain, loop index) is dropped from the key so that one mistake in
        # a loop body is reported once; the symbol names the resource.
        symbol = re.sub(r"\[[^\]]*\]", "", resource.split(" > ")[-1])
        self.items.add(Finding(shown.as_posix(), line, symbol, path, message))

    def sorted(self) -> list[Finding]:
        return sorted(self.items)
