"""The longest single hold of the event loop by deleting an entity of 100,000 messages, in memory and durable.

Why: deleting a queue (Atom ``DELETE``, ARM, the console, ``ServiceBusAdministrationClient.delete_queue``)
did all its work in the callback that answers it: a durable store range-deleted every row of the queue in
the commit (~167 ms for 100,000), and the broker freed 100,000 message objects at once (issue #19). Now the
delete's commit only records the queue's ids as dropped, and the rows and the objects go afterwards, a
slice per callback (store/sqlite.py ``drop_slice``, broker/topology.py ``drop_step``).

What it does, in this process (no sockets): a broker over the in-memory store, or over SQLite in a temporary
folder (``--durable``, the read-ahead window as the emulator's default, so most messages are paged out), gets
``--messages`` messages shaped like the Python SDK's, half of them taken peek-locked by a receiver that stays
open. Then the delete as the management endpoint does it (``begin_change``, ``delete_entity``, a commit,
``end_change``, a commit: admin/backend.py ``stored``), the bench's own references to the queue dropped inside
the same piece (so what the delete frees at once is freed there), then the server's deferred-work callbacks
(the scheduler's jobs, runtime/background.py: a ``drop_step`` or a ``Store.fold``, in turns) until none is
due. Each piece is timed with the collector off, in thread CPU time (which the machine's load does not
lengthen) and wall time (a durable commit's I/O included). On a checkout before the slices the delete is the only piece.

``python -m bench.delete_hold [--durable] [--messages N]``
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sbemulator.broker import Broker
from sbemulator.store import MemoryStore, SqliteStore

from ._util import load_average, machine, today
from .purge_hold import _config, fill_and_lock_half


def _piece(pieces: list[tuple[float, float]], start: tuple[float, float]) -> None:
    pieces.append(((time.thread_time() - start[0]) * 1000, (time.perf_counter() - start[1]) * 1000))


def measure(durable: bool, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sbbench-delete-") as tmp:
        store = SqliteStore(Path(tmp) / "sbemulator.db") if durable else MemoryStore()
        broker = Broker(_config(), store)  # type: ignore[arg-type]
        receiver: Any = fill_and_lock_half(broker, n)
        gc.collect()
        gc.disable()
        pieces: list[tuple[float, float]] = []
        start = (time.thread_time(), time.perf_counter())
        broker.begin_change()
        broker.delete_entity("q")
        broker.commit()
        broker.end_change(True)
        broker.commit()
        del receiver  # what the bench held of the queue goes with the delete's callback
        _piece(pieces, start)
        deferred: list[tuple[float, float]] = []
        store_turn = False
        while getattr(broker, "drops", None) or store.fold_due():
            start = (time.thread_time(), time.perf_counter())
            store_turn = (store_turn and store.fold_due()) or not getattr(broker, "drops", None)
            if store_turn:
                if store.fold_due():
                    store.fold()
            else:
                broker.drop_step()
            store_turn = not store_turn
            _piece(deferred, start)
            if len(deferred) > 100_000:
                raise RuntimeError("the deferred work does not end")
        gc.enable()
        broker.close()
    return {"pieces": pieces, "deferred": deferred}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--durable", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.durable, args.messages)
    (delete_cpu, delete_wall), = result["pieces"]
    deferred = result["deferred"]
    store = "durable (SQLite)" if args.durable else "in memory"
    print(f"Command: `python -m bench.delete_hold --messages {args.messages}{' --durable' if args.durable else ''}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}; Python {sys.version.split()[0]}\n")
    tail = "no deferred work"
    if deferred:
        tail = (f"then {len(deferred)} deferred callbacks, longest {max(c for c, _ in deferred):.1f} ms CPU / "
                f"{max(w for _, w in deferred):.1f} ms wall, {sum(c for c, _ in deferred):.0f} ms CPU in all")
    print(f"delete of a queue of {args.messages:,} messages ({args.messages // 2:,} locked), {store}: the delete "
          f"{delete_cpu:.1f} ms CPU / {delete_wall:.1f} ms wall; {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
