"""The longest single hold of the event loop by a purge of 100,000 messages, in memory and durable.

Why: a purge drops every message of an entity (its objects, its locks, its stored rows). Done in one call it
held the event loop for 90-170 ms (issue #19, the canary's purge phase); broker/purge.py takes the messages
out at once and drops them a slice at a time, committing after each, with the event loop free between
slices. What counts is the longest single piece of that work, in thread CPU time, which the machine's load
does not lengthen (wall time would).

What it does, in this process (no sockets): a broker over the in-memory store, or over SQLite in a temporary
folder (``--durable``, the read-ahead window as the emulator's default, so most messages are paged out), gets
``--messages`` messages shaped like the Python SDK's (a message id, application properties, 100 B of body,
a TTL), half of them taken peek-locked by a receiver that then closes (the locks stay, as after the SDK's
prefetch). Then the purge: ``--mode one-call`` is ``broker.purge`` and one commit (what a purge was before
the slices; runs on older checkouts too), ``--mode sliced`` is ``begin_purge`` then ``step()`` + commit per
slice. Each piece is timed with the collector off, then the broker's budgeted ticks (``tick(0.01)``, the
timer task) until they have dropped the purge's stale expiry entries, and again once the takes' lock timers
are due (the broker's clock moved 5 minutes on): a take's timer holds the messages it locked.

``python -m bench.purge_hold [--durable] [--mode one-call|sliced] [--messages N]``
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sbemulator.broker import Broker, ReceiveMode
from sbemulator.config import parse_config
from sbemulator.model import IncomingMessage
from sbemulator.scheduling import Budget
from sbemulator.store import MemoryStore, SqliteStore

from ._util import load_average, machine, today

BATCH = 1000


def _config() -> object:
    props = {"LockDuration": "PT5M", "DefaultMessageTimeToLive": "PT1H", "MaxDeliveryCount": 100}
    return parse_config({"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": "q", "Properties": props}], "Topics": []}]}})


class _Quiet:
    def __call__(self) -> None:
        return None


def _message(n: int) -> IncomingMessage:
    body = b"b" * 100
    return IncomingMessage(properties_raw=b"\x00Sp" + str(n).encode(), body_raw=body, size=len(body) + 40,
                           message_id=f"m-{n}", application_properties={"n": n, "kind": "bench"},
                           annotations={"x-opt-bench": n})


def fill_and_lock_half(broker: Broker, n: int) -> Any:
    """``n`` messages sent to ``q`` in batches, then half of them taken peek-locked by one receiver, which
    is returned (its deliveries are not kept: only the broker holds the messages)."""
    for first in range(0, n, BATCH):
        broker.send("q", [_message(i) for i in range(first, first + BATCH)])
        broker.commit()
    receiver = broker.open_receiver("q", ReceiveMode.PEEK_LOCK, _Quiet())
    taken = 0
    while taken < n // 2:
        got = receiver.take(min(BATCH, n // 2 - taken))
        if not got:
            raise RuntimeError(f"took {taken} of {n // 2}")
        taken += len(got)
    broker.commit()
    return receiver


def _ms(start: float) -> float:
    return (time.thread_time() - start) * 1000


def measure(durable: bool, mode: str, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sbbench-purge-") as tmp:
        store = SqliteStore(Path(tmp) / "sbemulator.db") if durable else MemoryStore()
        offset = [0.0]  # the broker's clock, moved past the locks' end after the purge

        def clock() -> float:
            return time.time() + offset[0]

        broker = Broker(_config(), store, clock=clock)  # type: ignore[arg-type]
        receiver = fill_and_lock_half(broker, n)
        receiver.close()
        gc.collect()
        gc.disable()
        pieces: list[float] = []
        if mode == "one-call":
            start = time.thread_time()
            removed = broker.purge("q")
            broker.commit()
            pieces.append(_ms(start))
        else:
            start = time.thread_time()
            job = broker.begin_purge("q")
            pieces.append(_ms(start))
            done = False
            while not done:
                start = time.thread_time()
                done = job.step(Budget(0.0))
                broker.commit()
                pieces.append(_ms(start))
            removed = job.removed
        ticks: list[float] = []
        for moved in (0.0, 301.0):  # the stale expiry entries; then the takes' lock timers (5 min) are due
            offset[0] = moved
            more = True
            while more and len(ticks) < 10_000:
                start = time.thread_time()
                more = broker.tick(Budget(0.01, commit_wanted=broker.store.commit_wanted))
                ticks.append(_ms(start))
        gc.enable()
        left = broker.counts("q")
        broker.close()
    return {"removed": removed, "pieces": pieces, "ticks": ticks, "left": left}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--durable", action="store_true")
    parser.add_argument("--mode", choices=("one-call", "sliced"), default="sliced")
    args = parser.parse_args(argv)
    result = measure(args.durable, args.mode, args.messages)
    pieces, ticks = result["pieces"], result["ticks"]
    store = "durable (SQLite)" if args.durable else "in memory"
    print(f"Command: `python -m bench.purge_hold --mode {args.mode} --messages {args.messages}"
          f"{' --durable' if args.durable else ''}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}; Python {sys.version.split()[0]}\n")
    print(f"purge of {result['removed']:,} messages ({args.messages // 2:,} locked), {store}, {args.mode}: "
          f"{len(pieces)} piece(s), longest {max(pieces):.1f} ms CPU, {sum(pieces):.0f} ms in all; then "
          f"{len(ticks)} timer ticks, longest {max(ticks, default=0.0):.1f} ms; counts after {result['left']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
