"""The live view: a rich dashboard on a terminal, a plain periodic summary otherwise."""

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


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}"


def render_rich(view: View) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    title = Text(f"Priority + load leveling demo — {view.elapsed:4.0f}s / {view.duration:.0f}s", style="bold")
    queues = Table(title=f"Backlog ({view.backlog_source})", expand=True)
    for column in ("entity", "active", "dead-lettered"):
        queues.add_column(column, justify="right" if column != "entity" else "left")
    for label, count in view.backlog.items():
        queues.add_row(label, count.show(count.active), str(count.dead_letter))
    priority = Table(title="Consumers (last 10 s)", expand=True)
    for column in ("priority", "processed/s", "p50 ms", "p95 ms", "total", "instances live/limit"):
        priority.add_column(column, justify="right" if column != "priority" else "left")
    for name, function in (("High", "consumer_high"), ("Low", "consumer_low")):
        priority.add_row(name, f"{view.processed_per_s.get(name, 0):.1f}", _ms(view.p50_ms.get(name, math.nan)),
                         _ms(view.p95_ms.get(name, math.nan)), str(view.processed_total.get(name, 0)),
                         view.instances.get(function, "-"))
    style = "bold red" if view.writes_per_s > view.cap * 1.05 else "green"
    store = Text(f"Table writes: {view.writes_per_s:.1f}/s (cap {view.cap:g}/s), {view.writes_total} total; "
                 f"leveler instances live/limit {view.instances.get('leveler', '-')}; "
                 f"low-priority bursts sent: {view.published_bursts}", style=style)
    apps = Table(title="Instances per app (scale controller)", expand=True)
    for column in ("app", "live/limit", "peak"):
        apps.add_column(column, justify="right" if column != "app" else "left")
    for app, live, peak in view.apps:
        apps.add_row(app, live, str(peak))
    events = Text("\n".join(view.scale_events) or "no scale event yet", style="dim")
    return Group(title, queues, priority, store, apps, Text("Scale events", style="bold"), events)


def render_plain(view: View, out: TextIO) -> None:
    backlog = ", ".join(f"{label}={c.show(c.active)} (dlq {c.dead_letter})" for label, c in view.backlog.items())
    consumers = "; ".join(
        f"{p}: {view.processed_per_s.get(p, 0):.1f}/s p50={_ms(view.p50_ms.get(p, math.nan))}ms "
        f"p95={_ms(view.p95_ms.get(p, math.nan))}ms" for p in ("High", "Low"))
    apps = ", ".join(f"{app} {live}" for app, live, _ in view.apps) or "-"
    print(f"[{view.elapsed:4.0f}s] backlog: {backlog} | {consumers} | writes {view.writes_per_s:.1f}/s "
          f"(cap {view.cap:g}) | instances: {apps}", file=out, flush=True)
    for event in view.scale_events[-2:]:
        print(f"    scale: {event}", file=out, flush=True)
