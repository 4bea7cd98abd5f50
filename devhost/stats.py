"""Invocation counters per function and instance (what the tests and the dashboard read)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from devhost.instances import InstanceId


@dataclass(frozen=True)
class Invocation:
    function: str
    instance: InstanceId
    started: float  # time.time()
    duration: float
    succeeded: bool


class InvocationStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.succeeded: Counter[tuple[str, InstanceId]] = Counter()
        self.failed: Counter[tuple[str, InstanceId]] = Counter()
        self.listeners: list[Callable[[Invocation], None]] = []

    def record(self, invocation: Invocation) -> None:
        key = (invocation.function, invocation.instance)
        with self._lock:
            (self.succeeded if invocation.succeeded else self.failed)[key] += 1
        for listener in self.listeners:
            listener(invocation)

    def by_function(self) -> dict[str, dict[str, int]]:
        """``{function: {"succeeded": n, "failed": n, "instances": distinct instances used}}``."""
        with self._lock:
            result: dict[str, dict[str, int]] = {}
            for counter, field in ((self.succeeded, "succeeded"), (self.failed, "failed")):
                for (function, _), count in counter.items():
                    entry = result.setdefault(function, {"succeeded": 0, "failed": 0, "instances": 0})
                    entry[field] += count
            for function, entry in result.items():
                entry["instances"] = len({i for (f, i) in self.succeeded | self.failed if f == function})
            return result

    def executions(self, functions: list[str]) -> int:
        """Finished executions (succeeded or failed) of these functions so far."""
        wanted = set(functions)
        with self._lock:
            return sum(n for counter in (self.succeeded, self.failed) for (f, _), n in counter.items() if f in wanted)

    def instances_of(self, function: str) -> set[InstanceId]:
        with self._lock:
            return {i for (f, i) in self.succeeded | self.failed if f == function}


def now() -> float:
    return time.time()
