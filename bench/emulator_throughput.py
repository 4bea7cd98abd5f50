"""Queue throughput through the real SDK against an emulator process, in memory and durable.

Three paths, each with N messages of S bytes: batch send (``ServiceBusMessageBatch``), peek-lock
receive + complete (prefetch 100, ``receive_messages(max_message_count=100)``) and receive-and-delete.
For every path it reports msg/s and the CPU seconds per 10k messages spent by the emulator process
and by the SDK client (this process, SDK threads included), because the emulator's job is to cost
less than the client it serves: a test suite should be bound by the SDK, not by the emulator.

Goals: the emulator spends less CPU per message than the client on every path, at most half of it
on the two receive paths (peek-lock + complete, receive-and-delete), and durable mode (SQLite WAL,
group commit) keeps at least 1/1.5 of the in-memory throughput. CPU-time ratios measured in the same
run are the figures to compare: the machine may be shared, and load inflates both sides' CPU per
message, so the load average is reported with the results.

Each mode runs once per event loop: the standard asyncio loop, and uvloop (an optional package the
emulator uses with ``--loop uvloop``) when it is installed, so the two can be compared side by side.

Settlement is done with the sync SDK, one ``complete_message`` after another on the receiving
thread: measured here, that settles ~1,500-1,800 msg/s, while the async SDK with ``asyncio.gather``
over a batch of 100 completes managed ~420 msg/s (its settlements queue behind one another on the
connection), and the sync receiver is not safe to share between threads.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
)

from ._util import (
    REPO_ROOT,
    Deadline,
    Sample,
    command_line,
    config_file,
    emulator,
    fsync_rate,
    load_average,
    machine,
    markdown_table,
    measure,
    prose,
    send_in_batches,
    today,
    topology,
    write_section,
)

QUEUE = "bench"
# durable modes get --data-dir at run time; durable-full fsyncs before it confirms (docs/emulator.md, Durability)
MODES = {"in-memory": ("--in-memory",), "durable": (), "durable-full": ("--durability", "full")}
BEFORE = " (before)"  # a mode run from the --baseline source tree
COMMON_ARGS = ("--no-admin",)  # only the AMQP path is measured
RECEIVE_PATHS = ("peek-lock receive + complete", "receive-and-delete")
RECEIVE_GOAL = 0.5  # emulator CPU per message at most this share of the client's on the receive paths


@dataclass
class PathResult:
    mode: str
    loop: str
    path: str
    messages: int
    sample: Sample

    @property
    def rate(self) -> float:
        return self.messages / self.sample.wall

    @property
    def emulator_cpu_per_10k(self) -> float:
        return self.sample.emulator_cpu / self.messages * 10_000

    @property
    def client_cpu_per_10k(self) -> float:
        return self.sample.client_cpu / self.messages * 10_000

    @property
    def cpu_ratio(self) -> float:
        return self.sample.emulator_cpu / self.sample.client_cpu


def send_batches(sender: ServiceBusSender, count: int, size: int, tag: str, deadline: Deadline) -> int:
    """Send ``count`` messages in as few ``ServiceBusMessageBatch`` transfers as fit; return batches."""
    body = b"x" * size
    return send_in_batches(sender, (ServiceBusMessage(body, message_id=f"{tag}-{i}") for i in range(count)), deadline)


def receive_all(receiver: ServiceBusReceiver, count: int, deadline: Deadline, *, peek_lock: bool) -> int:
    """Receive ``count`` messages (completing each one when ``peek_lock``); return distinct ids seen."""
    seen: set[str] = set()
    received = 0
    while received < count:
        wait = max(0.5, min(5.0, deadline.remaining()))
        messages = receiver.receive_messages(max_message_count=100, max_wait_time=wait)
        for message in messages:
            if peek_lock:
                receiver.complete_message(message)
            seen.add(str(message.message_id))
        received += len(messages)
        deadline.check(f"after {received}/{count} messages")
    return len(seen)


def open_receiver(client: ServiceBusClient, mode: ServiceBusReceiveMode) -> ServiceBusReceiver:
    """An attached receiver: the sync SDK spends ~0.5 s attaching (and as long closing) a link, mostly
    in its own polling sleeps, so links are opened and closed outside the measured phases."""
    receiver = client.get_queue_receiver(QUEUE, receive_mode=mode, prefetch_count=100)
    receiver.__enter__()
    return receiver


def run_mode(mode: str, loop: str, count: int, size: int, phase_timeout: float,
             baseline: Path | None = None) -> list[PathResult]:
    """A fresh emulator process for ``mode`` on ``loop``; send, receive+complete, send, receive-and-delete.
    ``baseline``: run the sbemulator of that source tree instead (its results' mode says "(before)")."""
    sends: list[Sample] = []
    peek: list[Sample] = []
    rad: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="sbbench-data-") as data_dir, \
            config_file(topology([QUEUE])) as config:
        args = MODES[mode] if mode == "in-memory" else (*MODES[mode], "--data-dir", data_dir)
        with emulator(config, *args, *COMMON_ARGS, "--loop", loop, cwd=baseline) as emu, \
                ServiceBusClient.from_connection_string(emu.connection_string) as client, \
                client.get_queue_sender(QUEUE) as sender:
            warm_up = Deadline("warm-up", phase_timeout)
            send_batches(sender, 200, size, "warm", warm_up)  # connection, token, code paths
            with open_receiver(client, ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
                receive_all(receiver, 200, warm_up, peek_lock=False)
            with measure(emu.pid, sends):
                send_batches(sender, count, size, "a", Deadline(f"{mode} send #1", phase_timeout))
            with open_receiver(client, ServiceBusReceiveMode.PEEK_LOCK) as receiver:
                with measure(emu.pid, peek):
                    distinct = receive_all(receiver, count, Deadline(f"{mode} peek-lock", phase_timeout),
                                           peek_lock=True)
            check_distinct(mode, "peek-lock", distinct, count)
            with measure(emu.pid, sends):
                send_batches(sender, count, size, "b", Deadline(f"{mode} send #2", phase_timeout))
            with open_receiver(client, ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
                with measure(emu.pid, rad):
                    distinct = receive_all(receiver, count,
                                           Deadline(f"{mode} receive-and-delete", phase_timeout),
                                           peek_lock=False)
            check_distinct(mode, "receive-and-delete", distinct, count)
    label = mode + (BEFORE if baseline is not None else "")
    return [
        PathResult(label, loop, "batch send", 2 * count, sends[0] + sends[1]),
        PathResult(label, loop, "peek-lock receive + complete", count, peek[0]),
        PathResult(label, loop, "receive-and-delete", count, rad[0]),
    ]


def available_loops() -> list[str]:
    """The standard loop always; uvloop when it can be imported (it is optional)."""
    return ["asyncio", "uvloop"] if importlib.util.find_spec("uvloop") is not None else ["asyncio"]


def check_distinct(mode: str, path: str, distinct: int, count: int) -> None:
    if distinct != count:
        raise RuntimeError(f"{mode} {path}: received {distinct} distinct messages, expected {count}")


def evaluate(results: list[PathResult]) -> list[tuple[str, bool, str]]:
    """Each goal with pass/fail and the numbers behind it."""
    goals = []
    for r in results:
        if r.path in RECEIVE_PATHS:
            goals.append((
                f"{r.mode} ({r.loop}) {r.path}: emulator CPU <= {RECEIVE_GOAL} x client CPU",
                r.cpu_ratio <= RECEIVE_GOAL,
                f"{r.emulator_cpu_per_10k:.2f} s vs {r.client_cpu_per_10k:.2f} s per 10k ({r.cpu_ratio:.2f})",
            ))
        else:
            goals.append((
                f"{r.mode} ({r.loop}) {r.path}: emulator CPU < client CPU",
                r.emulator_cpu_per_10k < r.client_cpu_per_10k,
                f"{r.emulator_cpu_per_10k:.2f} s vs {r.client_cpu_per_10k:.2f} s per 10k",
            ))
    by_key = {(r.mode, r.loop, r.path): r for r in results}
    for r in results:
        if r.mode.endswith(BEFORE) and (r.mode[:-len(BEFORE)], r.loop, r.path) in by_key:
            now = by_key[(r.mode[:-len(BEFORE)], r.loop, r.path)]
            # CPU per message, not msg/s: the client bounds the rate, and on a shared machine its wall time
            # swings with the load (the same code measured 3,905 and 10,700 msg/s receive-and-delete in one run)
            goals.append((f"{r.path} ({r.loop}): {now.mode} emulator CPU within 5% of before",
                          now.emulator_cpu_per_10k <= 1.05 * r.emulator_cpu_per_10k,
                          f"{now.emulator_cpu_per_10k:.3f} vs {r.emulator_cpu_per_10k:.3f} s per 10k before; "
                          f"{now.rate:,.0f} vs {r.rate:,.0f} msg/s"))
        if r.mode != "durable" or ("in-memory", r.loop, r.path) not in by_key:
            continue
        memory = by_key[("in-memory", r.loop, r.path)]
        ratio = memory.rate / r.rate
        goals.append((f"{r.path} ({r.loop}): durable within 1.5x of in-memory", ratio <= 1.5,
                      f"{r.rate:,.0f} vs {memory.rate:,.0f} msg/s ({ratio:.2f}x)"))
    return goals


def report(results: list[PathResult], count: int, size: int, loads: tuple[str, str],
           fsyncs: float | None = None) -> str:
    table = markdown_table(
        ["mode", "loop", "path", "msg/s", "emulator CPU s/10k", "client CPU s/10k", "emulator/client"],
        [[r.mode, r.loop, r.path, r.rate, r.emulator_cpu_per_10k, r.client_cpu_per_10k, f"{r.cpu_ratio:.2f}"]
         for r in results],
    )
    goals = markdown_table(["goal", "result", "numbers"],
                           [[g, "PASS" if ok else "FAIL", why] for g, ok, why in evaluate(results)])
    return (
        prose(f"{count:,} messages of {size} bytes per path through azure-servicebus (sync) against a fresh "
        "`python -m sbemulator` process per mode (`--in-memory`, then `--data-dir`); with `--repeat N`, N fresh "
        "starts per mode in turns, the median by msg/s reported. "
        f"Batch send counts two rounds ({2 * count:,} messages). Peek-lock uses prefetch 100 and "
        "`receive_messages(max_message_count=100)`, completing each message in turn on the receiving "
        "thread. Links are attached before and closed after each measured phase (the sync SDK spends "
        "about 1 s per link on that, mostly in its own polling sleeps). CPU is user+system time: the "
        "emulator's from `/proc/<pid>/stat`, the client's is the benchmark process (SDK threads "
        "included).\n\n"
        "Loop `asyncio` is the standard event loop (the default); `uvloop` is `--loop uvloop`, measured only "
        "when the optional uvloop package is installed. `durable` is `--durability process` (the default), "
        "`durable-full` is `--durability full` (fsynced before confirmed); a mode marked (before) ran the "
        "sbemulator of the `--baseline` source tree in the same run.")
        + f"\n\n{table}\n\n{goals}\n\n"
        f"Command:  \n`{command_line()}`  \nMachine: {machine()}  \n"
        + (f"Disk: {fsyncs:,.0f} fsyncs/s (4 KiB write + fsync, the data directory's file system)  \n"
           if fsyncs is not None else "")
        + f"Load average (1, 5, 15 min; `uptime`): {loads[0]} before, {loads[1]} after  \nDate: {today()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes per message")
    parser.add_argument("--modes", default="in-memory,durable",
                        help="comma-separated: in-memory,durable,durable-full")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="an earlier version (a git revision of this repository, or a source tree): its "
                             "sbemulator runs the --baseline-modes too, in the same run, reported as (before)")
    parser.add_argument("--baseline-modes", default="durable", help="comma-separated modes run from --baseline")
    parser.add_argument("--loops", default=",".join(available_loops()),
                        help="comma-separated: asyncio,uvloop (default: uvloop too when it is installed)")
    parser.add_argument("--phase-timeout", type=float, default=120.0, help="seconds before a phase fails")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh starts per mode (in turns: every mode once, then again); the median by msg/s is "
                             "reported")
    parser.add_argument("--section", default="emulator",
                        help="the docs/benchmarks.md section written (default emulator, the queue throughput table)")
    args = parser.parse_args(argv)
    with baseline_tree(args.baseline) as tree:
        args.baseline = tree
        return run(args)


