"""``python -m sender``: a load generator for the ``messages`` topic.

Examples: ``python -m sender --count 1000 --rate 100 --high-share 0.2`` (steady), or
``python -m sender --shape burst --count 2000 --burst-size 500 --burst-interval 5`` (spiky, to show
load leveling). Uses the ServiceBusConnection setting unless ``--connection-string`` is given.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from sender.load import SHAPES, plan
from sender.messages import build_messages, publish
from shared.clients import service_bus_client
from shared.settings import ServiceBusSettings, load_service_bus
from shared.topology import TOPIC


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sender", description=__doc__)
    parser.add_argument("--connection-string")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--count", type=int, default=100, help="total messages")
    parser.add_argument("--shape", choices=SHAPES, default="constant")
    parser.add_argument("--rate", type=float, default=50.0, help="messages/s for the constant shape")
    parser.add_argument("--chunk", type=int, default=10, help="messages per send for the constant shape")
    parser.add_argument("--burst-size", type=int, default=100)
    parser.add_argument("--burst-interval", type=float, default=10.0, help="seconds between bursts")
    parser.add_argument("--high-share", type=float, default=0.5, help="fraction sent with Priority=High")
    parser.add_argument("--invalid-share", type=float, default=0.0,
                        help="fraction sent with an unroutable priority (lands in unroutedPriority)")
    parser.add_argument("--tenants", type=int, default=5, help="number of tenant ids to spread over")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    settings = (ServiceBusSettings(connection_string=args.connection_string)
                if args.connection_string else load_service_bus())
    sends = plan(args.count, shape=args.shape, rate=args.rate, chunk=args.chunk, burst_size=args.burst_size,
                 burst_interval=args.burst_interval, high_share=args.high_share,
                 invalid_share=args.invalid_share)
    tenants = [f"tenant-{i}" for i in range(1, max(1, args.tenants) + 1)]
    sent = 0
    start = time.monotonic()
    with service_bus_client(settings) as client, client.get_topic_sender(args.topic) as topic_sender:
        for send in sends:
            delay = start + send.at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            messages = build_messages(send.high, send.low, tenants, n_invalid=send.invalid)
            publish(topic_sender, messages)
            sent += len(messages)
    elapsed = time.monotonic() - start
    logging.info("sent %d messages in %.2fs (%.1f/s)", sent, elapsed, sent / elapsed if elapsed else 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
