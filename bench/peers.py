"""sbemulator beside RabbitMQ, ActiveMQ Classic and ActiveMQ Artemis at equal promises, one neutral client.

Every broker is driven by the same AMQP 1.0 client (python-qpid-proton, the Qpid project's binding of
the Proton C engine; ``pip install python-qpid-proton``) on loopback, in the same run, each from a fresh
start in a fresh data directory (medians of ``--runs`` starts). Per start: start-up (from launching the
process to its port answering the AMQP header), idle RSS, then four phases of ``--messages`` messages
of ``--size`` bytes on one queue: a durable send (each message unsettled, the next sent as credit
allows, the phase ends at the last ``accepted``), a receive with ``accepted`` per message (credit
``--credit``), a second durable send, and a pre-settled receive (at-most-once). For each phase: messages
per second, and the broker's and the client's CPU per 10,000 messages (the broker's is every process in
its session, from ``/proc``).

Rows are paired by promise: "durable" rows sync before they confirm (sbemulator with its sync flag,
``--sbemulator-full``, by default ``--durability full`` when the CLI has it); "no-fsync" rows do not
(sbemulator's default ``process`` mode). bench/peer_brokers.py says how each broker is configured.
The disk's own ``fsync`` rate, measured in the data directory, is printed with the table.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._util import REPO_ROOT, command_line, load_average, machine, markdown_table, prose, today, write_section
from .peer_brokers import CACHE, Broker, Running, address, brokers, fsync_rate, session_cpu_seconds, session_rss_mib

PHASES = ("send", "receive+accept", "send", "receive pre-settled")
PHASE_TIMEOUT_S = 300.0


@dataclass
class PhaseResult:
    seconds: float
    broker_cpu: float
    client_cpu: float


class _Meter:
    """The phase's clock: wall time, this process's CPU and the broker's, read at its start and end."""

    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.start: tuple[float, float, float] | None = None
        self.result: PhaseResult | None = None

    def begin(self) -> None:
        broker = session_cpu_seconds(self.sid)
        self.start = (time.perf_counter(), time.process_time(), broker)

    def end(self) -> None:
        assert self.start is not None
        wall, client = time.perf_counter(), time.process_time()
        broker = session_cpu_seconds(self.sid)
        self.result = PhaseResult(wall - self.start[0], broker - self.start[2], client - self.start[1])


def run_phase(broker: Broker, running: Running, kind: str, count: int, size: int, credit: int) -> PhaseResult:
    """One phase through proton's reactor; raises if it does not finish within PHASE_TIMEOUT_S."""
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import AtMostOnce, Container

    meter = _Meter(running.sid)
    url = f"amqp://127.0.0.1:{running.port}"
    body = b"x" * size

    class Phase(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=credit if kind != "send" else 0, auto_accept=True)
            self.done = 0
            self.sent = 0
            self.error: str | None = None
            self.conn: Any = None
            self.timer: Any = None

        def on_start(self, event: Any) -> None:
            self.conn = event.container.connect(url, user=broker.user, password=broker.password,
                                                allowed_mechs="PLAIN", allow_insecure_mechs=True)
            if kind == "send":
                event.container.create_sender(self.conn, address(broker))
            else:
                options = AtMostOnce() if kind == "presettled" else None
                event.container.create_receiver(self.conn, address(broker), options=options)
            self.timer = event.container.schedule(PHASE_TIMEOUT_S, self)

        def on_timer_task(self, event: Any) -> None:
            self.error = f"timed out after {self.done} of {count}"
            self.conn.close()

        def on_link_opened(self, event: Any) -> None:
            if meter.start is None:
                meter.begin()

        def on_sendable(self, event: Any) -> None:
            sender = event.sender
            while sender.credit and self.sent < count:
                sender.send(Message(body=body, durable=True))
                self.sent += 1

        def on_accepted(self, event: Any) -> None:
            self.done += 1
            if self.done == count:
                self.finish()

        def on_rejected(self, event: Any) -> None:
            self.error = f"rejected: {event.delivery.remote.condition}"
            self.conn.close()

        def on_message(self, event: Any) -> None:
            self.done += 1
            if self.done == count:
                self.finish()

        def finish(self) -> None:
            meter.end()
            self.timer.cancel()
            self.conn.close()

        def on_transport_error(self, event: Any) -> None:
            self.error = self.error or f"transport error: {event.transport.condition}"

    handler = Phase()
    Container(handler).run()
    if handler.error or meter.result is None:
        raise RuntimeError(f"{broker.name} {kind}: {handler.error or 'ended early'} ({handler.done}/{count})")
    return meter.result


@dataclass
class StartResult:
    startup_s: float
    rss_mib: float
    phases: list[PhaseResult]


def one_start(broker: Broker, messages: int, size: int, credit: int, root: Path) -> StartResult:
    with tempfile.TemporaryDirectory(prefix="run-", dir=root) as tmp:
        running = broker.start(Path(tmp))
        try:
            time.sleep(1.0)
            rss = session_rss_mib(running.sid)
            phases = [run_phase(broker, running, kind, messages, size, credit)
                      for kind in ("send", "accept", "send", "presettled")]
        finally:
            running.stop()
    return StartResult(running.startup_s, rss, phases)


