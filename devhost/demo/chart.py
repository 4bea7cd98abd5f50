"""The demo's PNG: latency per priority over time, store writes/s against the cap, backlogs."""

from __future__ import annotations

import math
from pathlib import Path

from devhost.demo.metrics import Sample, per_second, percentile

#: seconds each point of the latency lines looks back: wider than the sender's 2-s tick, so a priority
#: that is processed at all is a continuous line rather than dots between empty seconds
WINDOW = 5


def _series(samples: list[Sample], start: float, seconds: int, q: float, window: int = WINDOW) -> list[float]:
    buckets: list[list[float]] = [[] for _ in range(seconds)]
    for sample in samples:
        index = int(sample.at - start)
        if 0 <= index < seconds:
            buckets[index].append(sample.latency_ms)
    result = []
    for i in range(seconds):
        values = [v for b in buckets[max(0, i - window + 1):i + 1] for v in b]
        result.append(percentile(values, q) if values else math.nan)
    return result


def write_chart(path: Path, *, start: float, end: float, consumer: dict[str, list[Sample]],
                stored: list[float], cap: float, backlog: list[tuple[float, dict[str, int]]],
                bursts: list[tuple[float, int, str]], instances: list[tuple[float, dict[str, int]]] | None = None,
                limits: dict[str, int] | None = None, slo_ms: dict[str, float] | None = None,
                dead_letters: list[tuple[float, int]] | None = None, drain_at: float | None = None,
                events: list[tuple[float, str]] | None = None, strategy: str = "separate",
                stored_at_store: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds = max(1, math.ceil(end - start))
    xs = list(range(seconds))
    roles = list(instances[0][1]) if instances else []
    # one thin row per app: on a shared axis, apps at the same count (often 1) hide each other
    rows = max(1, len(roles))
    fig = plt.figure(figsize=(10, 10 + 0.75 * rows))
    grid = fig.add_gridspec(3 + rows, 1, height_ratios=[3, 3, 3] + [0.75] * rows)
    latency = fig.add_subplot(grid[0])
    writes = fig.add_subplot(grid[1], sharex=latency)
    queues = fig.add_subplot(grid[2], sharex=latency)
    lanes = [fig.add_subplot(grid[3 + i], sharex=latency) for i in range(rows)]
    axes = [latency, writes, queues, *lanes]
    colors = {"High": "tab:red", "Low": "tab:blue"}
    for priority in ("High", "Low"):
        samples = consumer.get(priority, [])
        color = colors[priority]
        latency.plot(xs, _series(samples, start, seconds, 0.50), color=color, linewidth=1.5, label=f"{priority} p50")
        latency.plot(xs, _series(samples, start, seconds, 0.95), color=color, linestyle="--", linewidth=1,
                     label=f"{priority} p95")
        if slo_ms and priority in slo_ms:
            latency.axhline(slo_ms[priority], color=color, linestyle=":", linewidth=1.2,
                            label=f"{priority} SLO {slo_ms[priority] / 1000:g} s")
    last_label = -math.inf
    for at, size, kind in bursts:
        for ax in axes:
            ax.axvline(at - start, color="grey", alpha=0.3, linewidth=1)
        # bursts a few seconds apart would print their labels over each other: step the next one down
        height = 0.93 if at - last_label < 0.06 * seconds else 1.0
        last_label = at if height == 1.0 else last_label
        latency.annotate(f"+{size} {kind.lower()}", (at - start, height), xycoords=("data", "axes fraction"),
                         fontsize=7, color="grey", va="top")
    for at, text in events or []:
        for ax in axes:
            ax.axvline(at - start, color="purple", alpha=0.5, linewidth=1, linestyle="-.")
        latency.annotate(text, (at - start, 0.85), xycoords=("data", "axes fraction"), fontsize=7,
                         color="purple", va="top")
    if drain_at is not None:
        for ax in axes:
            ax.axvspan(drain_at - start, seconds, color="grey", alpha=0.08)
        latency.annotate("drain", (drain_at - start, 0.7), xycoords=("data", "axes fraction"), fontsize=7,
                         color="grey")
    latency.set_yscale("log")
    if slo_ms:  # a decade above the highest SLO line, so it runs below the burst and event labels, not through them
        bottom, top = latency.get_ylim()
        latency.set_ylim(bottom, max(top, 10 * max(slo_ms.values())))
    latency.set_ylabel("latency at the consumer (ms)")
    latency.set_title(f"Priority ({strategy}): latency per priority over the last {WINDOW} s "
                      "(p50 solid, p95 dashed, SLO dotted)")
    # below the panel, outside the plot: inside it hid the burst labels along the top and the low SLO line
    latency.legend(loc="upper center", bbox_to_anchor=(0.5, -0.04), fontsize=7, ncol=6, frameon=False)

    counts = per_second(stored, start, end)
    over = [count > cap for count in counts]
    writes.bar(list(range(len(counts))), counts, color=["tab:red" if o else "tab:green" for o in over],
               label="table writes/s" + (" (row Timestamp at the store)" if stored_at_store else ""))
    writes.axhline(cap, color="black", linestyle="--", label=f"cap {cap:g}/s")
    writes.set_ylabel("writes per second")
    writes.set_ylim(0, max(max(counts, default=0), cap) * 1.35)  # room above the cap for the legend
    title = "Load leveling: store writes per second against the cap"
    if any(over):  # the budget exists so this never happens: when it does, the chart says so in red
        title += f" - CAP BROKEN in {sum(over)} second(s)"
    writes.set_title(title, color="tab:red" if any(over) else "black")
    writes.legend(loc="upper right", fontsize=8, ncol=2)

    if backlog:
        labels = list(backlog[0][1])
        for label in labels:
            queues.plot([at - start for at, _ in backlog], [c.get(label, 0) for _, c in backlog], label=label)
    if dead_letters:
        queues.plot([at - start for at, _ in dead_letters], [n for _, n in dead_letters], color="black",
                    linestyle="--", label="leveling dead-lettered (poison)")
    queues.set_ylabel("messages")
    queues.set_title("Messages waiting per entity, and dead-lettered in leveling")
    queues.legend(loc="upper left", fontsize=8)
    times = [at - start for at, _ in instances or []]
    for index, (lane, role) in enumerate(zip(lanes, roles or [""], strict=True)):
        counts = [c.get(role, 0) for _, c in instances or []]
        peak = max(counts, default=0)
        limit = (limits or {}).get(role, "?")
        color = f"C{index}"
        if counts:
            lane.fill_between(times, counts, step="post", color=color, alpha=0.25)
            lane.step(times, counts, where="post", color=color, linewidth=1.5)
        lane.set_ylim(0, max(peak, 1) * 1.8)  # room above the line for the label
        lane.set_yticks(sorted({0, peak}))
        label = f"{role}: peak {peak} of limit {limit}" if role else "no instance counts sampled"
        lane.text(0.005, 0.92, label, transform=lane.transAxes, fontsize=8,
                  va="top", ha="left", bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
        if index < rows - 1:
            lane.tick_params(labelbottom=False)
    lanes[0].set_title("Scale-out: live instances per app (target-based scaling within maximumInstanceCount)")
    lanes[rows // 2].set_ylabel("live instances")
    lanes[-1].set_xlabel("seconds since start")
    for ax in (latency, writes, queues):
        ax.tick_params(labelbottom=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
