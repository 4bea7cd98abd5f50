"""The README and docs/*.md read in any editor and in a terminal: no prose line over 120 characters.

Markdown cannot break three kinds of line, so they are left out: table rows (a row is one line),
lines inside fenced code blocks (a command or a connection string is copied whole), and a line that is
one inline code span (a connection string quoted in a list, a command a benchmark ran)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120
ONE_CODE_SPAN = re.compile(r"^\s*(?:[-*] )?`[^`]+`[.,;:]?\s*$")


def _long_lines(path: Path) -> list[str]:
    found, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("|") or ONE_CODE_SPAN.match(line) or len(line) <= LIMIT:
            continue
        found.append(f"{path.relative_to(ROOT)}:{number}: {len(line)} characters")
    return found


def test_no_prose_line_is_over_120_characters() -> None:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(paths) > 5
    assert [line for path in paths for line in _long_lines(path)] == []
