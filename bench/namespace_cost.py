"""What one more namespace costs: time to add and remove one, memory and file descriptors per namespace.

Why: the pytest plugin's ``servicebus_namespace`` fixture adds a namespace for every test and removes it
after (docs/emulator.md, "Several namespaces"); that is only a good default if a namespace is cheap next
to a test. Each one is an AMQP listener and (unless ``--no-admin``) an HTTPS listener on the shared
event loop, with a broker, a store and SAS rules of its own.

What it does, in process: an emulator with ``--topology`` (default infra/servicebus.json, the project's
own namespace) is started, then ``--namespaces`` namespaces are added one after the other through
``Emulator.add_namespace`` (the call the fixture makes; it returns once both listeners accept), then
removed. Reports the time of each add and remove (minimum, median, maximum), the resident memory
(VmRSS, after a collection) and the open file descriptors before, with every namespace running, and
after the removals; with ``--send`` also one SDK send and receive on a fresh namespace against one on the
first namespace (connection set-up included). ``python -m bench.namespace_cost [--namespaces 100]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

from sbemulator import Emulator

ROOT = Path(__file__).resolve().parents[1]


def rss_bytes() -> int:
    """Resident set size now (Linux /proc; elsewhere the peak from getrusage, in the same unit)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def _settled_rss() -> int:
    gc.collect()
    return rss_bytes()


def _stats(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"min {min(ms):.2f} ms, median {statistics.median(ms):.2f} ms, max {max(ms):.2f} ms"


def _round_trip(connection_string: str) -> float:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    started = time.perf_counter()
    with ServiceBusClient.from_connection_string(connection_string) as client:
        with client.get_queue_sender("leveling") as sender:
            sender.send_messages(ServiceBusMessage("x"))
        with client.get_queue_receiver("leveling", max_wait_time=5) as receiver:
            [message] = receiver.receive_messages(max_wait_time=5)
            receiver.complete_message(message)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--topology", default=str(ROOT / "infra" / "servicebus.json"))
    parser.add_argument("--no-admin", action="store_true", help="no HTTPS listener per namespace")
    parser.add_argument("--durable", action="store_true", help="a SQLite store per namespace (else in memory)")
    parser.add_argument("--send", action="store_true", help="also time an SDK round trip on a fresh namespace")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sbemulator-ns-bench-") as data_dir:
        emulator = Emulator(config=args.topology, in_memory=not args.durable,
                            data_dir=data_dir if args.durable else None, admin_port=None if args.no_admin else 0)
        with emulator as emu:
            before_rss, before_fds = _settled_rss(), open_fds()
            adds: list[float] = []
            for i in range(args.namespaces):
                started = time.perf_counter()
                emu.add_namespace(f"bench-{i}")
                adds.append(time.perf_counter() - started)
            running_rss, running_fds = _settled_rss(), open_fds()
            if args.send:
                first = min(_round_trip(emu.connection_string) for _ in range(3))
                fresh = []
                for i in range(3):
                    fresh.append(_round_trip(emu.add_namespace(f"send-{i}").connection_string))
                    emu.remove_namespace(f"send-{i}")
            removes: list[float] = []
            for i in range(args.namespaces):
                started = time.perf_counter()
                emu.remove_namespace(f"bench-{i}")
                removes.append(time.perf_counter() - started)
            after_rss, after_fds = _settled_rss(), open_fds()
    n = args.namespaces
    print(f"namespaces: {n} added to one emulator ({'no admin' if args.no_admin else 'with admin'}, "
          f"{'durable' if args.durable else 'in memory'}, topology {Path(args.topology).name}); "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"add:    {_stats(adds)}; all {sum(adds):.2f} s")
    print(f"remove: {_stats(removes)}")
    print(f"RSS:    {before_rss / 2**20:.1f} MiB before, {running_rss / 2**20:.1f} MiB with {n} more "
          f"({(running_rss - before_rss) / n / 1024:.0f} KiB a namespace), {after_rss / 2**20:.1f} MiB after removal")
    print(f"fds:    {before_fds} before, {running_fds} with {n} more ({(running_fds - before_fds) / n:.1f} a "
          f"namespace), {after_fds} after removal")
    if args.send:
        print(f"SDK send+receive (a new client each): first namespace min {first * 1000:.1f} ms, "
              f"a fresh namespace min {min(fresh) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
