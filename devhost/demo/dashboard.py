"""The live view: a rich dashboard on a terminal, a plain periodic summary otherwise.

Every table is as wide as its content (not the terminal's width), and every figure says what it counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TextIO

from devhost.demo.backlog import Count


@dataclass
class View:
    elapsed: float
    duration: float
    backlog: dict[str, Count]
    backlog_source: str
    processed_per_s: dict[str, float]
    p50_ms: dict[str, float]
    p95_ms: dict[str, float]
    processed_total: dict[str, int]
    writes_per_s: float
    writes_total: int
    cap: float
    instances: dict[str, str] = field(default_factory=dict)  # function -> "live/limit" (or "used/run")
    published_bursts: int = 0
    apps: list[tuple[str, str, int]] = field(default_factory=list)  # (app, live/limit, peak)
    scale_events: list[str] = field(default_factory=list)  # the latest scale decisions that changed something
    strategy: str = "separate"
    phase: str = "load"  # "load", then "drain" (no new work; the backlogs empty)
    slo_s: dict[str, float] = field(default_factory=dict)  # priority -> target latency, seconds
    within_slo: dict[str, float] = field(default_factory=dict)  # priority -> share of all processed so far
    poison_sent: int = 0
    dead_letter_reasons: dict[str, int] = field(default_factory=dict)  # leveling's dead-letter queue
    ordered: dict[str, tuple[int, int]] = field(default_factory=dict)  # tenant -> (writes applied, instances)
    ordered_faults: tuple[int, int] = (0, 0)  # (out of order, applied twice), from the table
    ordered_note: str = ""  # e.g. "ordered#1 stopped at 30 s"
    consumer_functions: tuple[str, ...] = ("consumer_high", "consumer_low")
    leader: str = ""  # leader election: who leads, the failover and its gap


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.0%}"


def render_rich(view: View) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    phase = "drain: no new work" if view.phase == "drain" else "load"
    title = Text(f"Priority + load leveling + ordered writes demo, strategy {view.strategy} — "
                 f"{view.elapsed:4.0f}s / {view.duration:.0f}s ({phase})", style="bold")
    queues = Table(title=f"Messages waiting ({view.backlog_source})")
    for column in ("entity", "active", "dead-lettered"):
        queues.add_column(column, justify="right" if column != "entity" else "left")
    for label, count in view.backlog.items():
        queues.add_row(label, count.show(count.active), str(count.dead_letter))
    priority = Table(title="Consumers: end-to-end latency, last 10 s")
    for column in ("priority", "processed/s", "p50 ms", "p95 ms", "SLO", "within SLO (run)", "processed (run)",
                   "instances live/limit"):
        priority.add_column(column, justify="right" if column != "priority" else "left")
    functions = dict(zip(("High", "Low"), view.consumer_functions * (2 if len(view.consumer_functions) == 1 else 1),
                         strict=False))
    for name in ("High", "Low"):
        slo = view.slo_s.get(name)
        priority.add_row(name, f"{view.processed_per_s.get(name, 0):.1f}", _ms(view.p50_ms.get(name, math.nan)),
                         _ms(view.p95_ms.get(name, math.nan)), f"{slo:g} s" if slo else "-",
                         _share(view.within_slo.get(name)), str(view.processed_total.get(name, 0)),
                         view.instances.get(functions.get(name, ""), "-"))
    style = "bold red" if view.writes_per_s > view.cap * 1.05 else "green"
    store = Text(f"Leveler table writes: {view.writes_per_s:.1f}/s now (cap {view.cap:g}/s), {view.writes_total} "
                 f"in the run; leveler instances live/limit {view.instances.get('leveler', '-')}; bursts sent: "
                 f"{view.published_bursts}", style=style)
    reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(view.dead_letter_reasons.items())) or "none yet"
    poison = Text(f"Poison: {view.poison_sent} sent; leveling dead-letter queue by reason: {reasons}")
    ordered = Table(title="Ordered writer: writes applied per tenant (from its table)")
    for column in ("tenant", "applied in order", "instances that applied"):
        ordered.add_column(column, justify="right" if column != "tenant" else "left")
    for tenant, (applied, writers) in sorted(view.ordered.items()):
        ordered.add_row(tenant, str(applied), str(writers))
    out_of_order, doubled = view.ordered_faults
    ordered_text = Text(f"out of order: {out_of_order}, applied twice: {doubled}"
                        + (f"; {view.ordered_note}" if view.ordered_note else ""))
    apps = Table(title="Instances per app (scale controller)")
    for column in ("app", "live/limit", "peak"):
        apps.add_column(column, justify="right" if column != "app" else "left")
    for app, live, peak in view.apps:
        apps.add_row(app, live, str(peak))
    events = Text("\n".join(view.scale_events) or "no scale event yet", style="dim")
    leader = Text(f"Leader election: {view.leader or '-'}")
    return Group(title, queues, priority, store, poison, ordered, ordered_text, leader, apps,
                 Text("Scale events", style="bold"), events)


def render_plain(view: View, out: TextIO) -> None:
    backlog = ", ".join(f"{label}={c.show(c.active)} (dlq {c.dead_letter})" for label, c in view.backlog.items())
    consumers = "; ".join(
        f"{p}: {view.processed_per_s.get(p, 0):.1f}/s p50={_ms(view.p50_ms.get(p, math.nan))}ms "
        f"p95={_ms(view.p95_ms.get(p, math.nan))}ms within {view.slo_s.get(p, math.nan):g}s SLO "
        f"{_share(view.within_slo.get(p))}" for p in ("High", "Low"))
    apps = ", ".join(f"{app} {live}" for app, live, _ in view.apps) or "-"
    reasons = ", ".join(f"{r} {n}" for r, n in sorted(view.dead_letter_reasons.items())) or "none"
    print(f"[{view.elapsed:4.0f}s {view.phase}] backlog: {backlog} | {consumers} | writes {view.writes_per_s:.1f}/s "
          f"(cap {view.cap:g}) | dead-lettered: {reasons} | {view.leader or 'leader: -'} | instances: {apps}",
          file=out, flush=True)
    for event in view.scale_events[-2:]:
        print(f"    scale: {event}", file=out, flush=True)
