"""``python -m devhost.demo [--duration 60] [--out DIR]``: the whole pipeline, live, then a chart.

sender timer -> topic ``messages`` -> consumer_high / consumer_low -> queue ``leveling`` -> leveler
-> Table Storage, all under devhost with each role's instance limit from infra/main.bicep. The timer
gives a steady flow of both priorities; bursts of low-priority work arrive on top. Each tick also
sends one ordered write per tenant to ``ordered-writes``, which the session-triggered ordered writer
applies per tenant in order; the summary audits its table. With no settings file the Service Bus
emulator and Azurite are started and stopped by the host.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from devhost.cli import add_scale_arguments, configure_logging, parse_instances, scale_options
from devhost.demo.backlog import BacklogProbe
from devhost.demo.chart import write_chart
from devhost.demo.dashboard import View, render_plain, render_rich
from devhost.demo.load import BurstPublisher, burst_plan
from devhost.demo.metrics import TelemetryCollector, per_second, percentile, rate_last
from devhost.demo.ordered import ordered_audit, ordered_summary_lines
from devhost.host import Host, HostError, HostOptions, RolePlan
from devhost.local_services import LocalServiceError
from shared.settings import SettingsError

#: The demo's load and limits (app settings; they win over local.settings.json and the environment).
DEMO_SETTINGS = {
    "SENDER_SCHEDULE": "*/2 * * * * *",  # NCRONTAB, seconds first: every 2 s
    "SENDER_BATCH_SIZE": "5",  # 5 high + 5 low per tick
    "CONSUMER_WORK_MS_HIGH": "50",
    "CONSUMER_WORK_MS_LOW": "200",
    "LEVELER_MAX_WRITES_PER_SECOND": "20",
    "RESULTS_TABLE": "demoresults",
    "ORDERED_TABLE": "demoordered",
    "ORDERED_WORK_MS": "20",
}
DEMO_SCALE_IN_DELAY = 10.0  # seconds; devhost's default is 60 (docs/devhost.md)
WINDOW = 10.0  # seconds the live latency/throughput figures look back


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="devhost.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds to run (default 60)")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="folder for the chart (default out/demo)")
    parser.add_argument("--settings", type=Path, default=None,
                        help="local.settings.json to run against configured resources (default: emulators)")
    parser.add_argument("--burst-size", type=int, default=200, help="low-priority messages per burst (default 200)")
    parser.add_argument("--burst-interval", type=float, default=20.0, help="seconds between bursts (default 20)")
    parser.add_argument("--instances", action="append", default=[], metavar="ROLE=N",
                        help="a fixed pool: run N instances of ROLE for the whole run instead of scaling it")
    add_scale_arguments(parser)
    # a one-minute demo must show instances going away, so it waits less than the host's default
    parser.set_defaults(scale_in_delay=DEMO_SCALE_IN_DELAY)
    parser.add_argument("--plain", action="store_true", help="plain periodic lines even on a terminal")
    return parser.parse_args(argv)


def count_rows(host: Host, table_name: str) -> int | None:
    try:
        table = host.table_client(table_name)
        return sum(1 for _ in table.list_entities(select=["RowKey"]))
    except Exception as exc:
        logging.getLogger("devhost.demo").warning("cannot count table rows: %s", exc)
        return None


def instances_text(host: Host, plan: RolePlan) -> str:
    """``live/limit`` under the scale controller (``+n`` starting), ``used/run`` for fixed pools."""
    scaler = host.scaler
    role = plan.role
    if scaler is None or role not in scaler.apps:
        used = {i for spec in plan.specs for i in host.stats.instances_of(spec.name)}
        return f"{len(used)}/{plan.instances}"
    starting = scaler.starting(role)
    return f"{scaler.live(role)}/{scaler.limit(role)}" + (f" (+{starting})" if starting else "")


def app_rows(host: Host) -> list[tuple[str, str, int]]:
    """(app, instances live/limit, peak) per app."""
    scaler = host.scaler
    return [(role, instances_text(host, plan), scaler.peak(role) if scaler else plan.instances)
            for role, plan in host.plans.items()]


def recent_scale_events(host: Host, start: float, count: int = 6) -> list[str]:
    if host.scaler is None:
        return []
    return [f"{e.at - start:5.1f}s {e.role}: {e.previous} -> {e.instances} ({e.reason}; backlog "
            f"{sum(e.backlogs.values())})" for e in host.scaler.events[-count:]]


def instance_counts(host: Host) -> dict[str, int]:
    scaler = host.scaler
    if scaler is None:
        return {role: plan.instances for role, plan in host.plans.items()}
    return {role: scaler.live(role) for role in scaler.apps}


def build_view(host: Host, collector: TelemetryCollector, probe: BacklogProbe, counts: dict, start: float,
               duration: float, cap: float, publisher: BurstPublisher) -> View:
    now = time.time()
    window_start = max(start, now - WINDOW)
    recent = collector.consumer_samples(window_start)
    everything = collector.consumer_samples(start)
    stored = collector.stored_times(start)
    instances = {}
    for plan in host.plans.values():
        for spec in plan.specs:
            instances[spec.name] = instances_text(host, plan)
    return View(
        elapsed=now - start, duration=duration, backlog=counts, backlog_source=probe.source,
        processed_per_s={p: len(s) / max(1.0, now - window_start) for p, s in recent.items()},
        p50_ms={p: percentile([x.latency_ms for x in s], 0.50) for p, s in recent.items()},
        p95_ms={p: percentile([x.latency_ms for x in s], 0.95) for p, s in recent.items()},
        processed_total={p: len(s) for p, s in everything.items()},
        writes_per_s=rate_last(stored, 1.0, now), writes_total=len(stored), cap=cap,
        instances=instances, published_bursts=len(publisher.bursts),
        apps=app_rows(host), scale_events=recent_scale_events(host, start),
    )


def summary(host: Host, collector: TelemetryCollector, start: float, end: float, cap: float,
            rows: int | None, final: dict, out: Path) -> str:
    from rich.console import Console
    from rich.table import Table

    consumer = collector.consumer_samples(start)
    stored = collector.stored_times(start)
    table = Table(title="Demo summary")
    for column in ("measure", "High", "Low"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    for label, q in (("p50 latency (ms)", 0.50), ("p95 latency (ms)", 0.95), ("p99 latency (ms)", 0.99)):
        table.add_row(label, *(f"{percentile([s.latency_ms for s in consumer.get(p, [])], q):,.0f}"
                               if consumer.get(p) else "-" for p in ("High", "Low")))
    table.add_row("processed", *(str(len(consumer.get(p, []))) for p in ("High", "Low")))
    stats = host.stats.by_function()
    table.add_row("instances used", *(str(stats.get(f, {}).get("instances", 0))
                                      for f in ("consumer_high", "consumer_low")))
    if host.scaler is not None:
        table.add_row("peak instances / limit", *(
            f"{host.scaler.peak(role)}/{host.scaler.limit(role)}" if role in host.scaler.apps else "-"
            for role in ("consumer-high", "consumer-low")))
    windows = per_second(stored, start, end)
    rows_text = "-" if rows is None else str(rows)
    lines = [
        f"table writes: {len(stored)} ({rows_text} rows); peak {max(windows, default=0)}/s in 1-s windows "
        f"against a cap of {cap:g}/s",
        "left at the end: " + ", ".join(f"{k}={c.show(c.active)} (dead-lettered {c.dead_letter})"
                                         for k, c in final.items()),
        "peak instances: " + (", ".join(f"{role} {host.scaler.peak(role)}/{host.scaler.limit(role)} "
                                        f"({len(host.scaler.events_of(role))} scale events)"
                                        for role in host.scaler.apps) if host.scaler else "fixed pools"),
        "invocations: " + ", ".join(f"{f} {c['succeeded']} ok/{c['failed']} failed on {c['instances']} instance(s)"
                                    for f, c in sorted(stats.items())),
        f"chart: {out}",
    ]
    console = Console(file=sys.stdout, width=110)
    console.print(table)
    for line in lines:
        console.print(line, highlight=False)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING")
    live_terminal = sys.stdout.isatty() and not args.plain
    try:
        options = HostOptions(settings_file=args.settings, overrides=dict(DEMO_SETTINGS),
                              instances=parse_instances(args.instances), scale=scale_options(args),
                              connect_timeout=10.0)
        host = Host(options)
        print("starting the Service Bus emulator, Azurite and the functions...", flush=True)
        collector = TelemetryCollector().__enter__()
        host.start()
        if host.services.admin_url:  # the embedded emulator: its web console shows the pipeline's entities live
            print(f"web console: {host.services.admin_url}/console/ (sign in with key name RootManageSharedAccessKey "
                  f"and the emulator's key SAS_KEY_VALUE; its certificate comes from the CA {host.services.admin_ca})",
                  flush=True)
    except (SettingsError, HostError, LocalServiceError) as exc:
        print(f"devhost.demo: {exc}", file=sys.stderr)
        return 2
    cap = float(DEMO_SETTINGS["LEVELER_MAX_WRITES_PER_SECOND"])
    probe = None
    publisher = BurstPublisher(host.service_bus_client,
                               burst_plan(args.duration, args.burst_size, args.burst_interval, first_at=5.0))
    backlog: list[tuple[float, dict[str, int]]] = []
    instances: list[tuple[float, dict[str, int]]] = []
    try:
        host.wait_connected(60)
        probe = BacklogProbe(host.service_bus_client, host.admin_client)
        start = time.time()
        publisher.start()
        counts = probe.counts()
        live = None
        if live_terminal:
            from rich.live import Live

            live = Live(refresh_per_second=2, transient=False)
            live.start()
        last_plain = 0.0
        while (now := time.time()) - start < args.duration:
            counts = probe.counts()
            backlog.append((time.time(), {k: c.active for k, c in counts.items()}))
            instances.append((time.time(), instance_counts(host)))
            view = build_view(host, collector, probe, counts, start, args.duration, cap, publisher)
            if live is not None:
                live.update(render_rich(view))
            elif now - last_plain >= 5.0:
                render_plain(view, sys.stdout)
                last_plain = now
            time.sleep(max(0.0, 1.0 - (time.time() - now)))
        if live is not None:
            live.stop()
        end = time.time()
        publisher.stop()
        final = probe.counts()
        host.stop_functions()
        rows = count_rows(host, DEMO_SETTINGS["RESULTS_TABLE"])
        chart = write_chart(args.out / "demo.png", start=start, end=end,
                            consumer=collector.consumer_samples(start), stored=collector.stored_times(start),
                            cap=cap, backlog=backlog, bursts=publisher.bursts, instances=instances,
                            limits={role: host.scaler.limit(role) for role in host.scaler.apps} if host.scaler else {})
        summary(host, collector, start, end, cap, rows, final, chart)
        for line in ordered_summary_lines(ordered_audit(host, DEMO_SETTINGS["ORDERED_TABLE"])):
            print(line, flush=True)
    finally:
        publisher.stop()
        if probe is not None:
            probe.close()
        host.stop()
        collector.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
