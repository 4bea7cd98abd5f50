"""A Service Bus-sized backlog in a durable emulator: memory, restart time and drain rates.

Why: a durable emulator is used for what an in-memory one cannot do (soaks, replays, load tests that
build a backlog on purpose). Its memory must follow the work in flight, not the messages waiting, its
start-up must follow the index, not the data, and a drain must not slow down as it goes.

What it does (one queue, loopback only, every phase bounded): starts the emulator with a data
directory, sends ``--messages`` durable messages of ``--size`` bytes through the Python SDK in
``ServiceBusMessageBatch`` transfers (from ``--senders`` processes, 4 by default: one SDK client spends
about four times the emulator's CPU per message), reads the emulator's RSS, restarts it (SIGTERM, then the same data
directory) and times the restart to its ``ready`` line, reads RSS again, then drains the first half
peek-lock (receive + complete) and the second half receive-and-delete, timing the first and the last
10% of each drain, checks that every message id arrived exactly once, and reads RSS after the drain.
The SDK is the client on purpose: it is what users run; its own CPU is reported beside the
emulator's so the reader can see which side bounds the rates.

``python -m bench.large_backlog`` (1,000,000 messages: about 15 minutes on 2 cores);
``python -m bench.large_backlog --messages 20000`` for a quick run; ``--write`` puts the table into
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode, ServiceBusReceiver

from ._util import (
    Deadline,
    command_line,
    config_file,
    load_average,
    machine,
    markdown_table,
    process_cpu_seconds,
    process_rss_mb,
    queue_entry,
    send_in_batches,
    start_emulator,
    today,
    write_section,
)

QUEUE = "backlog"
COMMON_ARGS = ("--no-admin",)


def _config() -> dict:
    q = queue_entry(QUEUE)
    # A day's TTL: a slow machine's drain must not see messages expire.
    q["Properties"].update(DefaultMessageTimeToLive="P1D", LockDuration="PT5M")
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [q], "Topics": []}],
                           "Logging": {"Type": "File"}}}


def send_all(client: ServiceBusClient, count: int, size: int, deadline: Deadline, first: int = 0) -> None:
    """Send messages ``first`` .. ``first + count - 1`` (their message ids) in full batches."""
    body = b"x" * size
    with client.get_queue_sender(QUEUE) as sender:
        send_in_batches(sender, (ServiceBusMessage(body, message_id=str(i)) for i in range(first, first + count)),
                        deadline)


def _sender_process(connection_string: str, first: int, count: int, size: int, seconds: float,
                    failures: multiprocessing.Queue) -> None:
    """One of :func:`send_in_parallel`'s senders: its own process, client and connection."""
    try:
        with ServiceBusClient.from_connection_string(connection_string) as client:
            send_all(client, count, size, Deadline("send", seconds), first)
    except BaseException as exc:  # reported to the parent, which fails the run
        failures.put(f"sender of {first}..{first + count - 1}: {exc!r}")
        raise


