"""Shared fixtures: sbemulator (tests/fixtures/emulator.py) and Azurite (tests/fixtures/azurite.py).

The suite runs on pytest-xdist workers (``make test``; see tests/README.md for the rules that keeps safe).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.fixtures.emulator", "tests.fixtures.azurite"]

# Hypothesis's defaults time each example (a 200 ms deadline) and fail a test whose data generation is
# slow: both are timed assertions, which this suite does not make (tests/README.md), and under a loaded
# run the first turns a slow example into a FlakyFailure once the replay is fast. Every property test
# gets no deadline and no too_slow health check; a test's own @settings still sets the rest.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the tests marked ``slow`` first, keeping the order otherwise.

    Under pytest-xdist the run lasts as long as its busiest worker: a 30-second test handed out last
    runs alone at the end, while handed out first it overlaps with everything else. ``make test`` hands
    tests out one at a time (``--maxschedchunk 1``), so the slow ones start early on several workers
    and the short ones fill in around them.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the counts that the other SDKs' suites reported (tests/interop/test_go_sdk.py and the
    like record them as the ``sdk_suite`` user property), so a run's output says how many Go or Java
    tests ran, not only that the one pytest test wrapping each suite passed."""
    lines = [
        str(value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "when", "call") == "call"
        for name, value in getattr(report, "user_properties", [])
        if name == "sdk_suite"
    ]
    if lines:
        terminalreporter.section("sdk suites")
        for line in lines:
            terminalreporter.line(line)

