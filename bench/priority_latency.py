"""Priority under pressure: high-priority latency with a 20,000-message low-priority backlog.

Two pipelines run side by side in one devhost, through the real Functions code:

- the Priority Queue design: topic ``messages`` -> ``consumer_high`` / ``consumer_low``, each role
  with its own instance limit and maxConcurrentCalls from infra/main.bicep;
- a FIFO baseline: one queue, one consumer app running the same ``process_message`` with the same
  per-priority work, given as many instances and concurrent calls as both priority apps together.
  It has its own emulator process, so the two designs never compete inside one broker.

Phase 1 streams high-priority messages with no backlog (the reference p99). Phase 2 first publishes
20,000 low-priority messages to both, then the same high-priority stream to both. Latency is the
consumer's own end-to-end figure (``created_at`` to processed, logged by ``LatencyRecorder``).
High-priority messages the baseline has not processed when the bounded wait ends count with the
time they had waited so far (a lower bound), so the baseline figure can only be understated.

Under the scale controller (the default) both phases start from zero instances. The messages that
queued behind the start from zero (sent before consumer-high processed its first one, or while it
was still working through those) are the cold start, reported apart; the goals are on the p99 of
the rest (steady state), and the p99 of all messages is reported too. ``--fixed`` runs the Bicep
limits as fixed pools instead, for comparison, and writes its own section.

Goals: phase-2 steady-state p99 of the priority design within 2x of its phase-1 p99, and at least 10x better
than the FIFO baseline's phase-2 p99. Exit code 0 when both hold, 1 otherwise.
"""

import argparse
import json
import logging
import math
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import azure.functions as func

from bench._util import (
    REPO_ROOT,
    command_line,
    config_file,
    emulator,
    machine,
    markdown_table,
    today,
    topology,
    write_section,
)
from consumers.priority import process_message
from devhost.demo.metrics import Sample, TelemetryCollector, percentile
from devhost.host import Host, HostOptions
from devhost.local_services import LocalServices, emulator_admin_connection_string
from devhost.scale import RoleScale, load_role_scales
from devhost.scale_controller import DEFAULT_COLD_START, ScaleOptions
from functions import runtime
from sbemulator.runtime.launcher import EmulatorProcess
from sender.messages import build_contract_messages, publish, to_service_bus_message
from shared.topology import HIGH, LOW, PRIORITY_PROPERTY, QUEUE_LEVELING, TOPIC

BASELINE_QUEUE = "fifo-baseline"
BASELINE_CONNECTION = "BaselineServiceBusConnection"
BASELINE_FUNCTION = "fifo_baseline"
SECTION_KEY = "priority"
FIXED_SECTION_KEY = "priority-fixed"  # --fixed: the comparison run, under the scale controller's section
PUBLISH_TIMEOUT_S = 300  # the 20,000-message backlog takes seconds; this only bounds a hang
SETTINGS = {"CONSUMER_WORK_MS_HIGH": "50", "CONSUMER_WORK_MS_LOW": "200"}
TENANTS = ("tenant-1", "tenant-2", "tenant-3")


def baseline_app() -> func.FunctionApp:
    """The single-queue consumer: the same work as the priority consumers, in arrival order."""
    app = func.FunctionApp()

    @app.function_name(BASELINE_FUNCTION)
    @app.service_bus_queue_trigger(arg_name="message", queue_name=BASELINE_QUEUE, connection=BASELINE_CONNECTION)
    @app.service_bus_queue_output(arg_name="leveling", queue_name=QUEUE_LEVELING, connection=BASELINE_CONNECTION)
    def fifo_baseline(message: func.ServiceBusMessage, leveling: func.Out[str]) -> None:
        settings = runtime.app_settings()
        high = message.application_properties.get(PRIORITY_PROPERTY) == HIGH
        processed = process_message(
            message.get_body(), consumer=BASELINE_FUNCTION,
            work_ms=settings.consumer_work_ms_high if high else settings.consumer_work_ms_low,
            enqueued_at=message.enqueued_time_utc, recorder=runtime.latency_recorder(),
        )
        leveling.set(processed.body)

    return app


@dataclass
class Stream:
    """High-priority messages sent to one destination: message id -> created time (epoch seconds)."""

    sent: dict[str, float]


