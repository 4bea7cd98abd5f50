from __future__ import annotations

import pytest

from sender.load import plan, split_priorities


def test_split_adds_up() -> None:
    assert split_priorities(10, 0.3) == (3, 7, 0)
    assert split_priorities(10, 0.5, 0.2) == (5, 3, 2)
    assert split_priorities(7, 1.0) == (7, 0, 0)
    for n in range(50):
        assert sum(split_priorities(n, 0.37, 0.11)) == n
    with pytest.raises(ValueError):
        split_priorities(10, 0.8, 0.3)


def test_constant_shape_spreads_chunks_at_the_rate() -> None:
    sends = plan(25, shape="constant", rate=10, chunk=10, high_share=0.5)
    assert [s.at for s in sends] == [0.0, 1.0, 2.0]
    assert [s.total for s in sends] == [10, 10, 5]


def test_burst_shape() -> None:
    sends = plan(250, shape="burst", burst_size=100, burst_interval=5, high_share=0.2, invalid_share=0.1)
    assert [(s.at, s.total) for s in sends] == [(0.0, 100), (5.0, 100), (10.0, 50)]
    assert (sends[0].high, sends[0].low, sends[0].invalid) == (20, 70, 10)


def test_unknown_shape() -> None:
    with pytest.raises(ValueError, match="ramp"):
        plan(10, shape="ramp")