def send_in_parallel(connection_string: str, count: int, size: int, senders: int, seconds: float) -> None:
    """Send ``count`` messages through ``senders`` SDK clients, each in its own process (one client's
    Python spends ~4x the emulator's CPU per message, so one sender bounds the rate at ~1,200 msg/s
    here); message ids are split in contiguous ranges, so the drain's exactly-once check is unchanged.
    Bounded: each sender checks its own deadline, and one still running after it is killed."""
    ctx = multiprocessing.get_context("spawn")  # no SDK state inherited from this process
    failures: multiprocessing.Queue = ctx.Queue()
    share = -(-count // senders)
    procs = []
    for first in range(0, count, share):
        proc = ctx.Process(target=_sender_process,
                           args=(connection_string, first, min(share, count - first), size, seconds, failures))
        proc.start()
        procs.append(proc)
    end = time.monotonic() + seconds + 30
    for proc in procs:
        proc.join(max(0.0, end - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(10)
    problems = []
    while not failures.empty():
        problems.append(failures.get_nowait())
    problems += [f"sender exited with {p.exitcode}" for p in procs if p.exitcode != 0 and not problems]
    if problems:
        raise RuntimeError("; ".join(problems))


def fill_through_broker(config: Path, data_dir: str, count: int, size: int, deadline: Deadline) -> None:
    """The same messages as :func:`send_all` (a data body, a message id), written by the broker itself over
    the emulator's own store, in this process, before the emulator starts: a million sends through the
    SDK take longer than the whole rest of the benchmark. Each batch goes through the gateway's own
    decoding (``incoming_messages``) and is committed as a transfer's batch would be."""
    from sbemulator.amqp.message import encode_message
    from sbemulator.amqp.performatives import Properties
    from sbemulator.broker import Broker
    from sbemulator.config import load_config
    from sbemulator.gateway.deliveries import incoming_messages
    from sbemulator.store import SqliteStore

    # One message decoded as the gateway decodes a transfer; the others differ only in their message id,
    # a fixed-width number written into the template's encoded properties section.
    placeholder = "#" * 7
    (template,) = incoming_messages(encode_message(properties=Properties(message_id=placeholder), data=b"x" * size), 0)
    raw = template.properties_raw
    broker = Broker(load_config(config), SqliteStore(Path(data_dir) / "sbemulator.db"))
    try:
        for start in range(0, count, 500):
            batch = []
            for i in range(start, min(count, start + 500)):
                mid = f"{i:07d}"
                batch.append(replace(template, message_id=mid, properties_raw=raw.replace(placeholder.encode(),
                                                                                           mid.encode())))
            broker.send(QUEUE, batch)
            broker.commit()
            deadline.check(f"after {start} messages")
    finally:
        broker.close()


def drain(receiver: ServiceBusReceiver, count: int, seen: list[int], deadline: Deadline,
          *, peek_lock: bool, pid: int) -> dict[str, float]:
    """Receive ``count`` messages: the whole-drain rate and the rates of its first and last 10% (msg/s),
    and the emulator's CPU seconds per 10,000 messages in those tenths (``pid``'s), which a loaded
    machine moves far less than a rate: a tail that costs the emulator more per message shows there."""
    tenth = max(1, count // 10)
    received = 0
    start, cpu_start = time.perf_counter(), process_cpu_seconds(pid)
    first_done = last_start = None
    while received < count:
        wait = max(0.5, min(10.0, deadline.remaining()))
        messages = receiver.receive_messages(max_message_count=min(100, count - received), max_wait_time=wait)
        for message in messages:
            if peek_lock:
                receiver.complete_message(message)
            seen[int(str(message.message_id))] += 1
        received += len(messages)
        now = time.perf_counter()
        if first_done is None and received >= tenth:
            first_done = (now, received, process_cpu_seconds(pid))
        if last_start is None and received >= count - tenth:
            last_start = (now, received, process_cpu_seconds(pid))
        deadline.check(f"after {received}/{count} messages")
    end, cpu_end = time.perf_counter(), process_cpu_seconds(pid)
    assert first_done is not None and last_start is not None
    last_n = received - last_start[1]
    return {
        "rate": received / (end - start),
        "first": first_done[1] / max(1e-9, first_done[0] - start),
        "last": last_n / max(1e-9, end - last_start[0]) if last_n else 0.0,
        "first_cpu_10k": (first_done[2] - cpu_start) / first_done[1] * 10_000,
        "last_cpu_10k": (cpu_end - last_start[2]) / max(1, last_n) * 10_000,
    }


def run(count: int, size: int, phase_timeout: float, extra: tuple[str, ...], fill: str = "sdk",
        senders: int = 1) -> dict:
    result: dict = {"senders": senders}
    with tempfile.TemporaryDirectory(prefix="sbbench-data-") as data_dir, config_file(_config()) as config:
        args = ("--data-dir", data_dir, *COMMON_ARGS, *extra)
        if fill == "broker":
            t0 = time.perf_counter()
            fill_through_broker(config, data_dir, count, size, Deadline("fill", phase_timeout))
            result["send_rate"] = count / (time.perf_counter() - t0)
        else:
            emu = start_emulator(config, *args, timeout=60)
            try:
                result["rss_idle"] = process_rss_mb(emu.pid)
                t0, cpu0 = time.perf_counter(), process_cpu_seconds(emu.pid)
                if senders > 1:
                    send_in_parallel(emu.connection_string, count, size, senders, phase_timeout)
                else:
                    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
                        send_all(client, count, size, Deadline("send", phase_timeout))
                result["send_rate"] = count / (time.perf_counter() - t0)
                result["send_cpu_10k"] = (process_cpu_seconds(emu.pid) - cpu0) / count * 10_000
                time.sleep(1)
                result["rss_sent"] = process_rss_mb(emu.pid)
            finally:
                emu.terminate(timeout=120)
        emu = start_emulator(config, *args, timeout=120)
        try:
            result["restart_measured"] = emu.measured_startup
            result["restart_reported"] = emu.startup_seconds
            result["rss_restarted"] = process_rss_mb(emu.pid)
            seen = [0] * count
            half = count // 2
            with ServiceBusClient.from_connection_string(emu.connection_string) as client:
                # Peek-lock first: the messages its prefetch holds go back when it closes; a
                # receive-and-delete receiver's prefetched messages would be gone.
                for mode, n, peek_lock in (("peek", half, True), ("rad", count - half, False)):
                    receive_mode = (ServiceBusReceiveMode.PEEK_LOCK if peek_lock
                                    else ServiceBusReceiveMode.RECEIVE_AND_DELETE)
                    with client.get_queue_receiver(QUEUE, receive_mode=receive_mode, prefetch_count=100) as r:
                        cpu0 = process_cpu_seconds(emu.pid)
                        rates = drain(r, n, seen, Deadline(mode, phase_timeout), peek_lock=peek_lock, pid=emu.pid)
                        result[f"{mode}_cpu_10k"] = (process_cpu_seconds(emu.pid) - cpu0) / n * 10_000
                    result.update({f"{mode}_{name}": value for name, value in rates.items()})
                with client.get_queue_receiver(QUEUE, max_wait_time=2) as r:
                    result["left_over"] = len(r.receive_messages(max_message_count=10, max_wait_time=2))
            result["missing"] = sum(1 for c in seen if c == 0)
            result["duplicates"] = sum(1 for c in seen if c > 1)
            time.sleep(2)
            result["rss_drained"] = process_rss_mb(emu.pid)
        finally:
            emu.terminate(timeout=120)
    return result


def _drain_cell(r: dict, mode: str) -> str:
    return (f"{r[f'{mode}_rate']:,.0f} msg/s; first 10% {r[f'{mode}_first']:,.0f}, last 10% {r[f'{mode}_last']:,.0f} "
            f"({r[f'{mode}_last'] / r[f'{mode}_first']:.2f}x); emulator CPU s per 10k: first 10% "
            f"{r[f'{mode}_first_cpu_10k']:.2f}, last 10% {r[f'{mode}_last_cpu_10k']:.2f}")


def report(count: int, size: int, r: dict, fill: str = "sdk") -> str:
    if fill == "broker":
        rows = [["fill (the broker's own API over the store, in the benchmark's process)",
                 f"{r['send_rate']:,.0f} msg/s"]]
    else:
        rows = [
            ["RSS idle (before the sends)", f"{r['rss_idle']:.0f} MiB"],
            [f"send rate (SDK batches, {r['senders']} sender process{'es' if r['senders'] > 1 else ''})",
             f"{r['send_rate']:,.0f} msg/s ({r['send_cpu_10k']:.2f} emulator CPU s per 10k)"],
            ["RSS after the sends", f"{r['rss_sent']:.0f} MiB"],
        ]
    rows += [
        ["start-up to `ready` on the filled store (measured / reported)",
         f"{r['restart_measured']:.2f} s / {r['restart_reported']:.2f} s"],
        ["RSS after the restart", f"{r['rss_restarted']:.0f} MiB"],
        ["receive-and-delete drain (second half)", _drain_cell(r, "rad")],
        ["peek-lock drain (first half)", _drain_cell(r, "peek")],
        ["exactly once", f"{r['missing']} missing, {r['duplicates']} duplicated, {r['left_over']} left over"],
        ["RSS after the drain", f"{r['rss_drained']:.0f} MiB"],
    ]
    return (
        f"{count:,} durable messages of {size} bytes in one queue, "
        + ("written by the broker's own API, " if fill == "broker" else "sent through the Python SDK, ")
        + "drained through the Python SDK.\n"
        f"Command: `{command_line()}`; {machine()}; load average {load_average()}; {today()}.\n\n"
        + markdown_table(["phase", "result"], rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=500)
    parser.add_argument("--phase-timeout", type=float, default=1800.0, help="seconds allowed per phase")
    parser.add_argument("--emulator-arg", action="append", default=[],
                        help="an extra emulator command-line argument (repeatable)")
    parser.add_argument("--fill", choices=("sdk", "broker"), default="sdk",
                        help="send through the Python SDK, or write the backlog with the broker's own API before the "
                             "emulator starts (minutes instead of tens of minutes for a million)")
    parser.add_argument("--senders", type=int, default=4,
                        help="SDK sender processes of --fill sdk (each its own client and connection; 1: in this "
                             "process)")
    parser.add_argument("--write", action="store_true", help="write the result into docs/benchmarks.md")
    args = parser.parse_args(argv)
    result = run(args.messages, args.size, args.phase_timeout, tuple(args.emulator_arg), args.fill,
                 max(1, args.senders))
    text = report(args.messages, args.size, result, args.fill)
    print(text)
    if args.write:
        write_section(f"large-backlog-{args.fill}", text)
    return 0 if result["missing"] == 0 and result["duplicates"] == 0 and result["left_over"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