def stream_high(host: Host, rate: float, seconds: float) -> tuple[Stream, Stream]:
    """``rate`` high-priority messages/s for ``seconds``, one to the topic and one to the baseline each tick."""
    design, baseline = Stream({}), Stream({})
    with host.service_bus_client() as design_client, host.service_bus_client(BASELINE_CONNECTION) as base_client, \
            design_client.get_topic_sender(TOPIC) as topic, base_client.get_queue_sender(BASELINE_QUEUE) as queue:
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            for sender, stream in ((topic, design), (queue, baseline)):
                (message,) = build_contract_messages(1, 0, TENANTS)
                sender.send_messages(to_service_bus_message(message))
                stream.sent[message.message_id] = message.created_at.timestamp()
    return design, baseline


def publish_backlog(host: Host, count: int) -> float:
    """``count`` low-priority messages to the topic and to the baseline queue, in parallel."""
    started = time.monotonic()

    def send(connection: str, topic: bool) -> None:
        with host.service_bus_client(connection) as client, \
                (client.get_topic_sender(TOPIC) if topic else client.get_queue_sender(BASELINE_QUEUE)) as sender:
            for offset in range(0, count, 1000):
                messages = build_contract_messages(0, min(1000, count - offset), TENANTS)
                publish(sender, [to_service_bus_message(m) for m in messages])

    threads = [threading.Thread(target=send, args=("ServiceBusConnection", True)),
               threading.Thread(target=send, args=(BASELINE_CONNECTION, False))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PUBLISH_TIMEOUT_S)
        if thread.is_alive():
            raise TimeoutError(f"publishing the backlog took longer than {PUBLISH_TIMEOUT_S} s")
    return time.monotonic() - started


def latencies(collector: TelemetryCollector, stage: str, stream: Stream, now: float) -> tuple[list[float], int]:
    """Latency (ms) of each message of ``stream`` as its consumer recorded it. A message not processed
    yet counts with the time it has waited until ``now`` (a lower bound). Returns (latencies, missing)."""
    recorded = {s.message_id: s.latency_ms for s in collector.snapshot()
                if s.stage == stage and s.message_id in stream.sent}
    missing = [mid for mid in stream.sent if mid not in recorded]
    values = list(recorded.values()) + [(now - stream.sent[mid]) * 1000 for mid in missing]
    return values, len(missing)


