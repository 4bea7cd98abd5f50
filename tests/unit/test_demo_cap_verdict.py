"""The demo's write chart and summary count the same thing the write budget caps (writes per 1-s window
at the store), and a window over the cap is said, never shown silently (devhost/demo/__main__.py)."""

from __future__ import annotations

from devhost.demo.__main__ import cap_verdict
from devhost.demo.metrics import busiest_window, per_second


def test_a_run_within_the_cap_names_its_busiest_window() -> None:
    assert cap_verdict([12, 19, 20, 7], 20, True) == (
        "busiest 1-s window 20 writes at the store, within the cap of 20/s")


def test_a_window_over_the_cap_is_called_a_broken_cap() -> None:
    verdict = cap_verdict([19, 24, 20, 21], 20, True)
    assert verdict.startswith("THE CAP WAS BROKEN: 2 1-s window(s) at the store over 20/s")
    assert "24 at 1 s" in verdict and "21 at 3 s" in verdict


def test_the_fallback_says_what_it_counted() -> None:
    assert "as the leveler logged them" in cap_verdict([3], 20, False)


def test_store_times_fall_in_the_windows_the_chart_draws() -> None:
    start = 1000.0
    stamps = [start + 0.01 * i for i in range(20)] + [start + 1.5]
    assert per_second(stamps, start, start + 2) == [20, 1]


def test_a_window_over_the_cap_between_the_charts_seconds_is_a_broken_cap_too() -> None:
    """The budget caps every 1-s window (docs/devhost.md, "The shared write budget"), not only the
    chart's: 21 writes astride two bars of 19 and 20 are said, with where they start."""
    verdict = cap_verdict([19, 20], 20, True, sliding=(21, 0.5))
    assert verdict.startswith("THE CAP WAS BROKEN: 21 writes at the store within the 1 s from 0.50 s"), verdict
    assert "highest bar is 20" in verdict


def test_a_run_within_the_cap_names_both_counts() -> None:
    assert cap_verdict([19, 20], 20, True, sliding=(20, 0.3)) == (
        "busiest 1-s window 20 writes at the store (20 in any 1 s), within the cap of 20/s")


def test_the_busiest_sliding_window_and_where_it_starts() -> None:
    stamps = [0.9, 1.0, 1.1, 1.85, 3.0]
    assert busiest_window(stamps) == (4, 0.9)
    assert busiest_window([])[0] == 0
