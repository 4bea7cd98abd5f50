"""``python -m devhost.demo [--duration 60] [--strategy separate] [--out DIR]``: the whole pipeline, live,
then a chart.

sender timer -> topic ``messages`` -> consumer_high / consumer_low -> queue ``leveling`` -> leveler
-> Table Storage, all under devhost with each role's instance limit from infra/main.bicep, under the
priority strategy ``--strategy`` (``fifo``: one queue instead of the topic). The timer gives a steady flow
of both priorities; bursts of low-priority work, one burst of high-priority work (consumer-high scales
past one instance) and a poison message every few seconds (dead-lettered by the leveler with its reason)
arrive on top. Each tick also sends one ordered write per tenant to ``ordered-writes``, which the
session-triggered ordered writer applies per tenant in order; one of its instances is stopped mid-run
and its tenants are taken over (the table is audited live and at the end). After
``--duration`` a drain phase stops all new work and waits for the backlogs to empty. With no settings
file the Service Bus emulator and Azurite are started and stopped by the host.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path

from devhost.cli import add_scale_arguments, configure_logging, parse_instances, scale_options
from devhost.demo.backlog import BacklogProbe, pipeline_entities
from devhost.demo.chart import write_chart
from devhost.demo.dashboard import View, render_plain, render_rich
from devhost.demo.leader import LeaderDemo
from devhost.demo.load import BurstPublisher, burst_plan
from devhost.demo.metrics import Sample, TelemetryCollector, busiest_window, per_second, percentile, rate_last
from devhost.demo.ordered import ordered_audit, ordered_panel, ordered_summary_lines
from devhost.host import Host, HostError, HostOptions, RolePlan
from devhost.local_services import LocalServiceError
from shared.settings import STRATEGIES, SettingsError

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
    "SLO_HIGH_SECONDS": "10",  # the Priority Queue pattern's example
    # tighter than the deployment's 120 s (README, Settings): the demo's low bursts drain within a minute,
    # so 60 s is the bound they can be held to here; a run shows it against the dotted line
    "SLO_LOW_SECONDS": "60",
    "AGING_AFTER_SECONDS": "10",
}
DEMO_SCALE_IN_DELAY = 10.0  # seconds; devhost's default is 60 (docs/devhost.md)
WINDOW = 10.0  # seconds the live latency/throughput figures look back


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="devhost.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60), then the drain")
    parser.add_argument("--drain", type=float, default=30.0,
                        help="longest drain after the load: no new work until the backlogs are empty (default 30)")
    parser.add_argument("--strategy", choices=STRATEGIES, default=None,
                        help="PRIORITY_STRATEGY (default: the setting, else separate); fifo is the one-queue baseline")
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="folder for the chart (default out/demo)")
    parser.add_argument("--settings", type=Path, default=None,
                        help="local.settings.json to run against configured resources (default: emulators)")
    parser.add_argument("--burst-size", type=int, default=200, help="low-priority messages per burst (default 200)")
    parser.add_argument("--burst-interval", type=float, default=20.0, help="seconds between bursts (default 20)")
    parser.add_argument("--high-burst", type=int, default=300,
                        help="high-priority messages in one burst at 45%% of the run (default 300; 0: none)")
    parser.add_argument("--poison-every", type=float, default=10.0,
                        help="seconds between poison messages (default 10; 0: none)")
    parser.add_argument("--stop-ordered-at", type=float, default=None, metavar="S",
                        help="stop one of the ordered writer's instances at S seconds (default: mid-run; <0: never)")
    parser.add_argument("--stop-leader-at", type=float, default=None, metavar="S",
                        help="stop the elected leader at S seconds (default: 70%% of the run; <0: never)")
    parser.add_argument("--instances", action="append", default=[], metavar="ROLE=N",
                        help="a fixed pool: run N instances of ROLE for the whole run instead of scaling it")
    # a one-minute demo must show instances going away, so it waits less than the host's default
    add_scale_arguments(parser, scale_in_delay=DEMO_SCALE_IN_DELAY)
    parser.add_argument("--plain", action="store_true", help="plain periodic lines even on a terminal")
    return parser.parse_args(argv)


def count_rows(host: Host, table_name: str) -> int | None:
    try:
        table = host.table_client(table_name)
        return sum(1 for _ in table.list_entities(select=["RowKey"]))
    except Exception as exc:
        logging.getLogger("devhost.demo").warning("cannot count table rows: %s", exc)
        return None


def store_times(host: Host, table_name: str, since: float) -> list[float] | None:
    """When each row reached the store (its ``Timestamp``, set by the table service), from ``since``.

    The chart and the summary count writes by these times, as bench.load_leveling does: the write
    budget caps writes at the store. The leveler's own log line comes after the upsert returns, so its
    times add each response's delay, and several responses that arrive together put more in one
    second than the store took (a bar of 24 against a cap of 20 in an earlier chart, with no window
    over the cap at the store). A row rewritten by a redelivery keeps only its last time.
    """
    try:
        table = host.table_client(table_name)
        stamps = [entity.metadata["timestamp"].timestamp() for entity in table.list_entities()]
    except Exception as exc:
        logging.getLogger("devhost.demo").warning("cannot read the table's write times: %s", exc)
        return None
    return sorted(stamp for stamp in stamps if stamp >= since)


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
    """The latest scale decisions that changed something; those made before the load started (the
    floors: the sender's timer needs its host) are labelled as such rather than given a negative time."""
    if host.scaler is None:
        return []
    return [f"{'before the load' if e.at < start else f'{e.at - start:5.1f}s'} {e.role}: {e.previous} -> "
            f"{e.instances} ({e.reason}; backlog {sum(e.backlogs.values())})" for e in host.scaler.events[-count:]]


def instance_counts(host: Host) -> dict[str, int]:
    scaler = host.scaler
    if scaler is None:
        return {role: plan.instances for role, plan in host.plans.items()}
    return {role: scaler.live(role) for role in scaler.apps}


def slo_seconds() -> dict[str, float]:
    return {"High": float(DEMO_SETTINGS["SLO_HIGH_SECONDS"]), "Low": float(DEMO_SETTINGS["SLO_LOW_SECONDS"])}


def within(samples: list[Sample], slo_s: float) -> float:
    return sum(1 for s in samples if s.latency_ms <= slo_s * 1000) / len(samples) if samples else math.nan


def split_cold(samples: list[Sample]) -> tuple[list[Sample], list[Sample]]:
    """(cold, steady): the messages sent before the first one of their priority was processed waited for
    an instance to start from zero; they are the cold start, reported apart from the steady state."""
    if not samples:
        return [], []
    first_done = min(s.at for s in samples)
    cold = [s for s in samples if s.at - s.latency_ms / 1000 < first_done]
    return cold, [s for s in samples if s.at - s.latency_ms / 1000 >= first_done]


def consumer_functions(host: Host) -> tuple[str, ...]:
    names = {spec.name for plan in host.plans.values() for spec in plan.specs}
    return ("consumer_fifo",) if "consumer_fifo" in names else ("consumer_high", "consumer_low")


def build_view(host: Host, collector: TelemetryCollector, probe: BacklogProbe, counts: dict, start: float,
               duration: float, cap: float, publisher: BurstPublisher, *, strategy: str, phase: str,
               reasons: dict[str, int], ordered: tuple, ordered_note: str, leader: str = "") -> View:
    now = time.time()
    window_start = max(start, now - WINDOW)
    recent = collector.consumer_samples(window_start)
    everything = collector.consumer_samples(start)
    stored = collector.stored_times(start)
    instances = {}
    for plan in host.plans.values():
        for spec in plan.specs:
            instances[spec.name] = instances_text(host, plan)
    slo = slo_seconds()
    return View(
        elapsed=now - start, duration=duration, backlog=counts, backlog_source=probe.source,
        processed_per_s={p: len(s) / max(1.0, now - window_start) for p, s in recent.items()},
        p50_ms={p: percentile([x.latency_ms for x in s], 0.50) for p, s in recent.items()},
        p95_ms={p: percentile([x.latency_ms for x in s], 0.95) for p, s in recent.items()},
        processed_total={p: len(s) for p, s in everything.items()},
        writes_per_s=rate_last(stored, 1.0, now), writes_total=len(stored), cap=cap,
        instances=instances, published_bursts=len(publisher.bursts),
        apps=app_rows(host), scale_events=recent_scale_events(host, start),
        strategy=strategy, phase=phase, slo_s=slo,
        within_slo={p: within(everything.get(p, []), slo[p]) for p in ("High", "Low")},
        poison_sent=publisher.poison_sent, dead_letter_reasons=reasons,
        ordered=ordered[0], ordered_faults=ordered[1], ordered_note=ordered_note,
        consumer_functions=consumer_functions(host), leader=leader,
    )


def summary(host: Host, collector: TelemetryCollector, start: float, end: float, cap: float,
            rows: int | None, final: dict, out: Path, *, strategy: str, drained: float, drain_end: float,
            reasons: dict[str, int], poison_sent: int, at_store: list[float] | None = None) -> str:
    from rich.console import Console
    from rich.table import Table

    consumer = collector.consumer_samples(start)
    stored = collector.stored_times(start)
    slo = slo_seconds()
    split = {p: split_cold(consumer.get(p, [])) for p in ("High", "Low")}
    table = Table(title=f"Demo summary (strategy {strategy}): end-to-end latency, created to processed")

    def ms(values: list[Sample], q: float) -> str:
        return f"{percentile([s.latency_ms for s in values], q):,.0f}" if values else "-"

    for column in ("measure", "High", "Low"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    for label, q in (("p50 ms, steady state", 0.50), ("p95 ms, steady state", 0.95), ("p99 ms, steady state", 0.99)):
        table.add_row(label, *(ms(split[p][1], q) for p in ("High", "Low")))
    table.add_row("cold start: messages sent before the first was processed",
                  *(str(len(split[p][0])) for p in ("High", "Low")))
    table.add_row("cold start: worst ms", *(ms(split[p][0], 1.0) for p in ("High", "Low")))
    table.add_row("p99 ms, all messages (cold start included)",
                  *(ms(consumer.get(p, []), 0.99) for p in ("High", "Low")))
    table.add_row("SLO", *(f"{slo[p]:g} s" for p in ("High", "Low")))
    table.add_row("within SLO, all messages", *(f"{within(consumer.get(p, []), slo[p]):.1%}"
                                                if consumer.get(p) else "-" for p in ("High", "Low")))
    table.add_row("messages processed (load and drain)", *(str(len(consumer.get(p, []))) for p in ("High", "Low")))
    stats = host.stats.by_function()
    # the chart's bars: writes per 1-s window at the store (rows' Timestamps), else as the leveler logged them
    counted = at_store if at_store is not None else stored
    windows = per_second(counted, start, drain_end)
    peak, peak_at = busiest_window(counted)
    rows_text = "-" if rows is None else str(rows)
    during = [e for e in host.scaler.events if e.at >= start] if host.scaler else []
    dead = final.get("leveling")
    lines = [
        f"leveler table writes: {len(stored)} upserts in the run, {rows_text} rows in the table (one per message "
        f"id: a redelivery rewrites its row); " + cap_verdict(windows, cap, at_store is not None,
                                                                 sliding=(peak, peak_at - start)),
        f"drain: no new work after {end - start:.0f} s; backlogs " + (
            f"empty {drained:.1f} s later" if drained >= 0 else f"not empty after {drain_end - end:.0f} s"),
        "left in each entity after the drain (active / dead-lettered): " + ", ".join(
            f"{k} {c.show(c.active)} / {c.dead_letter}" for k, c in final.items()),
        f"poison: {poison_sent} sent; leveling's dead-letter queue holds {dead.dead_letter if dead else '-'}, by "
        "reason: " + (", ".join(f"{r} {n}" for r, n in sorted(reasons.items())) or "none"),
        "instances per app (peak of limit, scale decisions that changed the count during the run): " + (
            ", ".join(f"{role} {host.scaler.peak(role)} of {host.scaler.limit(role)}, "
                      f"{sum(1 for e in during if e.role == role)}" for role in host.scaler.apps)
            if host.scaler else "fixed pools"),
        "invocations (function: succeeded / failed, on how many instance slots; an instance stopped and "
        "started again in its slot counts once, a live instance that got no message not at all): " + ", ".join(
            f"{f} {c['succeeded']} / {c['failed']} on {c['instances']}" for f, c in sorted(stats.items())),
        f"chart: {out}",
    ]
    console = Console(file=sys.stdout, width=120)
    console.print(table)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)  # one line each, whatever the width
    return "\n".join(lines)


def cap_verdict(windows: list[int], cap: float, at_store: bool, *, sliding: tuple[int, float] | None = None) -> str:
    """The busiest 1-s window (the chart's highest bar) against the cap; a window over it is said plainly.

    ``sliding`` is (most writes in any 1-s window, where it starts, in seconds since the start): the
    budget caps every window, not only the chart's seconds, so one over the cap between two bars is
    a broken cap too, and said so although no bar shows it."""
    where = "at the store" if at_store else "as the leveler logged them (the table's times were not readable)"
    over = [(second, count) for second, count in enumerate(windows) if count > cap]
    if not over and sliding is not None and sliding[0] > cap:
        return (f"THE CAP WAS BROKEN: {sliding[0]} writes {where} within the 1 s from {sliding[1]:.2f} s, over "
                f"{cap:g}/s (between the chart's seconds: its highest bar is {max(windows, default=0)})")
    if not over:
        busiest = max(windows, default=0)
        if sliding is not None:
            return (f"busiest 1-s window {busiest} writes {where} ({sliding[0]} in any 1 s), within the cap of "
                    f"{cap:g}/s")
        return f"busiest 1-s window {busiest} writes {where}, within the cap of {cap:g}/s"
    shown = ", ".join(f"{count} at {second} s" for second, count in over[:5])
    return f"THE CAP WAS BROKEN: {len(over)} 1-s window(s) {where} over {cap:g}/s ({shown})"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("WARNING")
    # the poison is sent on purpose and shown in the dashboard with its reason: one log line per poison
    # message from the consumer and the leveler would only break up the live view
    for name in ("pipeline.consumer", "pipeline.leveler"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    live_terminal = sys.stdout.isatty() and not args.plain
    overrides = dict(DEMO_SETTINGS)
    if args.strategy:
        overrides["PRIORITY_STRATEGY"] = args.strategy
    try:
        options = HostOptions(settings_file=args.settings, overrides=overrides,
                              instances=parse_instances(args.instances),
                              scale=scale_options(args), connect_timeout=10.0)
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
    assert host.settings is not None
    strategy = host.settings.get("PRIORITY_STRATEGY") or "separate"
    cap = float(DEMO_SETTINGS["LEVELER_MAX_WRITES_PER_SECOND"])
    probe = None
    plan = burst_plan(args.duration, args.burst_size, args.burst_interval, first_at=5.0, high_burst=args.high_burst)
    publisher = BurstPublisher(host.service_bus_client, plan, strategy=strategy,
                               aging_after=float(DEMO_SETTINGS["AGING_AFTER_SECONDS"]),
                               poison_every=args.poison_every, duration=args.duration)
    stop_ordered_at = args.duration / 2 if args.stop_ordered_at is None else args.stop_ordered_at
    stop_leader_at = args.duration * 0.7 if args.stop_leader_at is None else args.stop_leader_at
    leaders: LeaderDemo | None = None
    backlog: list[tuple[float, dict[str, int]]] = []
    dead_letters: list[tuple[float, int]] = []
    instances_seen: list[tuple[float, dict[str, int]]] = []
    events: list[tuple[float, str]] = []
    try:
        host.wait_connected(60)
        probe = BacklogProbe(host.service_bus_client, host.admin_client, entities=pipeline_entities(strategy))
        leaders = LeaderDemo(host.service_bus_client)
        leaders.start()
        start = time.time()
        publisher.start()
        live = None
        if live_terminal:
            from rich.live import Live

            live = Live(refresh_per_second=2, transient=False)
            live.start()
        last_plain = last_audit = 0.0
        reasons: dict[str, int] = {}
        ordered: tuple = ({}, (0, 0))
        ordered_note = ""
        phase, end, drained = "load", start + args.duration, -1.0
        drain_end = end + args.drain
        while (now := time.time()) < drain_end:
            if phase == "load" and now >= end:
                phase = "drain"  # no new work from here: the bursts are over, the sender's timer stops
                publisher.stop()
                host.stop_timers()
            if (phase == "load" and ordered_note == "" and stop_ordered_at >= 0 and now - start >= stop_ordered_at
                    and host.scaler is not None and "ordered" in host.scaler.apps):
                stopped = host.scaler.remove("ordered")
                if stopped is not None:
                    ordered_note = (f"{stopped} stopped at {now - start:.0f} s (its session locks released; the "
                                    "other instances, or a new one, take its tenants over)")
                    events.append((now, f"{stopped} stopped"))
            # the leader may be elected late on a loaded machine: stop it as soon as there is one, in the
            # drain too, so the failover is always shown
            if leaders.stopped is None and 0 <= stop_leader_at <= now - start:
                stopped_leader = leaders.stop_leader()
                if stopped_leader is not None:
                    events.append((now, f"leader {stopped_leader} stopped"))
            counts = probe.counts()
            backlog.append((now, {k: c.active for k, c in counts.items()}))
            if "leveling" in counts:
                dead_letters.append((now, counts["leveling"].dead_letter))
            instances_seen.append((now, instance_counts(host)))
            if now - last_audit >= 3.0:
                reasons = probe.dead_letter_reasons()
                ordered = ordered_panel(ordered_audit(host, DEMO_SETTINGS["ORDERED_TABLE"]))
                last_audit = now
            failover_pending = stop_leader_at >= 0 and (leaders.stopped is None or leaders.failover_gap() is None)
            if phase == "drain" and not failover_pending and all(c.active == 0 for c in counts.values()):
                drained = now - end
                break
            view = build_view(host, collector, probe, counts, start, args.duration, cap, publisher,
                              strategy=strategy, phase=phase, reasons=reasons, ordered=ordered,
                              ordered_note=ordered_note, leader=leaders.describe(start))
            if live is not None:
                live.update(render_rich(view))
            elif now - last_plain >= 5.0:
                render_plain(view, sys.stdout)
                last_plain = now
            time.sleep(max(0.0, 1.0 - (time.time() - now)))
        if live is not None:
            live.stop()
        finished = time.time()
        publisher.stop()
        final = probe.counts()
        reasons = probe.dead_letter_reasons()
        host.stop_functions()
        rows = count_rows(host, DEMO_SETTINGS["RESULTS_TABLE"])
        at_store = store_times(host, DEMO_SETTINGS["RESULTS_TABLE"], start)
        chart = write_chart(args.out / "demo.png", start=start, end=finished,
                            consumer=collector.consumer_samples(start),
                            stored=at_store if at_store is not None else collector.stored_times(start),
                            stored_at_store=at_store is not None,
                            cap=cap, backlog=backlog, bursts=publisher.bursts, instances=instances_seen,
                            limits={role: host.scaler.limit(role) for role in host.scaler.apps} if host.scaler else {},
                            slo_ms={p: v * 1000 for p, v in slo_seconds().items()}, dead_letters=dead_letters,
                            drain_at=min(end, finished), events=events, strategy=strategy)
        summary(host, collector, start, end, cap, rows, final, chart, strategy=strategy, drained=drained,
                drain_end=finished, reasons=reasons, poison_sent=publisher.poison_sent, at_store=at_store)
        for line in ordered_summary_lines(ordered_audit(host, DEMO_SETTINGS["ORDERED_TABLE"]), ordered_note):
            print(line, flush=True)
        print(f"leader election (two replicas, one session lock on leader-election): {leaders.describe(start)}",
              flush=True)
    finally:
        publisher.stop()
        if leaders is not None:
            leaders.close()
        if probe is not None:
            probe.close()
        host.stop()
        collector.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
