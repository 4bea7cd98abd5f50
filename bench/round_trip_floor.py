"""What one request/response round trip costs a server that does nothing else, on this machine.

Why: on the SDK's peek-lock path the client waits for the answer to every completion, so each message
costs the emulator a wake-up, a read and a write whatever its own code does. This measures that floor:
a server on the standard asyncio loop (a ``BufferedProtocol``, as the emulator's) or on uvloop answers
every 29-byte frame (the size of the SDK's complete) with 27 bytes (the emulator's echo), and a
blocking client on loopback spends some CPU between round trips, as the SDK does. Printed: the server's
user and system CPU per round trip, from ``/proc``.

Not a goal check: ``python -m bench.round_trip_floor`` (add ``--loops asyncio,uvloop`` to compare).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import socket
import subprocess
import sys
import time

from ._util import CLOCK_TICKS

REQUEST, ANSWER = b"r" * 29, b"a" * 27
CONNECT_TIMEOUT_S = 20.0


def _serve(loop_name: str) -> None:
    class Echo(asyncio.BufferedProtocol):
        buffer = memoryview(bytearray(262144))

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def get_buffer(self, sizehint: int) -> memoryview:
            return self.buffer

        def buffer_updated(self, nbytes: int) -> None:
            self.transport.write(ANSWER)  # type: ignore[attr-defined]

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.sleep(3600)  # killed by the client when it is done

    if loop_name == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())


def _cpu(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` (``_util.process_cpu_seconds`` gives only their sum)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def measure(loop_name: str, round_trips: int, think: int) -> tuple[float, float, float]:
    """Server user and system microseconds per round trip, and round trips per second."""
    server = subprocess.Popen([sys.executable, "-m", "bench.round_trip_floor", "--serve", loop_name],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(1000):  # warm up
                sock.sendall(REQUEST)
                sock.recv(64)
            user0, sys0 = _cpu(server.pid)
            start = time.perf_counter()
            for _ in range(round_trips):
                sock.sendall(REQUEST)
                sock.recv(64)
                busy = 0
                for i in range(think):  # the client's own work between round trips
                    busy += i
            wall = time.perf_counter() - start
            user1, sys1 = _cpu(server.pid)
    finally:
        server.kill()
        server.wait(10)
    return (user1 - user0) / round_trips * 1e6, (sys1 - sys0) / round_trips * 1e6, round_trips / wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=20_000)
    parser.add_argument("--think", type=int, default=3000,
                        help="loop iterations of client work between round trips (3000: about the SDK's pace)")
    parser.add_argument("--loops", default="asyncio")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.serve)
        return 0
    for loop_name in args.loops.split(","):
        if loop_name == "uvloop" and importlib.util.find_spec("uvloop") is None:
            print("uvloop: not installed")
            continue
        user, system, rate = measure(loop_name, args.round_trips, args.think)
        print(f"{loop_name}: server {user:.1f} us user + {system:.1f} us system per round trip ({rate:,.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
