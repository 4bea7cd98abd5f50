"""Load shapes for the generator: when to send how many messages of which priority.

Pure functions so the shapes are testable without a broker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHAPES = ("constant", "burst")


@dataclass(frozen=True)
class Send:
    at: float  # seconds after the start
    high: int
    low: int
    invalid: int

    @property
    def total(self) -> int:
        return self.high + self.low + self.invalid


def split_priorities(n: int, high_share: float, invalid_share: float = 0.0) -> tuple[int, int, int]:
    """Split ``n`` into (high, low, invalid) by the shares, rounding so the parts add up to ``n``."""
    if not (0 <= high_share <= 1 and 0 <= invalid_share <= 1 and high_share + invalid_share <= 1):
        raise ValueError("shares must be in [0, 1] and add up to at most 1")
    invalid = round(n * invalid_share)
    high = min(n - invalid, round(n * high_share))
    return high, n - invalid - high, invalid


def plan(
    count: int,
    *,
    shape: str = "constant",
    rate: float = 10.0,
    chunk: int = 10,
    burst_size: int = 100,
    burst_interval: float = 10.0,
    high_share: float = 0.5,
    invalid_share: float = 0.0,
) -> list[Send]:
    """``constant``: ``count`` messages at ``rate``/s in chunks of ``chunk``;
    ``burst``: ``burst_size`` at once every ``burst_interval`` seconds until ``count`` are sent."""
    if count < 0:
        raise ValueError("count must be >= 0")
    if shape == "constant":
        if rate <= 0 or chunk < 1:
            raise ValueError("rate must be > 0 and chunk >= 1")
        sizes = [chunk] * (count // chunk) + ([count % chunk] if count % chunk else [])
        times, sent = [], 0
        for size in sizes:
            times.append(sent / rate)
            sent += size
    elif shape == "burst":
        if burst_size < 1 or burst_interval <= 0:
            raise ValueError("burst_size must be >= 1 and burst_interval > 0")
        bursts = math.ceil(count / burst_size)
        sizes = [min(burst_size, count - i * burst_size) for i in range(bursts)]
        times = [i * burst_interval for i in range(bursts)]
    else:
        raise ValueError(f"unknown shape {shape!r}; known: {SHAPES}")
    return [
        Send(at, *split_priorities(size, high_share, invalid_share))
        for at, size in zip(times, sizes, strict=True)
    ]
