"""The longest the event loop is held while 100,000 peek-locks lapse at once.

Why: every broker timer runs on the event loop. When a receiver holds 100,000 locks taken within one
lock duration, they lapse together, and a tick that returns them all in one call keeps every other
connection waiting for the whole batch (a canary's round trip would take as long). The runtime ticks
with a budget (``Slices.slice_s``, sbemulator/scheduling/) and yields between slices, so the worst wait
is one slice plus one timer.

What it does, in process and without sockets (so the figure is the stall itself, not the noise of a
round trip): a broker on its own store (``--durable``: SQLite in a temporary directory; default in
memory) with one queue, ``--messages`` messages taken by one peek-lock receiver in takes of 128 (one
lapse timer per take, as the gateway's pump makes them), the broker's clock moved past the lock
duration, then the ticks that return the messages are timed (wall and CPU time), once without a
budget (the whole batch in one call, as before slicing) and once with the runtime's budget on a
fresh broker. Reports the longest
call and the number of calls. ``python -m bench.lock_expiry_stall``.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from sbemulator.broker import Broker, IncomingMessage, ReceiveMode
from sbemulator.config import parse_config
from sbemulator.scheduling import DEFAULT_SLICES, Budget
from sbemulator.store import SqliteStore

TAKE = 128


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _broker(messages: int, data_dir: Path | None) -> tuple[Broker, _Clock]:
    config = parse_config({"UserConfig": {"Namespaces": [{
        "Name": "ns", "Queues": [{"Name": "q", "Properties": {"LockDuration": "PT30S", "MaxDeliveryCount": 100}}],
        "Topics": []}], "Logging": {"Type": "Console"}}}, "bench")
    clock = _Clock()
    store = SqliteStore(data_dir / "store.db" if data_dir is not None else None)
    broker = Broker(config, store, clock=clock)
    for start in range(0, messages, 1000):
        broker.send("q", [IncomingMessage(body_raw=b"x" * 200, size=210) for _ in range(min(1000, messages - start))])
        store.commit()
    receiver = broker.open_receiver("q", ReceiveMode.PEEK_LOCK, lambda: None)
    taken = 0
    while taken < messages:
        got = receiver.take(TAKE)
        if not got:
            raise RuntimeError(f"took {taken} of {messages}")
        taken += len(got)
    store.commit()
    clock.now += 31  # past the 30 s lock: every lock is due
    return broker, clock


def _measure(broker: Broker, budget_s: float | None) -> tuple[float, float, int]:
    """The longest call in wall time and in CPU time (on a loaded machine the wall time also holds the
    moments the process was not scheduled, which no code of ours can shorten), and the calls."""
    worst_wall, worst_cpu, calls, more = 0.0, 0.0, 0, True
    while more:
        wall, cpu = time.perf_counter(), time.process_time()
        more = broker.tick(None if budget_s is None else Budget(budget_s, commit_wanted=broker.store.commit_wanted))
        worst_cpu = max(worst_cpu, time.process_time() - cpu)
        worst_wall = max(worst_wall, time.perf_counter() - wall)
        calls += 1
    return worst_wall, worst_cpu, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--durable", action="store_true", help="SQLite store in a temporary directory")
    parser.add_argument("--no-gc", action="store_true",
                        help="collect, then disable the cyclic garbage collector while timing (to tell its "
                             "full collections, which scan every live message, from the ticks' own work)")
    args = parser.parse_args()
    rows = []
    sliced = f"slices of {DEFAULT_SLICES.slice_s * 1000:.0f} ms"
    for label, budget in (("one call (no budget)", None), (sliced, DEFAULT_SLICES.slice_s)):
        with tempfile.TemporaryDirectory() as tmp:
            broker, _clock = _broker(args.messages, Path(tmp) if args.durable else None)
            if args.no_gc:
                gc.collect()
                gc.disable()
            try:
                wall, cpu, calls = _measure(broker, budget)
            finally:
                gc.enable()
            again = broker.open_receiver("q", ReceiveMode.PEEK_LOCK, lambda: None).take(args.messages)
            if len(again) != args.messages:
                raise RuntimeError(f"{len(again)} of {args.messages} messages available after the lapse")
            rows.append((label, wall * 1000, cpu * 1000, calls))
    mode = ("durable" if args.durable else "in-memory") + (", cyclic GC off" if args.no_gc else "")
    print(f"{args.messages:,} peek-locks lapsing at once ({mode}, takes of {TAKE}):\n")
    print("| tick | longest call, wall | longest call, CPU | calls |")
    print("|---|---|---|---|")
    for label, wall_ms, cpu_ms, calls in rows:
        print(f"| {label} | {wall_ms:.1f} ms | {cpu_ms:.1f} ms | {calls:,} |")


if __name__ == "__main__":
    main()
