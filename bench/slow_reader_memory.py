"""The emulator's memory while a receiver with unlimited credit never reads its socket.

Why: an emulator that writes whatever a receiver has credit for, whether or not the peer reads,
buffers the whole queue for a stalled client and does it again every lock cycle. With backpressure
(the receive pump stops while the connection's output is above its high-water mark) the emulator's
RSS stays flat, the stalled client's locks run out by their own lock duration without new deliveries
piling up, and other clients keep their round-trip times.

What it does: starts the emulator (a separate process, in memory), fills a queue with 5 s locks with
``--messages`` messages of ``--size`` bytes, opens one raw AMQP connection that attaches a peek-lock
receiver with unlimited credit and then never reads, and samples the emulator's RSS and one canary
client's send+receive round trip on another queue every ``--interval`` seconds for ``--seconds``.
Loopback only; every wait is bounded. ``python -m bench.slow_reader_memory``.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceiveMode,
    ServiceBusReceiver,
    ServiceBusSender,
)

from sbemulator.amqp.framing import build_frame
from sbemulator.amqp.performatives import ROLE_RECEIVER, Attach, Flow, Source, Target
from sbemulator.amqp.types import UByte, UInt

from ._util import (
    UINT_MAX,
    config_file,
    emulator,
    load_average,
    machine,
    process_rss_mb,
    queue_entry,
    raw_connection,
    read_frame,
    today,
)

STALLED, CANARY = "stalled", "canary"


def _config(messages: int) -> dict:
    stalled = queue_entry(STALLED)
    stalled["Properties"].update(LockDuration="PT5S", MaxDeliveryCount=1000)
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [stalled, queue_entry(CANARY)],
                                           "Topics": []}], "Logging": {"Type": "File"}}}


def stalled_receiver(port: int) -> socket.socket:
    """A connection with a peek-lock receiver on STALLED, unlimited credit, that is then never read."""
    sock = raw_connection(port, "stalled-reader", timeout=10)
    sock.sendall(build_frame(0, Attach("stalled", UInt(0), ROLE_RECEIVER, UByte(0), UByte(1), Source(STALLED),
                                       Target("stalled-reader"))))
    read_frame(sock)  # attach
    sock.sendall(build_frame(0, Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0),
                                     UInt(UINT_MAX - 1))))
    return sock  # from here on nothing is read


def canary_round_trip_ms(sender: ServiceBusSender, receiver: ServiceBusReceiver) -> float:
    """One message sent and received back on the canary queue by a client that stays connected."""
    start = time.perf_counter()
    sender.send_messages(ServiceBusMessage(b"canary"))
    got = receiver.receive_messages(max_message_count=1, max_wait_time=10)
    if not got:
        raise RuntimeError("the canary message did not come back within 10 s")
    return (time.perf_counter() - start) * 1000


def max_delivery_count(client: ServiceBusClient, sample: int = 200) -> int:
    with client.get_queue_receiver(STALLED) as receiver:
        peeked = receiver.peek_messages(max_message_count=sample)
    return max((m.delivery_count or 0 for m in peeked), default=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=500, help="body bytes per message")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    body = b"m" * args.size
    with config_file(_config(args.messages)) as path, emulator(path, "--in-memory", "--no-admin") as proc:
        with ServiceBusClient.from_connection_string(proc.connection_string) as client:
            with client.get_queue_sender(STALLED) as sender:
                for start in range(0, args.messages, 200):
                    count = min(200, args.messages - start)
                    sender.send_messages([ServiceBusMessage(body) for _ in range(count)])
            idle_rss = process_rss_mb(proc.pid)
            print(f"[slow_reader_memory] {args.messages:,} x {args.size} B queued; RSS {idle_rss:.0f} MB", flush=True)
            canary_sender = client.get_queue_sender(CANARY)
            canary_receiver = client.get_queue_receiver(CANARY, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
            with canary_sender, canary_receiver:
                canary_round_trip_ms(canary_sender, canary_receiver)  # links open before the clock starts
                sock = stalled_receiver(proc.port)
                rows = []
                began = time.monotonic()
                try:
                    while True:
                        elapsed = time.monotonic() - began
                        rtt = canary_round_trip_ms(canary_sender, canary_receiver)
                        rss = process_rss_mb(proc.pid)
                        rows.append((elapsed, rss, rtt))
                        print(f"  t={elapsed:5.1f}s  RSS {rss:6.1f} MB  canary round trip {rtt:6.1f} ms", flush=True)
                        if elapsed >= args.seconds:
                            break
                        time.sleep(max(0.0, args.interval - (time.monotonic() - began - elapsed)))
                    deliveries = max_delivery_count(client)
                finally:
                    sock.close()
    first, last = rows[0][1], rows[-1][1]
    peak = max(r[1] for r in rows)
    print(f"\nCommand: `python -m bench.slow_reader_memory --messages {args.messages} --size {args.size} "
          f"--seconds {args.seconds:g}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}  ")
    print(f"RSS before the stalled receiver {idle_rss:.0f} MB; at t=0 {first:.0f} MB, at the end {last:.0f} MB, "
          f"peak {peak:.0f} MB; canary round trip median {sorted(r[2] for r in rows)[len(rows) // 2]:.1f} ms, "
          f"worst {max(r[2] for r in rows):.1f} ms; highest delivery count among the first 200 messages "
          f"{deliveries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
