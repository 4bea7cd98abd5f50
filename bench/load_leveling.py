"""Load leveling: a 20x burst into the ``leveling`` queue, drained into Table Storage under the cap.

The leveler runs under devhost (maxConcurrentCalls from infra/main.bicep) against sbemulator and
Azurite; its instances share one write budget (``shared/write_budget.py``). Three runs, each with
its own emulator, Azurite and tables:

1. **one instance** (a fixed pool of 1): goal >= 0.9 x cap writes/s (the whole budget, not a share);
2. **the scale controller from zero**: the burst takes the app to its maximumInstanceCount; goal:
   the store's peak in any 1-s window (sliding) <= cap, rows == messages;
3. **an instance killed mid-run**: the in-process host runs limit - 1 instances, one more runs as a
   separate ``python -m devhost`` process that gets SIGKILL a few seconds in (its message locks and
   budget leases are simply abandoned). Goals: no 1-s window over the cap, rows == messages, nothing
   dead-lettered. The ``leveling`` queue's LockDuration is lowered to 5 s for this run (1 min in
   infra/servicebus.json) so the killed instance's messages come back within the run.

Windows are consecutive 1-s windows from the first write; the strictest sliding window is reported
too. The store's view is each row's ``Timestamp`` (when Azurite applied the write); a message written
twice (redelivered after the kill) keeps only its last timestamp. Exit code 0 when all goals hold.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from bench._util import REPO_ROOT, command_line, machine, markdown_table, prose, today, write_section
from devhost.demo.metrics import peak_sliding, per_second
from devhost.host import Host, HostOptions
from devhost.scale import load_role_scales, parameter_default
from devhost.scale_controller import ScaleOptions
from sender.messages import publish
from shared.contract import ContractMessage, utc_now
from shared.topology import HIGH, LOW, QUEUE_LEVELING

SECTION_KEY = "leveling"
TENANTS = tuple(f"tenant-{i}" for i in range(1, 6))
KILL_LOCK_DURATION = "PT5S"


def burst_messages(count: int) -> list[ServiceBusMessage]:
    """Messages as the consumers hand them on: contract bodies with a ``result``."""
    messages = []
    for i in range(count):
        body = ContractMessage(
            message_id=str(uuid.uuid4()), tenant_id=TENANTS[i % len(TENANTS)], priority=HIGH if i % 5 == 0 else LOW,
            created_at=utc_now(), payload={"index": i}, result={"consumer": "bench", "work_ms": 0},
        )
        messages.append(ServiceBusMessage(body.to_json(), message_id=body.message_id,
                                          content_type="application/json"))
    return messages


def dead_letters(host: Host) -> int:
    with host.service_bus_client() as client, \
            client.get_queue_receiver(QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        return len(dlq.peek_messages(max_message_count=250))


def short_lock_topology(directory: Path) -> Path:
    doc = json.loads((REPO_ROOT / "infra" / "servicebus.json").read_text())
    for queue in doc["UserConfig"]["Namespaces"][0]["Queues"]:
        if queue["Name"] == QUEUE_LEVELING:
            queue["Properties"]["LockDuration"] = KILL_LOCK_DURATION
    path = directory / "servicebus.json"
    path.write_text(json.dumps(doc))
    return path


def _reap(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
        child.wait(10)


def child_leveler(host: Host, settings: dict[str, str], directory: Path) -> subprocess.Popen:
    """One more leveler instance in its own process, on the same namespace, storage and budget."""
    assert host.settings is not None
    values = {name: host.settings.get(name) or "" for name in ("ServiceBusConnection", "TableStorageConnection")}
    values.update(settings)
    path = directory / "child.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": values}))
    env = {k: v for k, v in os.environ.items() if k not in values}
    return subprocess.Popen([sys.executable, "-m", "devhost", "--roles", "leveler", "--instances", "leveler=1",
                             "--settings", str(path), "--log-level", "WARNING"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def budget_operations(host: Host) -> dict[str, int]:
    """Budget-table requests of the in-process instances so far (lease updates, reads, lost races), and
    the slots they did not use: dropped (a writer woke too late for it) and left unused for a write that
    returned late (``compensated``; ``uncompensated`` when none could be had in time)."""
    totals = {"updates": 0, "reads": 0, "conflicts": 0, "dropped": 0, "compensated": 0, "uncompensated": 0}
    for worker in host.instance_values("functions.runtime.leveling_worker").values():
        stats = worker.limiter.stats()
        for key in totals:
            totals[key] += stats[key]
    return totals


def scenario(name: str, args: argparse.Namespace, *, fixed: int | None, kill: bool = False) -> dict[str, Any]:
    table = f"bench{name}{uuid.uuid4().hex[:6]}"
    settings = {"LEVELER_MAX_WRITES_PER_SECOND": f"{args.cap:g}", "RESULTS_TABLE": table,
                "LEVELER_BUDGET_TABLE": f"budget{uuid.uuid4().hex[:8]}"}
    limit = load_role_scales()["leveler"].max_instances
    count = int(args.factor * args.cap)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        directory = Path(tmp)
        options = HostOptions(
            roles=("leveler",), use_local_settings=False, env={}, overrides=settings,
            instances={"leveler": fixed} if fixed is not None else {},
            scale=ScaleOptions(interval=1.0, cold_start=args.cold_start, scale_in_delay=60.0),
            topology=short_lock_topology(directory) if kill else None,
        )
        with Host(options) as host:
            host.wait_connected(60)
            host.table_client(table).create_table()  # in Azure the Bicep creates it (infra/modules/storage.bicep)
            child = child_leveler(host, settings, directory) if kill else None
            if child is not None:
                cleanup.callback(_reap, child)  # also when anything below raises
            messages = burst_messages(count)
            ids = {m.message_id for m in messages}
            started = time.time()
            with host.service_bus_client() as client, client.get_queue_sender(QUEUE_LEVELING) as sender:
                publish(sender, messages)
            killed_at = None
            rows: list[Any] = []
            deadline = time.monotonic() + count / args.cap * 2 + 60
            while time.monotonic() < deadline:
                if child is not None and killed_at is None and time.time() - started >= args.kill_after:
                    child.send_signal(signal.SIGKILL)
                    child.wait(10)
                    killed_at = time.time()
                rows = list(host.table_client(table).list_entities(select=["RowKey"]))
                if {r["RowKey"] for r in rows} >= ids:
                    break
                time.sleep(1.0)
            budget_ops = budget_operations(host)
            host.stop_functions()
            entities = list(host.table_client(table).list_entities())
            dead = dead_letters(host)
            scaler = host.scaler
            peak_instances = scaler.peak("leveler") if scaler else 0
    stamps = sorted(e.metadata["timestamp"].timestamp() for e in entities)
    first = stamps[0] if stamps else started
    windows = per_second(stamps, first, stamps[-1] + 1e-9 if stamps else first)
    full = windows[1:-1] or windows  # the first and last windows are partial by construction
    return {
        "name": name, "count": count, "rows": len(entities), "distinct": len({e["RowKey"] for e in entities} & ids),
        "dead": dead, "peak_fixed": max(windows, default=0), "peak_sliding": peak_sliding(stamps),
        "mean_rate": sum(full) / len(full) if full else 0.0, "windows": windows,
        "drain": (stamps[-1] - started) if stamps else float("nan"), "limit": limit,
        "instances": (f"fixed pool of {fixed}" + (" + 1 killed process" if kill else "")) if fixed is not None
        else f"scale controller, peak {peak_instances} of {limit}",
        "peak_instances": peak_instances, "killed_at": (killed_at - started) if killed_at else None,
        "budget_ops": budget_ops,
    }


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> tuple[str, bool]:
    one, scaled, killed = results
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    cap = args.cap
    goals = [
        (f"one instance alone writes {one['mean_rate']:.1f}/s >= 0.9 x cap = {0.9 * cap:g}/s",
         one["mean_rate"] >= 0.9 * cap),
        (f"at the maximum instance count ({scaled['peak_instances']} of {scaled['limit']}), the store's peak "
         f"in any 1-s window {scaled['peak_sliding']} <= cap = {cap:g}",
         scaled["peak_sliding"] <= cap and scaled["peak_instances"] == scaled["limit"]),
        (f"an instance killed mid-run: the store's peak per 1-s window {killed['peak_fixed']} <= cap = {cap:g}",
         killed["peak_fixed"] <= cap),
    ]
    for r in results:
        goals.append((f"{r['name']}: rows == messages ({r['rows']} / {r['count']}), none dead-lettered ({r['dead']})",
                      r["rows"] == r["distinct"] == r["count"] and r["dead"] == 0))
    rows = [[r["name"], r["instances"], f"{r['count']:,}", f"{r['mean_rate']:.1f}", r["peak_fixed"], r["peak_sliding"],
             f"{r['drain']:.1f}", f"{r['rows']} / {r['dead']}",
             f"{(r['budget_ops']['updates'] + r['budget_ops']['reads']) / r['drain']:.1f} "
             f"({r['budget_ops']['conflicts']} lost races)",
             f"{r['budget_ops']['dropped']} / {r['budget_ops']['compensated']} / {r['budget_ops']['uncompensated']}"]
            for r in results]
    table = markdown_table(["run", "leveler instances", "messages", "writes/s (full windows)",
                            "peak, 1-s windows", "peak, any 1-s window", "last write (s after send)",
                            "rows / dead-lettered", "budget table requests/s",
                            "slots dropped / left unused for late writes / late writes not paid for"], rows)
    kill_note = "The kill did not happen."
    if killed["killed_at"] is not None:
        kill_note = (f"The separate instance was killed {killed['killed_at']:.1f} s after the burst was sent; "
                     "the store's writes per 1-s window of that run: " + " ".join(map(str, killed["windows"])))
    load = ", ".join(f"{x:.2f}" for x in args.load)
    intro = prose(f"""`{command_line()}` on {machine()}, {today()} (`uptime` load average before the runs: {load}).

