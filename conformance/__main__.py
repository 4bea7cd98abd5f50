"""``python -m conformance`` (``make conformance``): Microsoft's Go SDK tests and Python SDK live tests,
fetched at run time, run unchanged against a fresh sbemulator; writes docs/conformance.md.

Options: ``--suite go|python|all``, ``--jobs N`` (Python test files side by side); no test selection:
a suite's run is whole so the report is whole. The report holds the latest run of each suite (a
``--suite go`` run keeps the Python section of the run before it, each under its own command and
date); ``--report-only`` renders it again from the kept results without running anything.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from . import fetch, go_suite, py_suite, runs
from .environment import emulator
from .report import render
from .results import Outcome, classify

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".conformance"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance")
    parser.add_argument("--suite", choices=("go", "python", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=3, help="Python test files run side by side (default 3)")
    # 900: test_queue_receive_keep_conn_alive sleeps 305 s (past the 240 s idle timeout, then a lock
    # duration), test_queue_receiver_sender_resume_after_link_timeout 300 s; at 300 both were cut off.
    parser.add_argument("--test-timeout", type=int, default=900, help="seconds per Python test")
    parser.add_argument("--file-timeout", type=int, default=2400, help="seconds per Python test file")
    parser.add_argument("--go-timeout", type=int, default=1800, help="seconds for the Go run")
    parser.add_argument("--go-args", nargs="*", default=[], help="more go test arguments (e.g. -run Regexp)")
    parser.add_argument("--report", default=str(ROOT / "docs" / "conformance.md"))
    parser.add_argument("--files", nargs="+", default=[], metavar="PATH",
                        help="Python suite: run only these test files (relative to tests/) and replace their "
                             "results in the kept run (the record names them)")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: render the report from the latest kept results of each suite")
    args = parser.parse_args(argv)
    results = {"python": CACHE / "python-results", "go": CACHE / "go-results"}
    if not args.report_only:
        command = "make conformance" if args.suite == "all" else f"python -m conformance --suite {args.suite}"
        if args.suite in ("python", "all"):
            started = time.monotonic()
            root = fetch.python_tests(CACHE)
            print("Python live tests:", flush=True)
            py_suite.run(root, lambda: emulator(CACHE), results["python"], args.jobs, args.test_timeout,
                         args.file_timeout, args.files)
            if args.files:  # the run before keeps its record; the files re-ran since are named in it
                before = runs.load(results["python"])
                if before is not None:
                    command = runs.with_reruns(before.command, args.files)
                    started -= 60 * before.minutes
            runs.save(results["python"], "python", command, time.monotonic() - started)
        if args.suite in ("go", "all"):
            go = shutil.which("go")
            if go is None:
                print("go is not on PATH: the Go suite needs Go 1.23+", file=sys.stderr)
                return 2
            started = time.monotonic()
            module = fetch.go_module(CACHE, go)
            with emulator(CACHE) as running:
                print("Go tests:", flush=True)
                go_suite.run(module, running, go, args.go_timeout, results["go"], *args.go_args)
            runs.save(results["go"], "go", command, time.monotonic() - started)
    outcomes: list[Outcome] = []
    recorded: list[runs.Run] = []
    for suite, load in (("python", py_suite.load), ("go", go_suite.load)):
        run = runs.load(results[suite])
        if run is not None:
            recorded.append(run)
            outcomes += load(results[suite])
    outcomes = [classify(o) for o in outcomes]
    Path(args.report).write_text(render(outcomes, recorded))
    failed = [o for o in outcomes if o.result == "failed"]
    for suite in ("python", "go"):
        mine = [o for o in outcomes if o.suite == suite]
        if mine:
            print(f"{suite}: " + ", ".join(f"{sum(o.result == r for o in mine)} {r}"
                                           for r in ("passed", "failed", "n/a", "skipped")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
