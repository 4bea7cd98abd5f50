"""The AMQP connection's own Python work per peek-locked message: deliveries out, completions in.

Why: ``bench.emulator_python_cost`` times the whole emulator (gateway, broker, store) and, on a shared
machine, moves by 20% between runs. A change to ``sbemulator.amqp`` alone (its state tables, frame
reader, window arithmetic) is seen better by timing just the connection: this drives one sans-I/O
``Connection`` through a receiver link with ``--messages`` deliveries written in batches of 100 (as
the gateway's pump does) and the SDK's complete of each, one read per frame (as the SDK sends them),
each answered with the accepted echo. ``time.process_time``, the minimum of ``--repeats`` runs.
``python -m bench.amqp_connection_cost``.
"""

from __future__ import annotations

import argparse
import sys
import time

from sbemulator.amqp import hotframes
from sbemulator.amqp.connection import Connection
from sbemulator.amqp.events import DeliveryStateChanged, LinkAttachRequested
from sbemulator.amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, build_frame
from sbemulator.amqp.performatives import ROLE_RECEIVER, Attach, Begin, Flow, Open, SaslInit, Source, Target
from sbemulator.amqp.types import Symbol, UByte, UInt

UINT_MAX = 0xFFFFFFFF


def _sdk_complete(delivery_id: int) -> bytes:
    """azure-servicebus's complete of one delivery (what hotframes.sdk_complete_id reads)."""
    if delivery_id < 256:
        body = bytes.fromhex("005315c00d065601") + bytes((0x52, delivery_id)) + bytes.fromhex("4056000053244540")
    else:
        body = (bytes.fromhex("005315c010065601") + b"\x70" + delivery_id.to_bytes(4, "big")
                + bytes.fromhex("4056000053244540"))
    return hotframes.frame(0, body)


def run(messages: int, size: int) -> tuple[float, float]:
    """Microseconds per message spent sending deliveries, and handling their completions."""
    conn = Connection()
    conn.receive_data(SASL_HEADER + build_frame(0, SaslInit(Symbol("ANONYMOUS")), frame_type=FRAME_SASL)
                      + AMQP_HEADER)
    conn.receive_data(build_frame(0, Open("bench", max_frame_size=UInt(65536))))
    conn.receive_data(build_frame(0, Begin(None, UInt(0), UInt(UINT_MAX), UInt(UINT_MAX))))
    [attached] = conn.receive_data(build_frame(0, Attach("r", UInt(0), ROLE_RECEIVER, UByte(0), UByte(1),
                                                         Source("q"), Target("c"))))
    assert isinstance(attached, LinkAttachRequested)
    link = attached.link
    conn.accept_attach(link)
    conn.receive_data(build_frame(0, Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(0), UInt(0),
                                          UInt(messages + 10))))
    conn.data_to_send()
    payload = b"p" * size
    frames = [_sdk_complete(i) for i in range(messages)]
    start = time.process_time()
    for first in range(0, messages, 100):
        batch = range(first, min(first + 100, messages))
        conn.send_transfers(link, [(i.to_bytes(16, "big"), payload, i) for i in batch], settled=False)
        conn.data_to_send()
    sent = time.process_time()
    for frame in frames:
        for event in conn.receive_data(frame):
            if type(event) is DeliveryStateChanged:  # the only event a completion gives
                conn.settle_outgoing(event.link, event.delivery_id, event.state)
        conn.data_to_send()
    done = time.process_time()
    return (sent - start) / messages * 1e6, (done - sent) / messages * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=300, help="payload bytes per delivery")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    results = [run(args.messages, args.size) for _ in range(args.repeats)]
    send = min(r[0] for r in results)
    complete = min(r[1] for r in results)
    print(f"send {send:.2f} us + complete {complete:.2f} us = {send + complete:.2f} us of connection work per "
          f"peek-locked message (min of {args.repeats})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
