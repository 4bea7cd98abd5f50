"""Helpers for tests that drive the broker directly: a settable clock, message and config builders."""

from __future__ import annotations

from typing import Any

from sbemulator.broker import Broker, IncomingMessage, ReceiveMode
from sbemulator.config import parse_config
from sbemulator.store import SqliteStore


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def msg(body: bytes = b"x", **kw: Any) -> IncomingMessage:
    kw.setdefault("size", len(body) + 10)
    return IncomingMessage(body_raw=body, **kw)


def config(queues: list[dict] | None = None, topics: list[dict] | None = None) -> Any:
    return parse_config(
        {
            "UserConfig": {
                "Namespaces": [{"Name": "ns", "Queues": queues or [], "Topics": topics or []}],
                "Logging": {"Type": "Console"},
            }
        },
        "test",
    )


def make_broker(
    queues: list[dict] | None = None,
    topics: list[dict] | None = None,
    clock: FakeClock | None = None,
    store: SqliteStore | None = None,
) -> tuple[Broker, FakeClock]:
    clock = clock or FakeClock()
    return Broker(config(queues, topics), store or SqliteStore(None), clock=clock), clock


class Recorder:
    """An on_available callback that counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def receiver(broker: Broker, path: str, mode: ReceiveMode = ReceiveMode.PEEK_LOCK, **kw: Any):
    return broker.open_receiver(path, mode, Recorder(), **kw)


def bodies(deliveries) -> list[bytes]:
    return [d.message.body_raw for d in deliveries]
