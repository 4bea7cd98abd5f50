"""What telling protocols apart by their first bytes costs an AMQP connection on the AMQP port.

Why: the AMQP port serves AMQP, TLS, HTTP and WebSockets side by side by default (sbemulator/net): each
accepted connection is peeked (``recv(MSG_PEEK)``) before asyncio's transport takes it. That is a cost
per connection, never per frame (the transport is asyncio's own afterwards); this measures it against
``--amqp-port-only`` (a plain asyncio server, as before), alternating the two modes in fresh emulator
processes: ``--connections`` connections one after another, each opened, sent the SASL protocol header,
answered with the emulator's, and closed. Reported: the emulator's CPU per connection (``/proc``, all its
threads) and the client's wall time per connection (connect to the answer), the minimum over
``--repeats`` runs of each mode. ``python -m bench.listener_cost``.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time

from ._util import config_file, process_cpu_seconds, start_emulator, topology

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
MODES = {"one port (default)": (), "--amqp-port-only": ("--amqp-port-only",)}


def run(port: int, pid: int, connections: int) -> tuple[float, float]:
    """(emulator CPU seconds per connection, median client wall seconds per connection)."""
    walls = []
    cpu_before = process_cpu_seconds(pid)
    for _ in range(connections):
        started = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(SASL_HEADER)
            answer = b""
            while len(answer) < 8:
                chunk = sock.recv(8 - len(answer))
                if not chunk:
                    raise ConnectionError(f"closed after {answer!r}")
                answer += chunk
            walls.append(time.perf_counter() - started)
    time.sleep(0.3)  # the emulator handles the closes
    cpu = process_cpu_seconds(pid) - cpu_before
    return cpu / connections, statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with config_file(topology(["q"])) as config:
        for _ in range(args.repeats):
            for mode, flags in MODES.items():
                proc = start_emulator(config, "--in-memory", "--no-websocket", *flags)
                try:
                    results[mode].append(run(proc.port, proc.process.pid, args.connections))
                finally:
                    proc.terminate()
    print(f"{args.connections} connections x {args.repeats} runs per mode (minimum):")
    for mode, runs in results.items():
        cpu = min(r[0] for r in runs)
        wall = min(r[1] for r in runs)
        print(f"  {mode:22s} emulator CPU {cpu * 1e6:7.1f} us/connection, client wall {wall * 1e6:7.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