The leveler under devhost against sbemulator and Azurite, cap {cap:g} writes/s
(`LEVELER_MAX_WRITES_PER_SECOND`) shared by all instances through one budget entity
(`shared/write_budget.py`); a burst of {args.factor:g} x cap messages each run; cold start {args.cold_start:g} s.
Writes are counted by the row's `Timestamp` (when Azurite applied them), in consecutive 1-s windows from the
first write, and in the strictest sliding 1-s window: the budget caps every 1-s window at the store, a write
that returned late paid for with a slot left unused (docs/devhost.md, "The shared write budget"); the killed
run's goal is on the consecutive windows, as a write in flight when its process is killed is paid for by no
one.""")
    notes = prose(f"""{kill_note}

Budget table requests/s: lease updates and reads of the in-process instances over the run (the killed
process's are not counted), the storage cost of sharing the cap. Slots not used: dropped when a writer
woke more than half a slot after it, left unused to pay for a write that returned more than 53 ms after its
slot (so that every 1-s window at the store stays within the cap), and the late writes for which no slot
could be left unused in time (logged).""")
    body = f"{intro}\n\n{table}\n\n{notes}\n\n" + "\n".join(f"- {text}: {verdict(ok)}" for text, ok in goals) + "\n"
    return body, all(ok for _, ok in goals)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=None,
                        help="LEVELER_MAX_WRITES_PER_SECOND (default: levelerMaxWritesPerSecond in infra/main.bicep)")
    parser.add_argument("--factor", type=float, default=20.0, help="burst size in seconds of cap (default 20)")
    parser.add_argument("--cold-start", type=float, default=1.0, help="seconds per new instance (default 1)")
    parser.add_argument("--kill-after", type=float, default=6.0, help="seconds into the kill run (default 6)")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.cap is None:
        args.cap = float(parameter_default("levelerMaxWritesPerSecond"))
    from devhost.cli import configure_logging

    configure_logging("WARNING")
    args.load = os.getloadavg()
    limit = load_role_scales()["leveler"].max_instances
    results = [scenario("one", args, fixed=1), scenario("scaled", args, fixed=None),
               scenario("killed", args, fixed=max(1, limit - 1), kill=True)]
    body, ok = report(results, args)
    print(body)
    if not args.no_doc:
        write_section(SECTION_KEY, body)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
