"""Send latency into a queue that has 0, 1,000 and 20,000 idle receivers attached.

Why: a receiver link that has no credit cannot take a message, so a send must not pay for it. An
emulator that tells every attached receiver about every new message makes one send cost time
proportional to the receivers, however idle (20,000 of them once made one SDK send take ~180 ms
instead of ~0.5 ms). With wake-ups for the receivers that can take a message now (credit, session,
filter), the send's cost does not grow with idle receivers.

What it does: starts the emulator (a separate process, in memory, no admin), then for each count in
``--receivers`` (cumulative, in order) attaches that many peek-lock receivers to the queue over raw
AMQP connections that never grant credit (at most ``--links-per-connection`` per connection, spread
over ``--sessions`` sessions each: the emulator bounds links per connection at 5,000), and times
``--sends`` single-message SDK sends into the queue, reporting the minimum and median. A thread per
raw connection reads and discards what the emulator sends it (its attach replies). Loopback only;
every wait is bounded. ``python -m bench.idle_receivers``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator.amqp.framing import build_frame
from sbemulator.amqp.performatives import ROLE_RECEIVER, Attach, Source, Target
from sbemulator.amqp.types import UByte, UInt

from ._util import config_file, emulator, load_average, machine, queue_entry, raw_connection, read_frame, today

QUEUE = "idle"
CONNECT_TIMEOUT_S = 30.0


def _config() -> dict:
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [queue_entry(QUEUE)], "Topics": []}],
                           "Logging": {"Type": "File"}}}


class IdleConnection:
    """One raw AMQP connection whose receiver links never get credit; a thread discards its input."""

    def __init__(self, port: int, sessions: int) -> None:
        self.sock = raw_connection(port, "idle-receivers", sessions=sessions, channel_max=sessions,
                                   timeout=CONNECT_TIMEOUT_S)
        self.sessions = sessions
        self.links = 0
        self.frames = 0  # frames read since the sessions began (attach replies)
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._discard, daemon=True)
        self._reader.start()

    def _discard(self) -> None:
        """Read and count frames (each attach is answered by one) until the socket closes."""
        try:
            while True:
                read_frame(self.sock)
                self.frames += 1
        except (OSError, EOFError):
            pass

    def attach(self, count: int) -> None:
        """``count`` more receivers on QUEUE, round-robin over this connection's sessions; no flow."""
        frames = bytearray()
        for _ in range(count):
            channel, handle = self.links % self.sessions, self.links // self.sessions
            frames += build_frame(channel, Attach(f"idle-{self.links}", UInt(handle), ROLE_RECEIVER, UByte(0),
                                                  UByte(1), Source(QUEUE), Target(f"idle-{self.links}")))
            self.links += 1
        self.sock.sendall(frames)

    def close(self) -> None:
        self.sock.close()


def attach_idle(port: int, pool: list[IdleConnection], count: int, per_connection: int, sessions: int) -> None:
    while count > 0:
        if not pool or pool[-1].links >= per_connection:
            pool.append(IdleConnection(port, sessions))
        n = min(count, per_connection - pool[-1].links)
        pool[-1].attach(n)
        count -= n


def wait_for_receivers(pool: list[IdleConnection], total: int, deadline_s: float) -> None:
    """Bounded wait until the emulator has answered every attach."""
    end = time.monotonic() + deadline_s
    while sum(c.frames for c in pool) < total:
        if time.monotonic() > end:
            raise TimeoutError(f"{total} receivers were not attached within {deadline_s:g} s")
        time.sleep(0.05)


def time_sends(client: ServiceBusClient, sends: int) -> list[float]:
    out = []
    with client.get_queue_sender(QUEUE) as sender:
        sender.send_messages(ServiceBusMessage(b"warm-up"))
        for _ in range(sends):
            start = time.perf_counter()
            sender.send_messages(ServiceBusMessage(b"x"))
            out.append((time.perf_counter() - start) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--receivers", type=int, nargs="+", default=[0, 1_000, 20_000])
    parser.add_argument("--sends", type=int, default=200)
    parser.add_argument("--links-per-connection", type=int, default=2_500)
    parser.add_argument("--sessions", type=int, default=5, help="sessions per raw connection")
    args = parser.parse_args(argv)
    counts = sorted(set(args.receivers))
    rows = []
    pool: list[IdleConnection] = []
    with config_file(_config()) as path, emulator(path, "--in-memory", "--no-admin") as proc:
        try:
            with ServiceBusClient.from_connection_string(proc.connection_string) as client:
                attached = 0
                for count in counts:
                    attach_idle(proc.port, pool, count - attached, args.links_per_connection, args.sessions)
                    attached = count
                    wait_for_receivers(pool, count, 120)
                    times = time_sends(client, args.sends)
                    rows.append((count, min(times), statistics.median(times), max(times)))
                    print(f"  {count:>7,} idle receivers: send min {rows[-1][1]:.2f} ms, median {rows[-1][2]:.2f} ms,"
                          f" max {rows[-1][3]:.2f} ms", flush=True)
        finally:
            for conn in pool:
                conn.close()
    receivers = " ".join(map(str, counts))
    print(f"\nCommand: `python -m bench.idle_receivers --receivers {receivers} --sends {args.sends}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}  ")
    print("| idle receivers | send min (ms) | send median (ms) | send max (ms) |")
    print("|---:|---:|---:|---:|")
    for count, low, mid, high in rows:
        print(f"| {count:,} | {low:.2f} | {mid:.2f} | {high:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
