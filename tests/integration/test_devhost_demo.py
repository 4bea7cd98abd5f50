"""The one-command demo, shortened: it runs the whole pipeline, finishes by itself, exits 0 and
writes its chart. Run as a subprocess with stdout a pipe, so the plain (non-TTY) output is used."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.mark.skipif(not (ROOT / "node_modules" / ".bin" / "azurite").exists(), reason="azurite is not installed")
def test_demo_runs_to_the_end_and_writes_its_chart(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("ServiceBusConnection", "TableStorageConnection"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", "devhost.demo", "--duration", "8", "--out", str(tmp_path), "--drain", "30",
         "--burst-size", "40", "--burst-interval", "4", "--high-burst", "40", "--poison-every", "3",
         "--instances", "consumer-high=4"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=200,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # the plain periodic summary (its first line may come a second late on a loaded machine)
    assert re.search(r"^\[\s*\d+s load\] backlog: ", out, re.M) and "messages/lowPriority=" in out
    assert "Demo summary (strategy separate)" in out and "leveler table writes:" in out
    assert "within SLO, all messages" in out and "cold start: messages sent before the first was processed" in out
    # poison in the load, dead-lettered by the leveler with its reason
    poison = re.search(r"^poison: (\d+) sent; leveling's dead-letter queue holds (\d+), by reason: InvalidJson (\d+)",
                       out, re.M)
    assert poison and int(poison[1]) >= 2 and int(poison[2]) == int(poison[3]) >= 1, out
    # the drain: no new work after the load, until the backlogs are empty (or its bound)
    assert re.search(r"^drain: no new work after \d+ s; backlogs (empty|not empty)", out, re.M)
    assert re.search(r"^\[\s*\d+s drain\] backlog: ", out, re.M) or "backlogs empty" in out
    assert re.search(r"web console: https://127\.0\.0\.1:\d+/console/ \(sign in with key name", out)
    # the ordered writer, audited from its table: every tenant got writes, none out of order or doubled
    line = next(line for line in out.splitlines() if line.startswith("ordered writes per tenant:"))
    counts = dict(re.findall(r"(tenant-\d) (\d+)", line.split(";")[0]))
    assert set(counts) == {f"tenant-{i}" for i in range(1, 6)} and all(int(n) >= 1 for n in counts.values())
    assert "; 0 out-of-order, 0 double-applied" in line
    assert re.search(r"^ordered writer: \d+ writer\(s\) applied writes .*ordered#\d+ stopped at \d+ s", out, re.M)
    # writes are counted at the store (rows' Timestamps), as the budget caps them; a window over the cap
    # (the chart's red bar) is said, not hidden
    # (so is a 1-s window over it that falls between two of the chart's seconds)
    verdict = re.search(r"(busiest 1-s window (\d+) writes at the store \((\d+) in any 1 s\), within the cap of 20/s"
                        r"|THE CAP WAS BROKEN: \d+ 1-s window\(s\) at the store over 20/s"
                        r"|THE CAP WAS BROKEN: \d+ writes at the store within the 1 s from )", out)
    assert verdict and (verdict[2] is None or int(verdict[2]) <= int(verdict[3]) <= 20), out
    # leader election: the first replica leads, is stopped during the run, the standby takes over
    assert re.search(r"^leader election .*: leader: replica-b; replica-a stopped at \d+ s, the standby took over "
                     r"\d+\.\d+ s after it stood down", out, re.M), out
    assert re.search(r"\| instances: sender \d/1, .*consumer-low \d/5", out)  # live / limit per app
    assert "    scale: " in out and "instances per app (peak of limit" in out  # scale events, each app's peak
    chart = tmp_path / "demo.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not _unexpected_tracebacks(result.stderr), result.stderr


# A function that fails on a transient storage fault (Azurite resetting a pooled keep-alive connection on a
# loaded machine) is logged with its traceback and the message is redelivered: at-least-once delivery, which
# the ordered-writer audit above checks (nothing out of order, nothing applied twice). Any other traceback
# is a failure of the demo.
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", re.M)
_TRANSIENT = ("ServiceResponseError", "ServiceRequestError", "ConnectionResetError")


def _unexpected_tracebacks(stderr: str) -> list[str]:
    starts = [m.start() for m in _RECORD.finditer(stderr)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    records = [stderr[a:b] for a, b in zip(starts, [*starts[1:], len(stderr)], strict=True)]
    return [r for r in records if "Traceback" in r and not _transient_function_failure(r)]


def _transient_function_failure(record: str) -> bool:
    lines = record.rstrip().splitlines()
    exception = lines[-1].split(":")[0].rsplit(".", 1)[-1]
    return " failed on message " in lines[0] and exception in _TRANSIENT