def wait_for(collector: TelemetryCollector, stage: str, stream: Stream, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = {s.message_id for s in collector.snapshot() if s.stage == stage}
        if all(mid in done for mid in stream.sent):
            return
        time.sleep(0.5)


@dataclass
class Result:
    label: str
    count: int
    missing: int
    p50: float
    p99: float


def result(label: str, values: list[float], missing: int) -> Result:
    return Result(label, len(values), missing, percentile(values, 0.50), percentile(values, 0.99))


def baseline_scale(scales: dict[str, RoleScale], instances: dict[str, int]) -> RoleScale:
    """As many instances as both priority apps together, and about as many concurrent calls."""
    high, low = scales["consumer-high"], scales["consumer-low"]
    n_high = instances.get("consumer-high", high.max_instances)
    n_low = instances.get("consumer-low", low.max_instances)
    total_calls = n_high * high.max_concurrent_calls + n_low * low.max_concurrent_calls
    count = n_high + n_low
    return RoleScale("fifo-baseline", count, math.ceil(total_calls / count))


# --------------------------------------------------------------------------- the baseline's own process

def baseline_worker(instances: int, calls: int) -> int:
    """``--baseline-worker``: the FIFO baseline under its own devhost and emulator, driven over stdin.

    Commands (one per line): ``start`` and ``stop`` the function, ``quit``. Every consumer sample is
    printed as a JSON line, so the parent measures both designs the same way.
    """
    lock = threading.Lock()

    def emit(**event: object) -> None:
        with lock:
            print(json.dumps(event), flush=True)

    class Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            dims = getattr(record, "custom_dimensions", None)
            if dims:
                emit(sample=[record.created, dims["stage"], dims["priority"], dims["latency_ms"], dims["message_id"]])

    latency_log = logging.getLogger("pipeline.latency")
    latency_log.setLevel(logging.INFO)
    latency_log.propagate = False
    latency_log.addHandler(Forward())
    services = LocalServices()
    with config_file(topology(queues=[BASELINE_QUEUE, QUEUE_LEVELING])) as path:
        try:
            connection = services.start_service_bus(path)
            options = HostOptions(roles=(), use_local_settings=False, env={},
                                  overrides={**SETTINGS, BASELINE_CONNECTION: connection},
                                  extra_apps={"fifo-baseline": (baseline_app(), RoleScale("fifo-baseline", instances,
                                                                                          calls))})
            emit(event="ready", connection=connection)
            host: Host | None = None
            for line in sys.stdin:
                command = line.strip()
                if command == "start" and host is None:
                    host = Host(options).start()
                    host.wait_connected(120)
                    emit(event="started")
                elif command == "stop" and host is not None:
                    host.stop()
                    host = None
                    emit(event="stopped")
                elif command == "quit":
                    break
            if host is not None:
                host.stop()
        finally:
            services.stop()
    return 0


class BaselineProcess:
    """The parent's handle on the baseline worker: commands in, samples into the shared collector."""

    def __init__(self, scale: RoleScale, collector: TelemetryCollector, nice: int) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        prefix = ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "bench.priority_latency", "--baseline-worker",
             "--baseline-instances", str(scale.max_instances), "--baseline-calls", str(scale.max_concurrent_calls)],
            cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        self.collector = collector
        self.events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.connection = self._expect("ready", 60)["connection"]

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "sample" in event:
                at, stage, priority, latency, message_id = event["sample"]
                with self.collector._lock_samples:
                    self.collector.samples.append(Sample(at, stage, priority, latency, message_id))
            else:
                self.events.put(event)

    def _expect(self, name: str, timeout: float) -> dict:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"the baseline worker did not report {name!r} within {timeout:g}s") from None
        if event.get("event") != name:
            raise RuntimeError(f"the baseline worker reported {event!r}, expected {name!r}")
        return event

    def command(self, name: str, expect: str, timeout: float = 180) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()
        self._expect(expect, timeout)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(10)


# --------------------------------------------------------------------------- the run

def admin_connection(process: EmulatorProcess) -> tuple[str, str | None] | None:
    """The emulator's management endpoint for ServiceBusAdministrationClient (keys, admin port, CA)."""
    if process.admin_url is None:
        return None
    return emulator_admin_connection_string(process.connection_string, process.admin_url), process.ca_path


def pool(host: Host, role: str) -> str:
    if host.scaler is None or host.scaler.apps[role].fixed is not None:
        return str(host.plans[role].instances)
    return f"0..{host.scaler.limit(role)}"


def peaks(host: Host) -> dict[str, int]:
    if host.scaler is None:
        return {role: plan.instances for role, plan in host.plans.items()}
    return {role: host.scaler.peak(role) for role in host.scaler.apps}


@dataclass
class ColdStart:
    """The start of a stream from zero instances.

    ``waited``: the messages sent before consumer-high processed its first one (they waited for an
    instance to start). ``catching_up``: those plus the ones sent while the new instance was still
    working through them (sent before the last of them was processed), so they queued behind the
    cold start too. The steady-state rows cover the messages sent after that."""

    waited: int
    first_ms: float
    catching_up: int
    caught_up_s: float  # seconds after the stream's first message
    max_ms: float

def raw_stream(collector: TelemetryCollector, stage: str, stream: Stream) -> list[dict]:
    """Each message of ``stream``: when it was sent, when ``stage`` processed it and its latency (ms)."""
    done = {s.message_id: s for s in collector.snapshot() if s.stage == stage and s.message_id in stream.sent}
    return [{"message_id": mid, "sent": sent, "processed": done[mid].at if mid in done else None,
             "latency_ms": done[mid].latency_ms if mid in done else None}
            for mid, sent in sorted(stream.sent.items(), key=lambda item: item[1])]


def raw_events(host: Host) -> list[dict]:
    return [] if host.scaler is None else [
        {"at": e.at, "role": e.role, "previous": e.previous, "instances": e.instances, "desired": e.desired,
         "reason": e.reason, "backlogs": dict(e.backlogs)} for e in host.scaler.events]


class SampleSource(Protocol):
    """What :func:`split_cold` reads of a ``TelemetryCollector`` (its tests hand it a list of samples)."""

    def snapshot(self) -> list[Sample]: ...


