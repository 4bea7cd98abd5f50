"""``python -m conformance`` (``make conformance``): Microsoft's Go SDK tests and Python SDK live tests,
fetched at run time, run unchanged against a fresh sbemulator; writes docs/conformance.md.

Options: ``--suite go|python|all``, ``--jobs N`` (Python test files side by side), ``-k`` passed on to
nothing else: the run is whole so the report is whole.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from . import fetch, go_suite, py_suite
from .environment import emulator
from .report import render
from .results import Outcome, classify

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".conformance"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance")
    parser.add_argument("--suite", choices=("go", "python", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=3, help="Python test files run side by side (default 3)")
    parser.add_argument("--test-timeout", type=int, default=300, help="seconds per Python test")
    parser.add_argument("--file-timeout", type=int, default=2400, help="seconds per Python test file")
    parser.add_argument("--go-timeout", type=int, default=1800, help="seconds for the Go run")
    parser.add_argument("--go-args", nargs="*", default=[], help="more go test arguments (e.g. -run Regexp)")
    parser.add_argument("--report", default=str(ROOT / "docs" / "conformance.md"))
    args = parser.parse_args(argv)
    started = time.monotonic()
    outcomes: list[Outcome] = []
    if args.suite in ("python", "all"):
        root = fetch.python_tests(CACHE)
        with emulator(CACHE) as running:
            print("Python live tests:", flush=True)
            outcomes += py_suite.run(root, running, CACHE / "python-results", args.jobs, args.test_timeout,
                                     args.file_timeout)
    if args.suite in ("go", "all"):
        go = shutil.which("go")
        if go is None:
            print("go is not on PATH: the Go suite needs Go 1.23+", file=sys.stderr)
            return 2
        module = fetch.go_module(CACHE, go)
        with emulator(CACHE) as running:
            print("Go tests:", flush=True)
            outcomes += go_suite.run(module, running, go, args.go_timeout, CACHE / "go-results", *args.go_args)
    outcomes = [classify(o) for o in outcomes]
    command = "make conformance" if args.suite == "all" else f"python -m conformance --suite {args.suite}"
    Path(args.report).write_text(render(outcomes, command, time.monotonic() - started))
    failed = [o for o in outcomes if o.result == "failed"]
    for suite in ("python", "go"):
        mine = [o for o in outcomes if o.suite == suite]
        if mine:
            print(f"{suite}: " + ", ".join(f"{sum(o.result == r for o in mine)} {r}"
                                           for r in ("passed", "failed", "n/a", "skipped")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
