"""Emulator start-up time and idle memory, as a test suite or ``make demo`` experiences them.

Start-up is measured from just before ``Popen`` to the moment the ``ready`` line is read (interpreter
start, imports, config parsing, store and socket included), median of several runs; idle RSS is read
from ``/proc/<pid>/status`` shortly after ready. Goals: under 0.5 s and under 60 MB with the
project's topology (``infra/servicebus.json``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

from ._util import (
    REPO_ROOT,
    command_line,
    machine,
    markdown_table,
    process_rss_mb,
    start_emulator,
    today,
    write_section,
)

CONFIG = REPO_ROOT / "infra" / "servicebus.json"
STARTUP_GOAL_S = 0.5
RSS_GOAL_MB = 60.0


def measure_once(mode_args: tuple[str, ...], settle: float) -> tuple[float, float, float]:
    """(measured start-up s, start-up the emulator reported s, idle RSS MiB) of one fresh process."""
    proc = start_emulator(CONFIG, *mode_args)
    try:
        time.sleep(settle)
        rss = process_rss_mb(proc.pid)
    finally:
        proc.terminate()
    return proc.measured_startup, proc.startup_seconds, rss


VARIANTS = [
    # (mode, management endpoint, extra args); "--admin-port 0" keeps the default HTTPS endpoint on
    # but on a free port, so a developer's running emulator (port 5300) does not collide.
    ("in-memory", "HTTPS admin on", ("--in-memory", "--admin-port", "0")),
    ("in-memory", "--no-admin", ("--in-memory", "--no-admin")),
    ("durable", "HTTPS admin on", ("--admin-port", "0")),
    ("durable", "--no-admin", ("--no-admin",)),
]


def run(runs: int, settle: float) -> list[list]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="sbbench-data-") as data_dir:
        for mode, admin, args in VARIANTS:
            if mode == "durable":
                args = ("--data-dir", data_dir, *args)
            samples = [measure_once(args, settle) for _ in range(runs)]
            startup = statistics.median(s[0] for s in samples)
            reported = statistics.median(s[1] for s in samples)
            rss = statistics.median(s[2] for s in samples)
            rows.append([mode, admin, startup, reported, max(s[0] for s in samples), rss,
                         "PASS" if startup < STARTUP_GOAL_S else "FAIL",
                         "PASS" if rss < RSS_GOAL_MB else "FAIL"])
    return rows


def report(rows: list[list], runs: int) -> str:
    table = markdown_table(
        ["mode", "management", "start-up s (median)", "self-reported s", "start-up s (max)", "idle RSS MiB",
         f"< {STARTUP_GOAL_S} s", f"< {RSS_GOAL_MB:.0f} MB"],
        rows,
    )
    return (
        f"`python -m sbemulator --config infra/servicebus.json --port 0`, {runs} fresh processes per "
        "mode. Start-up runs from just before `Popen` to reading the `ready` line (so interpreter start "
        "and imports count); \"self-reported\" is the figure in the ready line. Idle RSS is `VmRSS` "
        "after ready. The durable runs share one data directory, as a developer's repeated starts do "
        "(the first run creates the store and the admin endpoint's certificate).\n\n"
        f"{table}\n\nCommand: `{command_line()}`  \nMachine: {machine()}  \nDate: {today()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=0.3, help="seconds after ready before reading RSS")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    print(f"[startup] {args.runs} runs per mode ...", flush=True)
    rows = run(args.runs, args.settle)
    text = report(rows, args.runs)
    print(text)
    if not args.no_doc:
        write_section("startup", text)
    return 0 if all(r[6] == "PASS" and r[7] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
