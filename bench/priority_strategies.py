"""Priority strategies side by side: the same load through each ``PRIORITY_STRATEGY``, one table.

Each strategy runs the real Functions code (``function_app.create_app(role, strategy)``) under devhost's
scale controller, from zero instances, against its own in-memory emulator process (loopback), with
the same load, published through the sender's own routing (``sender/routing.py``):

- a sustained high-priority stream (``--high-rate`` per second for ``--seconds``);
- low-priority bursts (``--low-burst`` messages at each of ``--low-at`` seconds);
- one high-priority burst (``--high-burst`` at ``--high-at`` s) that needs more than one instance.

Then a drain phase (bounded by ``--drain``). Wait is ``created_at`` to processed (the consumer's own
figure, simulated work included); a message not processed when the drain ends counts with the time it
had waited (a lower bound). Columns: p50/p99/worst wait per priority; SLO compliance (share of messages
within ``SLO_HIGH_SECONDS`` / ``SLO_LOW_SECONDS``); low starvation: the longest time low-priority messages
waited while no low-priority message at all was processed; instance-seconds per app (live instances
integrated over the run: the Flex Consumption cost proxy); Service Bus operations per delivered message
for the priority stage: the sends, schedules, cancels and peeks the code issues (``shared.operations``),
plus one receive and one settlement per delivery (the leveling hop is the same for every strategy and
left out).

The instance limits are the Bicep's scaled down for a 2-core machine (``--high-max``, ``--low-max``);
maxConcurrentCalls are the Bicep's (16 and 2). Under ``shared``, ``strict`` and ``fifo`` one app (the
consumer-high app, with its limit) serves everything.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field

from bench._util import REPO_ROOT, command_line, emulator, machine, markdown_table, today, write_section
from devhost.demo.metrics import TelemetryCollector, percentile
from devhost.host import Host, HostOptions
from devhost.local_services import emulator_admin_connection_string
from devhost.scale import RoleScale, load_role_scales
from devhost.scale_controller import DEFAULT_COLD_START, ScaleOptions
from sender.messages import build_contract_messages, to_service_bus_message
from sender.routing import route
from shared.operations import OPERATIONS
from shared.settings import STRATEGIES
from shared.topology import HIGH, LOW, QUEUE_PRIORITY_FIFO, TOPIC

SECTION_KEY = "priority-strategies"
CONSUMER_STAGES = ("consumer_high", "consumer_low", "consumer_fifo")
WORK = {"CONSUMER_WORK_MS_HIGH": "50", "CONSUMER_WORK_MS_LOW": "200"}
TENANTS = ("tenant-1", "tenant-2", "tenant-3")


@dataclass
class Run:
    strategy: str
    sent: dict[str, tuple[str, float]] = field(default_factory=dict)  # message id -> (priority, created)
    done: dict[str, float] = field(default_factory=dict)  # message id -> wait ms (first processing)
    done_at: dict[str, float] = field(default_factory=dict)  # message id -> processed (epoch s)
    instance_seconds: dict[str, float] = field(default_factory=dict)
    peaks: dict[str, int] = field(default_factory=dict)
    operations: dict[str, int] = field(default_factory=dict)
    deliveries: int = 0
    ended: float = 0.0


class Load:
    """Publishes the load on its own threads; remembers what it sent."""

    def __init__(self, host: Host, strategy: str, args: argparse.Namespace, run: Run) -> None:
        self.host, self.strategy, self.args, self.run = host, strategy, args, run
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []

    def _send(self, sender_pair: tuple, n_high: int, n_low: int) -> None:
        contract = build_contract_messages(n_high, n_low, TENANTS)
        with self._lock:
            for m in contract:
                self.run.sent[m.message_id] = (m.priority, m.created_at.timestamp())
        topic, fifo = sender_pair
        for offset in range(0, len(contract), 500):
            route(self.strategy, [to_service_bus_message(m) for m in contract[offset:offset + 500]],
                  topic_sender=lambda: topic, fifo_sender=lambda: fifo, aging_after=self.args.aging_after)

    def _thread(self, body) -> threading.Thread:
        def guarded() -> None:
            try:
                with self.host.service_bus_client() as client, client.get_topic_sender(TOPIC) as topic, \
                        client.get_queue_sender(QUEUE_PRIORITY_FIFO) as fifo:
                    body((topic, fifo))
            except BaseException as exc:  # reported by the run, never swallowed
                self.errors.append(exc)

        return threading.Thread(target=guarded, daemon=True)

    def start(self) -> list[threading.Thread]:
        args, start = self.args, time.monotonic()

        def stream(pair: tuple) -> None:
            for i in range(int(args.high_rate * args.seconds)):
                time.sleep(max(0.0, start + i / args.high_rate - time.monotonic()))
                self._send(pair, 1, 0)

        def bursts(pair: tuple) -> None:
            plan = sorted([(at, 0, args.low_burst) for at in args.low_at] + [(args.high_at, args.high_burst, 0)])
            for at, n_high, n_low in plan:
                time.sleep(max(0.0, start + at - time.monotonic()))
                self._send(pair, n_high, n_low)

        threads = [self._thread(stream), self._thread(bursts)]
        for thread in threads:
            thread.start()
        return threads


def run_strategy(strategy: str, args: argparse.Namespace) -> Run:
    import function_app

    scales = load_role_scales()
    limits = {"consumer-high": args.high_max, "consumer-low": args.low_max}
    apps = {}
    for role, limit in limits.items():
        app = function_app.create_app([role], strategy=strategy)
        if function_app.role_modules(role, strategy):
            apps[role] = (app, RoleScale(role, limit, scales[role].max_concurrent_calls))
    run = Run(strategy)
    OPERATIONS.clear()
    with emulator(REPO_ROOT / "infra" / "servicebus.json", "--in-memory") as process, \
            TelemetryCollector() as collector:
        admin = (emulator_admin_connection_string(process.connection_string, process.admin_url), process.ca_path) \
            if process.admin_url else None
        options = HostOptions(
            roles=(), use_local_settings=False, env={}, extra_apps=apps, admin_connection=admin,
            overrides={**WORK, "ServiceBusConnection": process.connection_string, "PRIORITY_STRATEGY": strategy,
                       "AGING_AFTER_SECONDS": str(args.aging_after), "SLO_HIGH_SECONDS": str(args.slo_high),
                       "SLO_LOW_SECONDS": str(args.slo_low)},
            scale=ScaleOptions(cold_start=args.cold_start, scale_in_delay=args.scale_in_delay),
        )
        with Host(options) as host:
            assert host.scaler is not None
            load = Load(host, strategy, args, run)
            started = time.monotonic()
            threads = load.start()
            last = started
            deadline = started + args.seconds + args.drain
            while time.monotonic() < deadline:
                time.sleep(0.5)
                now = time.monotonic()
                for role in host.scaler.apps:
                    live = host.scaler.live(role) * (now - last)
                    run.instance_seconds[role] = run.instance_seconds.get(role, 0.0) + live
                last = now
                if now - started > args.seconds and not any(t.is_alive() for t in threads):
                    processed = {s.message_id for s in collector.snapshot() if s.stage in CONSUMER_STAGES}
                    if all(mid in processed for mid in run.sent):
                        break
            if load.errors:
                raise RuntimeError(f"{strategy}: publishing failed: {load.errors[0]!r}")
            run.ended = time.time()
            for sample in collector.snapshot():
                if sample.stage in CONSUMER_STAGES and sample.message_id in run.sent \
                        and sample.message_id not in run.done:
                    run.done[sample.message_id] = sample.latency_ms
                    run.done_at[sample.message_id] = sample.at
            run.peaks = {role: host.scaler.peak(role) for role in host.scaler.apps}
            run.deliveries = sum(counts["succeeded"] + counts["failed"]
                                 for name, counts in host.stats.by_function().items() if name in CONSUMER_STAGES)
            run.operations = OPERATIONS.snapshot()
            print(f"{strategy}: {len(run.done)}/{len(run.sent)} processed in {time.monotonic() - started:.0f} s; "
                  f"peaks {run.peaks}", flush=True)
    return run


def waits(run: Run, priority: str) -> list[float]:
    return [run.done.get(mid, (run.ended - created) * 1000) for mid, (p, created) in run.sent.items() if p == priority]


def starvation_s(run: Run) -> float:
    """The longest time a low-priority message waited while no low-priority message was processed."""
    low = sorted((run.done_at[mid], created) for mid, (p, created) in run.sent.items()
                 if p == LOW and mid in run.done_at)
    unprocessed = [created for mid, (p, created) in run.sent.items() if p == LOW and mid not in run.done_at]
    worst, previous = 0.0, None
    for processed, created in low:
        worst = max(worst, processed - max(created, previous if previous is not None else created))
        previous = processed
    for created in unprocessed:  # still waiting at the end, with no low progress since the last one
        worst = max(worst, run.ended - max(created, previous if previous is not None else created))
    return worst


def row(run: Run, args: argparse.Namespace) -> list[str]:
    cells = [f"`{run.strategy}`"]
    for priority, slo in ((HIGH, args.slo_high), (LOW, args.slo_low)):
        values = waits(run, priority)
        within = sum(1 for v in values if v <= slo * 1000) / len(values) if values else math.nan
        cells += [f"{percentile(values, 0.5) / 1000:.1f} / {percentile(values, 0.99) / 1000:.1f} / "
                  f"{max(values, default=math.nan) / 1000:.1f}", f"{within:.1%}"]
    own = sum(run.operations.values())
    delivered = len(run.done)
    cells += [f"{starvation_s(run):.1f}",
              ", ".join(f"{role} {run.instance_seconds.get(role, 0):.0f} (peak {run.peaks.get(role, 0)})"
                        for role in run.instance_seconds),
              f"{(own + 2 * run.deliveries) / delivered:.2f}" if delivered else "n/a",
              ", ".join(f"{k} {v}" for k, v in sorted(run.operations.items()))]
    return cells


def report(runs: list[Run], args: argparse.Namespace) -> str:
    headers = ["strategy", "high wait p50 / p99 / worst s", f"high within {args.slo_high:g} s",
               "low wait p50 / p99 / worst s", f"low within {args.slo_low:g} s", "low starved s",
               "instance-seconds per app (peak instances)", "SB operations per delivered message",
               "operations the code issued"]
    table = markdown_table(headers, [row(run, args) for run in runs])
    sent = {run.strategy: len(run.sent) for run in runs}
    load = ", ".join(f"{x:.2f}" for x in args.load)
    return f"""`{command_line()}` on {machine()}, {today()} (load average before: {load}).

