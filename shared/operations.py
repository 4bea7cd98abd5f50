"""Service Bus operations the pipeline's own code makes, counted where it makes them.

Service Bus Standard bills messaging operations (a send, a receive, a settlement, a schedule, a
cancel, a peek each count), and the Priority Queue pattern warns that checking several queues costs
operations. The strategies differ exactly there: ``aging`` schedules and cancels a copy per
low-priority message, ``strict`` peeks the high subscription before low work. This counter records the
operations the code issues itself, per kind; the host's receives and settlements are counted by the
host (one receive and one settlement per delivery). In Azure the same figures come from the namespace's
``IncomingRequests`` metric; the counter is for local runs and benchmarks (one process, many instances).
"""

from __future__ import annotations

import threading
from collections import Counter

SEND = "send"
SCHEDULE = "schedule"
CANCEL = "cancel"
PEEK = "peek"


class OperationCounter:
    """Thread-safe counts per operation kind (each message a batch carries counts once)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


#: process-wide: the instances of one devhost process share it, as the benchmarks want
OPERATIONS = OperationCounter()
