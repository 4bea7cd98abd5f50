"""docs/conformance.md: per suite and file, passed / failed / not applicable, and why each test that
does not apply does not."""

from __future__ import annotations

import textwrap
from collections import Counter

from .fetch import GO_MODULE, GO_VERSION, PY_PACKAGE, PY_VERSION
from .results import Outcome
from .runs import Run

SUITES = {
    "python": f"Python: {PY_PACKAGE} {PY_VERSION} live tests (its sdist's tests/)",
    "go": f"Go: {GO_MODULE} {GO_VERSION} tests (the module's *_test.go)",
}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("=== RUN"):
            return line.replace("|", "\\|")[:300]
    return ""


def _item(text: str) -> str:
    """One list item wrapped for docs/ (no prose line there over 120 characters: tests/unit/
    test_doc_line_length.py); a test id too long for a line stays whole on a line of its own."""
    return textwrap.fill(text, 116, initial_indent="- ", subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def render(outcomes: list[Outcome], runs: list[Run]) -> str:
    lines = [
        "# Conformance: Microsoft's SDK test suites against sbemulator",
        "",
        "The emulator's fidelity report. Microsoft's own tests, written against real Service Bus, run",
        "unchanged against a fresh sbemulator: the Python SDK's live tests and the Go SDK's tests, fetched at",
        "run time from the package registries (nothing of them is kept in this repository). A shim maps",
        "their surroundings and no assertion: the Python tests' resource preparers create entities through",
        "the emulator's management API and their credential is the namespace's key; the Go tests read",
        "connection strings with `UseDevelopmentEmulator=true` from the environment. `conformance/` says how.",
        "",
        "The runs (each suite's latest; `make conformance` runs both, `--report-only` renders this page again):",
        "",
        *[_item(f"{SUITES[run.suite].split(':')[0]}: `{run.command}`, finished {run.finished}, "
                f"{run.minutes:.0f} min.") for run in runs],
        "",
        "| Suite | Passed | Failed | Not applicable | Skipped by the test itself |",
        "|---|---|---|---|---|",
    ]
    for suite, title in SUITES.items():
        counts = Counter(o.result for o in outcomes if o.suite == suite)
        if counts:
            lines.append(f"| {title} | {counts['passed']} | {counts['failed']} | {counts['n/a']} | "
                         f"{counts['skipped']} |")
    for suite, title in SUITES.items():
        mine = [o for o in outcomes if o.suite == suite]
        if not mine:
            continue
        lines += ["", f"## {title}", "", "| File or package | Passed | Failed | Not applicable | Skipped |",
                  "|---|---|---|---|---|"]
        for group in sorted({o.group for o in mine}):
            c = Counter(o.result for o in mine if o.group == group)
            lines.append(f"| `{group}` | {c['passed']} | {c['failed']} | {c['n/a']} | {c['skipped']} |")
        failed = [o for o in mine if o.result == "failed"]
        if failed:
            lines += ["", "Failed:", ""]
            lines += [_item(f"`{o.group}::{o.name}`: {_first_line(o.detail)}") for o in failed]
        na = [o for o in mine if o.result == "n/a"]
        if na:
            lines += ["", "Not applicable:", ""]
            lines += [_item(f"`{o.group}::{o.name}`: {o.reason}") for o in na]
    return "\n".join(lines) + "\n"