Load per strategy ({next(iter(sent.values()))} messages): {args.high_rate:g} high/s for {args.seconds:g} s;
{args.low_burst} low at {', '.join(f'{x:g}' for x in args.low_at)} s; {args.high_burst} high at
{args.high_at:g} s; then a drain of at most {args.drain:g} s. Work {WORK['CONSUMER_WORK_MS_HIGH']} ms (high),
{WORK['CONSUMER_WORK_MS_LOW']} ms (low). Limits: consumer-high {args.high_max} instances x 16 calls,
consumer-low {args.low_max} x 2 (the Bicep's 40 and 5 scaled down for 2 cores); scale controller from zero,
cold start {args.cold_start:g} s, scale-in delay {args.scale_in_delay:g} s; aging after {args.aging_after:g} s.
Waits include the cold start from zero (the first messages of the run wait for an instance).

{table}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated (default: all)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load (default 60)")
    parser.add_argument("--high-rate", type=float, default=10.0, help="sustained high messages/s (default 10)")
    parser.add_argument("--low-burst", type=int, default=400, help="low messages per burst (default 400)")
    parser.add_argument("--low-at", type=float, nargs="+", default=[5.0, 30.0], help="burst times s (default 5 30)")
    parser.add_argument("--high-burst", type=int, default=150, help="high burst size (default 150)")
    parser.add_argument("--high-at", type=float, default=40.0, help="high burst time s (default 40)")
    parser.add_argument("--drain", type=float, default=60.0, help="longest drain after the load, s (default 60)")
    parser.add_argument("--high-max", type=int, default=6, help="consumer-high app's instance limit (default 6)")
    parser.add_argument("--low-max", type=int, default=2, help="consumer-low app's instance limit (default 2)")
    parser.add_argument("--aging-after", type=float, default=10.0, help="AGING_AFTER_SECONDS (default 10)")
    parser.add_argument("--slo-high", type=float, default=10.0, help="SLO_HIGH_SECONDS (default 10)")
    parser.add_argument("--slo-low", type=float, default=30.0, help="SLO_LOW_SECONDS for the table (default 30)")
    parser.add_argument("--cold-start", type=float, default=DEFAULT_COLD_START)
    parser.add_argument("--scale-in-delay", type=float, default=10.0)
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    from devhost.cli import configure_logging

    configure_logging("WARNING")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; known: {list(STRATEGIES)}")
    args.load = os.getloadavg()
    runs = [run_strategy(strategy, args) for strategy in strategies]
    body = report(runs, args)
    print(body)
    if not args.no_doc:
        write_section(SECTION_KEY, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