@contextmanager
def baseline_tree(revision: str | None) -> Iterator[Path | None]:
    """The source tree of ``revision``: a directory as it is, else the git revision unpacked into a
    temporary directory (``git archive``) for the run."""
    if revision is None or Path(revision).is_dir():
        yield None if revision is None else Path(revision)
        return
    with tempfile.TemporaryDirectory(prefix="sbbench-baseline-") as tmp:
        archive = subprocess.run(["git", "archive", revision], cwd=REPO_ROOT, capture_output=True, check=True,
                                 timeout=60).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True, timeout=60)
        yield Path(tmp)


def run(args: argparse.Namespace) -> int:
    results: list[PathResult] = []
    load_before = load_average()
    modes = [mode.strip() for mode in args.modes.split(",")]
    before = [mode.strip() for mode in args.baseline_modes.split(",")] if args.baseline is not None else []
    runs: list[tuple[str, Path | None]] = []
    for mode in modes:  # each mode's before right after it, so that load drifts hit both alike
        runs += [(mode, None)] + ([(mode, args.baseline)] if mode in before else [])
    runs += [(mode, args.baseline) for mode in before if mode not in modes]
    samples: dict[tuple[str, str, str], list[PathResult]] = {}
    for _ in range(max(1, args.repeat)):
        for mode, source in runs:
            for loop in args.loops.split(","):
                print(f"[emulator_throughput] {mode}{BEFORE if source else ''} ({loop}): {args.messages:,} messages "
                      "...", flush=True)
                for r in run_mode(mode, loop.strip(), args.messages, args.size, args.phase_timeout, source):
                    samples.setdefault((r.mode, r.loop, r.path), []).append(r)
    for group in samples.values():
        results.append(sorted(group, key=lambda r: r.rate)[len(group) // 2])  # the median (of an odd count)
    fsyncs = None
    if any(mode != "in-memory" for mode, _ in runs):
        with tempfile.TemporaryDirectory(prefix="sbbench-data-") as probe:  # where the data directories live
            fsyncs = fsync_rate(probe)
    text = report(results, args.messages, args.size, (load_before, load_average()), fsyncs)
    print(text)
    if not args.no_doc:
        write_section(args.section, text)
    return 0 if all(ok for _, ok, _ in evaluate(results)) else 1


if __name__ == "__main__":
    sys.exit(main())