def split_cold(collector: SampleSource, stream: Stream) -> tuple[ColdStart, Stream]:
    """Set apart the messages that queued behind the start from zero (see :class:`ColdStart`)."""
    samples = [s for s in collector.snapshot() if s.stage == "consumer_high" and s.message_id in stream.sent]
    if not samples or not stream.sent:
        return ColdStart(0, math.nan, 0, math.nan, math.nan), stream
    processed = {s.message_id: s.at for s in samples}
    latency = {s.message_id: s.latency_ms for s in samples}
    start = min(stream.sent.values())
    first = min(stream.sent, key=lambda mid: stream.sent[mid])
    first_done = min(processed.values())
    waited = [mid for mid, t in stream.sent.items() if t < first_done]
    caught_up = max(processed.get(mid, math.inf) for mid in waited or [first])
    cold = {mid for mid, t in stream.sent.items() if t < caught_up}
    cold_latencies = [latency[mid] for mid in cold if mid in latency]
    return (ColdStart(len(waited), latency.get(first, math.nan), len(cold), caught_up - start,
                      max(cold_latencies, default=math.nan)),
            Stream({mid: t for mid, t in stream.sent.items() if mid not in cold}))


def run(args: argparse.Namespace) -> tuple[list[Result], dict]:
    """Phase 1 and phase 2 are two devhost runs on the same emulators; the backlog is published
    between them, while no consumer runs, so both designs start phase 2 with all of it."""
    from devhost.cli import parse_instances

    instances = parse_instances(args.instances)
    scales = load_role_scales()
    base_scale = baseline_scale(scales, {role: instances.get(role, 0) or scales[role].max_instances
                                         for role in ("consumer-high", "consumer-low")})
    # the scale controller reads each trigger's backlog through the management endpoint, as in Azure;
    # in memory, so that nothing a previous run left behind is in the queues
    with emulator(REPO_ROOT / "infra" / "servicebus.json", "--in-memory") as design_emulator, \
            TelemetryCollector() as collector:
        baseline = BaselineProcess(base_scale, collector, args.baseline_nice)
        try:
            options = HostOptions(
                roles=("consumer-high", "consumer-low"), use_local_settings=False, env={},
                overrides={**SETTINGS, "ServiceBusConnection": design_emulator.connection_string,
                           BASELINE_CONNECTION: baseline.connection},
                instances=instances,
                scale=None if args.fixed else ScaleOptions(cold_start=args.cold_start),
                admin_connection=admin_connection(design_emulator),
            )
            started = time.monotonic()
            with Host(options) as host:
                host.wait_connected(120)
                baseline.command("start", "started")
                setup = time.monotonic() - started
                plans = {p.role: f"{pool(host, p.role)} x {p.options.max_concurrent_calls}"
                         for p in host.plans.values()}
                plans["fifo-baseline"] = f"{base_scale.max_instances} x {base_scale.max_concurrent_calls}"
                print(f"devhost up in {setup:.1f}s: {plans}", flush=True)
                time.sleep(args.warmup)
                print(f"phase 1: {args.rate:g} high/s for {args.seconds:g}s, no backlog", flush=True)
                design1, base1 = stream_high(host, args.rate, args.seconds)
                wait_for(collector, "consumer_high", design1, 30)
                wait_for(collector, BASELINE_FUNCTION, base1, 30)
                now = time.time()
                cold1, warm1 = split_cold(collector, design1)
                r1 = [result("priority design, no backlog, steady state",
                             *latencies(collector, "consumer_high", warm1, now)),
                      result("priority design, no backlog, all messages",
                             *latencies(collector, "consumer_high", design1, now)),
                      result("FIFO baseline, no backlog", *latencies(collector, BASELINE_FUNCTION, base1, now))]
                peaks1 = peaks(host)
                raw1 = {"design": raw_stream(collector, "consumer_high", design1),
                        "baseline": raw_stream(collector, BASELINE_FUNCTION, base1), "scale_events": raw_events(host)}
                host.stop_functions()
                baseline.command("stop", "stopped")
                print(f"phase 2: publishing {args.backlog} low-priority messages to both (no consumer running)",
                      flush=True)
                backlog_seconds = publish_backlog(host, args.backlog)
            with Host(options) as host:
                host.wait_connected(120)
                baseline.command("start", "started")
                time.sleep(args.warmup)
                print(f"  published in {backlog_seconds:.1f}s; consumers restarted; streaming {args.rate:g} "
                      f"high/s for {args.seconds:g}s", flush=True)
                phase2 = time.time()
                design2, base2 = stream_high(host, args.rate, args.seconds)
                wait_for(collector, "consumer_high", design2, 30)
                wait_for(collector, BASELINE_FUNCTION, base2, args.drain_wait)
                now = time.time()
                label = f"{args.backlog:,} backlog"
                cold2, warm2 = split_cold(collector, design2)
                peaks2 = peaks(host)
                raw2 = {"design": raw_stream(collector, "consumer_high", design2),
                        "baseline": raw_stream(collector, BASELINE_FUNCTION, base2), "scale_events": raw_events(host)}
                r2 = [result(f"priority design, {label}, steady state",
                             *latencies(collector, "consumer_high", warm2, now)),
                      result(f"priority design, {label}, all messages",
                             *latencies(collector, "consumer_high", design2, now)),
                      result(f"FIFO baseline, {label}", *latencies(collector, BASELINE_FUNCTION, base2, now))]
                low_done = sum(1 for s in collector.snapshot(phase2) if s.stage == "consumer_low")
                base_low_done = sum(1 for s in collector.snapshot(phase2)
                                    if s.stage == BASELINE_FUNCTION and s.priority == LOW)
                window = now - phase2
        finally:
            baseline.close()
        info = {"setup": setup, "backlog_seconds": backlog_seconds, "low_done": low_done,
                "base_low_done": base_low_done, "plans": plans, "window": window,
                "cold": [cold1, cold2], "peaks": [peaks1, peaks2],
                "limits": {r: s.max_instances for r, s in scales.items()},
                "scaled": not args.fixed, "raw": [raw1, raw2]}
    return r1 + r2, info