def median_row(results: list[StartResult], messages: int) -> dict[str, float]:
    row = {"startup": statistics.median(r.startup_s for r in results),
           "rss": statistics.median(r.rss_mib for r in results)}
    for index, name in enumerate(("send", "accept", "send2", "presettled")):
        row[f"{name}_rate"] = statistics.median(messages / r.phases[index].seconds for r in results)
        row[f"{name}_broker"] = statistics.median(r.phases[index].broker_cpu * 10_000 / messages for r in results)
        row[f"{name}_client"] = statistics.median(r.phases[index].client_cpu * 10_000 / messages for r in results)
    return row


def default_full_flag() -> tuple[str, ...] | None:
    """``--durability full`` when this tree's CLI offers it, else None (no sbemulator durable row)."""
    helptext = subprocess.run([sys.executable, "-m", "sbemulator", "--help"], capture_output=True, text=True,
                              timeout=60, cwd=REPO_ROOT).stdout
    return ("--durability", "full") if "--durability" in helptext else None


def report(rows: list[tuple[Broker, str, dict[str, float]]], args: argparse.Namespace,
           fsyncs: tuple[float, float], load_before: str, load_after: str) -> str:
    def label(broker: Broker, version: str) -> str:
        return f"{broker.name} {version}"

    speed = markdown_table(
        ["promise", "broker", "sync setting", "send msg/s", "receive+accept msg/s", "pre-settled msg/s",
         "start-up s", "idle RSS MiB"],
        [[b.mode, label(b, v), b.setting, r["send_rate"], r["accept_rate"], r["presettled_rate"], r["startup"],
          r["rss"]] for b, v, r in rows])
    cpu = markdown_table(
        ["promise", "broker", "broker CPU send", "broker CPU accept", "broker CPU pre-settled",
         "client CPU send", "client CPU accept", "client CPU pre-settled"],
        [[b.mode, label(b, v), r["send_broker"], r["accept_broker"], r["presettled_broker"], r["send_client"],
          r["accept_client"], r["presettled_client"]] for b, v, r in rows])
    return (
        prose(f"{args.messages:,} messages of {args.size} bytes per phase, credit {args.credit}, one "
        f"python-qpid-proton client on loopback, median of {args.runs} fresh starts per row, "
        "every row in the same run. "
        "\"durable\" rows sync the journal before they confirm a send; \"no-fsync\" rows do not. The "
        "second send phase (not shown) refills the queue for the pre-settled receive. CPU is seconds per "
        "10,000 messages (the broker's is every process of its session).")
        + f"\n\n{speed}\n\n{cpu}\n\n"
        f"Disk: {fsyncs[0]:,.0f} fsyncs/s before, {fsyncs[1]:,.0f} after (4 KiB write + fsync for a second,\n"
        "in the brokers' data directory; the disk is shared, so its rate moves).  \n"
        f"Command:  \n`{command_line()}`  \nMachine: {machine()}  \n"
        f"Load average (1, 5, 15 min): {load_before} before, {load_after} after (the machine was shared)  \n"
        f"Date: {today()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--credit", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", action="append", default=[],
                        help="run only rows whose broker name contains this (repeatable)")
    parser.add_argument("--sbemulator-full", default=None,
                        help="sbemulator's sync-before-confirm flags (default: '--durability full' when offered)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    full = tuple(shlex.split(args.sbemulator_full)) if args.sbemulator_full is not None else default_full_flag()
    selected = [b for b in brokers(full) if not args.only or any(o.lower() in b.name.lower() for o in args.only)]
    for broker in selected:
        broker.prepare()
    CACHE.mkdir(parents=True, exist_ok=True)
    load_before = load_average()
    fsyncs = fsync_rate(CACHE)
    print(f"[peers] disk {fsyncs:,.0f} fsyncs/s; {len(selected)} rows x {args.runs} starts", flush=True)
    results: dict[int, list[StartResult]] = {i: [] for i in range(len(selected))}
    # Interleave the rows (row 1 start 1, row 2 start 1, ...) so the machine's load falls on all alike.
    for run in range(args.runs):
        for index, broker in enumerate(selected):
            result = one_start(broker, args.messages, args.size, args.credit, CACHE)
            results[index].append(result)
            print(f"[peers] run {run + 1} {broker.name} {broker.mode}: start {result.startup_s:.2f}s "
                  + " ".join(f"{PHASES[i]} {args.messages / p.seconds:,.0f}/s" for i, p in enumerate(result.phases)),
                  flush=True)
    rows = [(b, b.version(), median_row(results[i], args.messages)) for i, b in enumerate(selected)]
    text = report(rows, args, (fsyncs, fsync_rate(CACHE)), load_before, load_average())
    print(text)
    if not args.no_doc:
        write_section("peers", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
