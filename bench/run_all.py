"""Run every benchmark (``make bench``) and summarise which ones met their goals.

Each benchmark runs as its own ``python -m bench.NAME`` process, so one benchmark's SDK threads or
leftover emulator never count in the next one's client CPU, and each writes its own section of
docs/benchmarks.md. Benchmarks whose module is not present are skipped; ``--skip-slow`` leaves out
the long pattern benchmarks (priority latency, load leveling) and keeps the emulator's own, which
take a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import time

from ._util import REPO_ROOT, markdown_table

# (module under bench/, slow?) in the order they run.
BENCHMARKS: list[tuple[str, bool]] = [
    ("startup", False),
    ("emulator_throughput", False),
    ("topic_fanout", False),
    ("priority_latency", True),
    ("load_leveling", True),
]
TIMED_OUT = -1
OUTCOME = {0: "goals met", 1: "goal missed", TIMED_OUT: "timed out"}


def available(name: str) -> bool:
    return importlib.util.find_spec(f"bench.{name}") is not None


def run_one(name: str, extra: list[str], timeout: float) -> tuple[int, float]:
    """Run ``python -m bench.NAME`` in its own process group, killed whole (emulators included) on timeout."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", f"bench.{name}", *extra], cwd=REPO_ROOT, env=env,
                               start_new_session=True)
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        print(f"bench.{name} exceeded {timeout:.0f}s: stopping it", flush=True)
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(process.pid, sig)
                process.wait(grace)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        code = TIMED_OUT
    return code, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-slow", action="store_true",
                        help="leave out priority_latency and load_leveling")
    parser.add_argument("--only", default="", help="comma-separated benchmark names to run (default: all)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per benchmark")
    args = parser.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = only - {name for name, _ in BENCHMARKS}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    rows = []
    worst = 0
    for name, slow in BENCHMARKS:
        if only and name not in only:
            continue
        if slow and args.skip_slow:
            rows.append([name, "-", "skipped (--skip-slow)"])
            continue
        if not available(name):
            rows.append([name, "-", "not present"])
            continue
        print(f"\n=== bench.{name} ===", flush=True)
        code, seconds = run_one(name, ["--no-doc"] if args.no_doc else [], args.timeout)
        rows.append([name, f"{seconds:.0f}", OUTCOME.get(code, f"error (exit {code})")])
        worst = max(worst, 1 if code == 1 else (2 if code else 0))
    print("\n" + markdown_table(["benchmark", "seconds", "result"], rows))
    return worst


if __name__ == "__main__":
    sys.exit(main())