def report(results: list[Result], info: dict, args: argparse.Namespace) -> tuple[str, bool]:
    design0, all0, _, design, all2, base = results
    within = design.p99 <= 2 * design0.p99
    ratio = base.p99 / design.p99 if design.p99 > 0 else math.inf
    growth = design.p99 / design0.p99 if design0.p99 > 0 else math.inf
    better = ratio >= 10
    rows = [[r.label, r.count, r.missing, f"{r.p50:,.0f}", f"{r.p99:,.0f}"] for r in results]
    table = markdown_table(["high-priority messages", "count", "not processed in time", "p50 ms", "p99 ms"], rows)
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    limits = info["limits"]
    peak_low, peak_high = info["peaks"][1].get("consumer-low", 0), info["peaks"][1].get("consumer-high", 0)
    low_at_limit = peak_low == limits["consumer-low"]
    high_below = peak_high < limits["consumer-high"]
    cold_rows = [[phase, c.waited, f"{c.first_ms:,.0f}", c.catching_up, f"{c.caught_up_s:.1f}", f"{c.max_ms:,.0f}"]
                 for phase, c in zip(("no backlog", f"{args.backlog:,} backlog"), info["cold"], strict=True)]
    cold_table = markdown_table(["phase", "sent before the first was processed", "first message's latency ms",
                                 "sent before those were all processed", "caught up (s after the first send)",
                                 "worst of them ms"], cold_rows)
    peak_text = "; ".join(f"{phase}: " + ", ".join(f"{r} {n}/{limits.get(r, '?')}" for r, n in p.items())
                          for phase, p in zip(("phase 1", "phase 2"), info["peaks"], strict=True))
    scale_text = (f"Both phases start from zero instances under the scale controller (target-based scaling, cold "
                  f"start {args.cold_start:g} s); peak instances / limit: {peak_text}." if info["scaled"]
                  else "Fixed pools at the Bicep limits (`--fixed`), started before each phase's warm-up: nothing "
                  "starts from zero, so the first table shows only the stream's first message.")
    cold_text = ("""
The messages sent before consumer-high processed its first one of a phase waited for an instance from
zero, and the ones sent while the new instance worked through those queued behind them: both are the
cold start, set apart in the first table. The steady-state rows cover the messages sent after it (the
goals are on those); the all-messages rows keep the cold start in.""" if info["scaled"] else "")
    pools = (f"- consumer-low at its limit under the backlog ({peak_low}/{limits['consumer-low']}): "
             f"{verdict(low_at_limit)};\n  consumer-high below its own ({peak_high}/{limits['consumer-high']}): "
             f"{verdict(high_below)}" if info["scaled"] else "- fixed pools: the instance goals do not apply")
    note = ("- baseline high-priority messages still queued when the wait ended count with the time they had "
            "waited so far, so the baseline p99 is a lower bound" if base.missing else "")
    load = ", ".join(f"{x:.2f}" for x in args.load)
    load_after = ", ".join(f"{x:.2f}" for x in args.load_after)
    body = f"""`{command_line()}` on {machine()}, {today()} (`uptime` load average before the run: {load};
after: {load_after}).

Pools (instances x maxConcurrentCalls): {', '.join(f'{k} {v}' for k, v in info['plans'].items())}.
Consumer work {SETTINGS['CONSUMER_WORK_MS_HIGH']} ms (high) and {SETTINGS['CONSUMER_WORK_MS_LOW']} ms (low);
{args.rate:g} high-priority messages/s for {args.seconds:g} s per phase, starting {args.warmup:g} s after the
consumers (so receivers opening at start-up are not measured); a backlog of {args.backlog:,}
low-priority messages published to both between the phases, while no consumer ran
({info['backlog_seconds']:.1f} s), so both designs start phase 2 with all of it. Latency is `created_at` to
processed, as `consumer_high` (or the baseline) records it, so it includes the simulated work. In the
{info['window']:.0f} s of phase 2 the low pool processed {info['low_done']:,} low-priority messages and the
baseline {info['base_low_done']:,}. The baseline runs in its own devhost process with its own emulator,
at niceness {args.baseline_nice}: on this machine a pool that drains as fast as it can would otherwise take the
CPU from the design being measured. (A slower baseline drain does not change the comparison's shape:
its high-priority wait is the backlog ahead divided by its drain rate.)

{scale_text}{cold_text}

{cold_table}

{table}

{pools}
- steady-state high-priority p99 with the backlog / without: {design.p99:,.0f} / {design0.p99:,.0f} ms = {growth:.2f}x
  (goal <= 2x: {verdict(within)}); all messages, cold start included: {all2.p99:,.0f} / {all0.p99:,.0f} ms
- FIFO baseline p99 / priority design steady-state p99 under the backlog: {ratio:,.1f}x (goal >= 10x: {verdict(better)})
{note}
"""
    return body, within and better and ((low_at_limit and high_below) or not info["scaled"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=20_000, help="low-priority messages (default 20000)")
    parser.add_argument("--rate", type=float, default=10.0, help="high-priority messages/s (default 10)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each high stream (default 30)")
    parser.add_argument("--drain-wait", type=float, default=60.0,
                        help="seconds to wait for the baseline's high messages after the stream (default 60)")
    parser.add_argument("--instances", action="append", default=[], metavar="ROLE=N",
                        help="override a role's instance limit from infra/main.bicep")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds between starting the consumers and the stream (default 5)")
    parser.add_argument("--baseline-nice", type=int, default=19,
                        help="niceness of the baseline's process (default 19: it gets the CPU the design leaves)")
    parser.add_argument("--fixed", action="store_true",
                        help="fixed pools at the Bicep limits instead of the scale controller")
    parser.add_argument("--cold-start", type=float, default=DEFAULT_COLD_START,
                        help=f"seconds a new instance takes (default {DEFAULT_COLD_START:g})")
    parser.add_argument("--raw", metavar="PATH",
                        help="also write each high-priority message (sent, processed, latency) and scale event as JSON")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-instances", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--baseline-calls", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from devhost.cli import configure_logging

    configure_logging("WARNING")
    if args.baseline_worker:
        return baseline_worker(args.baseline_instances, args.baseline_calls)
    args.load = os.getloadavg()
    results, info = run(args)
    args.load_after = os.getloadavg()
    body, ok = report(results, info, args)
    print(body)
    if args.raw:
        Path(args.raw).write_text(json.dumps({"phases": info["raw"], "scaled": info["scaled"]}, indent=1))
    if not args.no_doc:
        write_section(FIXED_SECTION_KEY if args.fixed else SECTION_KEY, body)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
