"""The emulator's own Python work per peek-locked message, without sockets or an event loop.

Why: on the SDK's peek-lock path most of the emulator's CPU is the fixed cost of one round trip per
completion (the event loop waking up, a read, a write), and the CPU figures of
``bench.emulator_throughput`` move by several percent from run to run with what else the machine
does. To see what a change to the gateway, broker or store does to the Python work alone, this tool
records what the SDK sends (through a loopback proxy in front of a real emulator process), then
replays those bytes into a fresh in-process server (``_AmqpProtocol`` over a transport that only
counts what it is given) and times the peek-lock phase with ``time.process_time``: the minimum of a
few repetitions is stable to a few percent. ``--profile`` prints the functions with the most time.

Not a goal check: a tool for profiling. ``python -m bench.emulator_python_cost --messages 20000``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusReceiveMode

from sbemulator.config import load_config
from sbemulator.runtime.composition import NamespaceOptions, compose
from sbemulator.runtime.server import _AmqpProtocol

from ._util import Deadline, config_file, emulator, topology
from .emulator_throughput import QUEUE, open_receiver, receive_all, send_batches

SETUP, PEEK = "setup", "peek"
PROXY_TIMEOUT_S = 30.0  # no read on the proxy waits longer than this


@dataclass
class Recording:
    """The bytes each client connection sent, in the order they arrived, tagged with their phase."""

    chunks: list[tuple[str, int, bytes]] = field(default_factory=list)
    phase: str = SETUP
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, connection: int, data: bytes) -> None:
        with self.lock:
            self.chunks.append((self.phase, connection, data))


def _pipe(source: socket.socket, target: socket.socket, recording: Recording | None, connection: int) -> None:
    try:
        while True:
            data = source.recv(262144)
            if not data:
                break
            if recording is not None:
                recording.add(connection, data)
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _proxy(listener: socket.socket, upstream_port: int, recording: Recording) -> None:
    """Accept client connections on ``listener`` and relay each to the emulator, recording one way."""
    connection = 0
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # the listener was closed
        connection += 1
        server = socket.create_connection(("127.0.0.1", upstream_port), timeout=PROXY_TIMEOUT_S)
        for sock in (client, server):
            sock.settimeout(PROXY_TIMEOUT_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pipe, args=(client, server, recording, connection), daemon=True).start()
        threading.Thread(target=_pipe, args=(server, client, None, connection), daemon=True).start()


def record(config: Path, messages: int, size: int, timeout: float) -> Recording:
    """Send ``messages`` and receive them peek-locked, completing each, through a recording proxy."""
    recording = Recording()
    with tempfile.TemporaryDirectory(prefix="sbbench-data-") as data_dir, \
            emulator(config, "--data-dir", data_dir, "--no-admin") as emu, \
            socket.create_server(("127.0.0.1", 0)) as listener:
        threading.Thread(target=_proxy, args=(listener, emu.port, recording), daemon=True).start()
        proxied = emu.connection_string.replace(f":{emu.port};", f":{listener.getsockname()[1]};")
        deadline = Deadline("record", timeout)
        with ServiceBusClient.from_connection_string(proxied) as client, client.get_queue_sender(QUEUE) as sender:
            send_batches(sender, messages, size, "r", deadline)
            with open_receiver(client, ServiceBusReceiveMode.PEEK_LOCK) as receiver:
                time.sleep(0.3)  # the attach's last frames belong to the set-up, not to the phase
                recording.phase = PEEK
                receive_all(receiver, messages, deadline, peek_lock=True)
                time.sleep(0.3)
                recording.phase = "close"
    return recording


class _CountingTransport:
    """Stands in for the socket: counts what the server writes."""

    def __init__(self) -> None:
        self.writes = 0
        self.bytes = 0

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 0)

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.bytes += len(data)

    def is_closing(self) -> bool:
        return False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass  # it never fills: the server is never asked to pause

    def pause_reading(self) -> None:
        pass  # input handled in slices (a large batch) pauses reading; a replay feeds what was recorded

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


@contextmanager
def prepared_server(config: Path, recording: Recording, *,
                    in_memory: bool) -> Iterator[tuple[list[tuple[_AmqpProtocol, bytes]], _CountingTransport]]:
    """A fresh in-process server that has been given the recording's set-up phase: yields the peek
    phase's reads (each with the protocol instance of its connection) and the counting transport."""
    with tempfile.TemporaryDirectory(prefix="sbbench-replay-") as data_dir:
        loop = asyncio.new_event_loop()
        server = compose(load_config(str(config)), NamespaceOptions(in_memory=in_memory, data_dir=data_dir)).server
        server.loop = loop  # callbacks it schedules are never run: a replay has no timers to wait for
        transport = _CountingTransport()
        protocols: dict[int, _AmqpProtocol] = {}

        def protocol(connection: int) -> _AmqpProtocol:
            if connection not in protocols:
                protocols[connection] = _AmqpProtocol(server)
                protocols[connection].connection_made(transport)  # type: ignore[arg-type]
            return protocols[connection]

        for phase, connection, data in recording.chunks:
            if phase == SETUP:
                handler = protocol(connection)
                handler.data_received(data)
                # A large batch is decoded in slices on the loop's next iterations (the gateway's
                # backlog): run them, so that the set-up's sends are stored before its next read.
                while handler._input_backlog:
                    loop.run_until_complete(asyncio.sleep(0))
        try:
            yield [(protocol(connection), data) for phase, connection, data in recording.chunks if phase == PEEK], \
                transport
        finally:
            server.store.close()
            loop.close()


def replay(config: Path, recording: Recording, *, in_memory: bool,
           profiler: cProfile.Profile | None = None) -> tuple[float, _CountingTransport]:
    """CPU seconds the server spends on the peek phase's input, replayed into a fresh server."""
    with prepared_server(config, recording, in_memory=in_memory) as (peek, transport):
        if profiler is not None:
            profiler.enable()
        start = time.process_time()
        for proto, data in peek:
            proto.data_received(data)
        spent = time.process_time() - start
        if profiler is not None:
            profiler.disable()
    return spent, transport


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=200, help="body bytes per message")
    parser.add_argument("--repeats", type=int, default=5, help="replays per mode; the minimum is reported")
    parser.add_argument("--modes", default="in-memory,durable")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N functions with most time")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds the recording may take")
    args = parser.parse_args(argv)
    with config_file(topology([QUEUE])) as config:
        print(f"[emulator_python_cost] recording {args.messages:,} messages through the SDK ...", flush=True)
        recording = record(config, args.messages, args.size, args.timeout)
        for mode in args.modes.split(","):
            mode = mode.strip()
            runs = []
            for _ in range(args.repeats):
                spent, transport = replay(config, recording, in_memory=mode == "in-memory")
                runs.append(spent / args.messages * 1e6)
            print(f"{mode}: {min(runs):.1f} us of Python per peek-locked message (min of {args.repeats}: "
                  f"{', '.join(f'{r:.1f}' for r in runs)}); {transport.writes:,} writes")
            if args.profile:
                profiler = cProfile.Profile()
                replay(config, recording, in_memory=mode == "in-memory", profiler=profiler)
                stats = pstats.Stats(profiler, stream=sys.stdout)
                calls = vars(stats)["total_calls"]  # set by Stats, not in its type stubs
                print(f"{calls / args.messages:.1f} function calls per message (profiled run)")
                stats.sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
