"""The demo's load shape: the sender timer gives a steady flow; this adds bursts of low-priority work.

The bursts follow ``sender.load.plan(shape="burst")`` (the load generator's own shapes) and are
published with ``sender.messages.publish``, as the sender Function does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sender.load import Send, plan
from sender.messages import build_messages, publish
from shared.topology import TOPIC

log = logging.getLogger("devhost.demo")
TENANTS = tuple(f"tenant-{i}" for i in range(1, 6))


def burst_plan(duration: float, burst_size: int, interval: float, first_at: float) -> list[Send]:
    """Bursts of ``burst_size`` low-priority messages every ``interval`` s from ``first_at`` until ``duration``."""
    bursts = max(0, int((duration - first_at - 1) // interval) + 1) if duration > first_at + 1 else 0
    sends = plan(bursts * burst_size, shape="burst", burst_size=burst_size, burst_interval=interval,
                 high_share=0.0)
    return [Send(s.at + first_at, s.high, s.low, s.invalid) for s in sends]


class BurstPublisher:
    def __init__(self, client_factory: Callable[[], Any], sends: list[Send]) -> None:
        self.client_factory = client_factory
        self.sends = sends
        self.published = 0
        self.bursts: list[tuple[float, int]] = []  # (time.time(), size)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-bursts", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        try:
            with self.client_factory() as client, client.get_topic_sender(TOPIC) as sender:
                for send in self.sends:
                    if self._stop.wait(max(0.0, start + send.at - time.monotonic())):
                        return
                    messages = build_messages(send.high, send.low, TENANTS)
                    publish(sender, messages)
                    self.published += len(messages)
                    self.bursts.append((time.time(), len(messages)))
        except Exception:
            log.exception("the burst publisher failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
