"""What the cyclic garbage collector has to visit per message, and what purging and closing cost.

Why: a full collection visits every object the collector tracks, so the objects a stored or locked
message adds decide how long one holds the event loop (runtime/collector.py); a purge and a session
receiver's close return or drop every message of an entity. These counts do not move with the
machine's load (the CPU times do, a little: thread time, not wall time).

What it does, in this process, on a broker over the in-memory store (no sockets): sends ``--messages``
messages of 100 B into a queue with a TTL (each message has an expiry), counts ``gc.get_objects()``
before and after (a full collection first, so what is untracked is untracked), times one full
collection, takes them all peek-locked and counts again; then purges the queue, and fills a session
queue, takes it with one session receiver and closes it, timing the call and each budgeted tick
(``Broker.tick(0.01)``, what the server's timer task runs) that returns the locks, with the automatic
collections off (their pauses are the first table's). Last, on a durable store in a temporary folder,
``--messages`` completions one commit each (the SDK's path: each goes to the delivery journal), timing
every fold of the journal into SQLite that they cause.

``python -m bench.collector_load``
"""

from __future__ import annotations

import argparse
import collections
import gc
import sys
import tempfile
import time
from pathlib import Path

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
        {"Name": "q", "Properties": props},
        {"Name": "sq", "Properties": {**props, "RequiresSession": True}}], "Topics": []}]}})


class _Quiet:
    def __call__(self) -> None:
        return None


def _message(session_id: str | None = None) -> IncomingMessage:
    body = b"b" * 100
    return IncomingMessage(body_raw=body, size=len(body), session_id=session_id)


def _census() -> collections.Counter[str]:
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


def _full_collection_ms() -> float:
    start = time.thread_time()
    gc.collect()
    return (time.thread_time() - start) * 1000


def _take_all(broker: Broker, path: str, count: int, **kw: object) -> list:
    receiver = broker.open_receiver(path, ReceiveMode.PEEK_LOCK, _Quiet(), **kw)  # type: ignore[arg-type]
    got: list = []
    while len(got) < count:
        batch = receiver.take(BATCH)
        if not batch:
            raise RuntimeError(f"took {len(got)} of {count}")
        got.extend(batch)
    broker.commit()
    return [receiver, got]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args(argv)
    n = args.messages
    broker = Broker(_config(), MemoryStore(), clock=time.time)  # type: ignore[arg-type]
    before = _census()
    for _ in range(0, n, BATCH):
        broker.send("q", [_message() for _ in range(BATCH)])
    broker.commit()
    stored = _census()
    stored_gc = _full_collection_ms()
    receiver, deliveries = _take_all(broker, "q", n)
    del deliveries  # the gateway keeps its own record of a delivery; the broker's state is what counts here
    locked = _census()
    locked_gc = _full_collection_ms()

    gc.disable()  # the collector's own pauses are the table's; the calls below are timed without them
    start = time.thread_time()
    purged = broker.purge("q")
    purge_ms = (time.thread_time() - start) * 1000
    receiver.close()

    for _ in range(0, n, BATCH):
        broker.send("sq", [_message("s") for _ in range(BATCH)])
    broker.commit()
    session, deliveries = _take_all(broker, "sq", n, session_id="s")
    del deliveries
    start = time.thread_time()
    session.close()
    close_ms = (time.thread_time() - start) * 1000
    slices: list[float] = []
    more = True
    while more:
        start = time.thread_time()
        more = broker.tick(Budget(0.01, commit_wanted=broker.store.commit_wanted))
        slices.append((time.thread_time() - start) * 1000)
    gc.enable()

    folds = _folds(n)

    def per_message(now: collections.Counter[str], then: collections.Counter[str]) -> str:
        grown = now - then
        top = ", ".join(f"{name} {count / n:.2f}" for name, count in grown.most_common(3))
        return f"{sum(grown.values()) / n:.2f} ({top})"

    print(f"Command: `python -m bench.collector_load --messages {n}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}; Python {sys.version.split()[0]}\n")
    print("| | tracked objects per message | a full collection, CPU |")
    print("|---|---|---|")
    print(f"| {n:,} stored | {per_message(stored, before)} | {stored_gc:.1f} ms |")
    print(f"| {n:,} locked | {per_message(locked, before)} | {locked_gc:.1f} ms |")
    print(f"\npurge of {purged:,} messages ({n:,} locked): {purge_ms:.1f} ms CPU in one call")
    print(f"session receiver closed with {n:,} locks: the close {close_ms:.1f} ms CPU, then {len(slices)} ticks "
          f"returning them, longest {max(slices):.1f} ms, {sum(slices):.0f} ms in all")
    print(f"{n:,} completions, one commit each (durable): {len(folds)} folds of the delivery journal, longest "
          f"{max(folds, default=0.0):.1f} ms CPU")
    return 0


def _folds(count: int) -> list[float]:
    """The CPU of each journal fold that ``count`` completions (one commit each) cause, durable."""
    with tempfile.TemporaryDirectory(prefix="sbbench-fold-") as tmp:
        store = SqliteStore(Path(tmp) / "sbemulator.db", page_window=0)
        broker = Broker(_config(), store, clock=time.time)  # type: ignore[arg-type]
        for _ in range(0, count, BATCH):
            broker.send("q", [_message() for _ in range(BATCH)])
            broker.commit()
        receiver, deliveries = _take_all(broker, "q", count)
        folds: list[float] = []
        fold = store.fold_journal

        def timed() -> None:
            start = time.thread_time()
            fold()
            folds.append((time.thread_time() - start) * 1000)

        store.fold_journal = timed  # type: ignore[method-assign]
        gc.disable()
        for delivery in deliveries:
            receiver.complete(delivery.lock_token)
            broker.commit()
        gc.enable()
        broker.close()
        return folds


if __name__ == "__main__":
    sys.exit(main())
