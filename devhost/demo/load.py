"""The demo's load shape: the sender timer gives a steady flow; this adds bursts and poison.

- bursts of low-priority work (``sender.load.plan(shape="burst")``, the load generator's own shapes);
- one burst of high-priority work, large enough that consumer-high needs more than one instance
  (target-based scaling: backlog / maxConcurrentCalls);
- poison: every ``poison_every`` seconds one message whose body is not JSON, routed like any other; the
  consumer forwards it and the leveler dead-letters it at once with the reason ``InvalidJson``.

Everything is published through ``sender.routing.route``, as the sender Function does, so the FIFO
baseline and the aging copies apply to the demo's bursts too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from azure.servicebus import ServiceBusMessage

from sender.load import Send, plan
from sender.messages import build_messages
from sender.routing import route
from shared.topology import HIGH, LOW, PRIORITY_PROPERTY, QUEUE_PRIORITY_FIFO, TOPIC

log = logging.getLogger("devhost.demo")
TENANTS = tuple(f"tenant-{i}" for i in range(1, 6))
POISON_BODY = "{this is not JSON"


def burst_plan(duration: float, burst_size: int, interval: float, first_at: float,
               high_burst: int = 0, high_at: float | None = None) -> list[Send]:
    """Bursts of ``burst_size`` low-priority messages every ``interval`` s from ``first_at`` until
    ``duration``, plus one burst of ``high_burst`` high-priority messages at ``high_at`` (default: mid-run)."""
    bursts = max(0, int((duration - first_at - 1) // interval) + 1) if duration > first_at + 1 else 0
    sends = plan(bursts * burst_size, shape="burst", burst_size=burst_size, burst_interval=interval,
                 high_share=0.0)
    result = [Send(s.at + first_at, s.high, s.low, s.invalid) for s in sends]
    if high_burst > 0:
        at = duration * 0.45 if high_at is None else high_at
        result.append(Send(at, high_burst, 0, 0))
    return sorted(result, key=lambda s: s.at)


def poison_message(n: int) -> ServiceBusMessage:
    priority = HIGH if n % 2 else LOW
    return ServiceBusMessage(POISON_BODY, message_id=f"poison-{n}", content_type="application/json",
                             application_properties={PRIORITY_PROPERTY: priority}, subject=priority)


class BurstPublisher:
    def __init__(self, client_factory: Callable[[], Any], sends: list[Send], *, strategy: str = "separate",
                 aging_after: float = 30.0, poison_every: float = 0.0, duration: float = 0.0) -> None:
        self.client_factory = client_factory
        self.sends = sends
        self.strategy = strategy
        self.aging_after = aging_after
        self.poison_every = poison_every
        self.duration = duration
        self.published = 0
        self.poison_sent = 0
        self.bursts: list[tuple[float, int, str]] = []  # (time.time(), size, priority)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-bursts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _events(self) -> list[tuple[float, Send | None]]:
        events: list[tuple[float, Send | None]] = [(send.at, send) for send in self.sends]
        if self.poison_every > 0:
            at = self.poison_every / 2
            while at < self.duration:
                events.append((at, None))
                at += self.poison_every
        return sorted(events, key=lambda e: e[0])

    def _run(self) -> None:
        start = time.monotonic()
        try:
            with self.client_factory() as client, client.get_topic_sender(TOPIC) as topic, \
                    client.get_queue_sender(QUEUE_PRIORITY_FIFO) as fifo:
                for at, send in self._events():
                    if self._stop.wait(max(0.0, start + at - time.monotonic())):
                        return
                    if send is None:
                        route(self.strategy, [poison_message(self.poison_sent)], topic_sender=lambda: topic,
                              fifo_sender=lambda: fifo, aging_after=self.aging_after)
                        self.poison_sent += 1
                        continue
                    messages = build_messages(send.high, send.low, TENANTS)
                    route(self.strategy, messages, topic_sender=lambda: topic, fifo_sender=lambda: fifo,
                          aging_after=self.aging_after)
                    self.published += len(messages)
                    self.bursts.append((time.time(), len(messages), HIGH if send.high else LOW))
        except Exception:
            log.exception("the burst publisher failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
