"""Shared fixtures: sbemulator (tests/fixtures/emulator.py) and Azurite (tests/fixtures/azurite.py).

The suite runs on pytest-xdist workers (``make test``; see tests/README.md for the rules that keeps safe).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["tests.fixtures.emulator", "tests.fixtures.azurite"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the tests marked ``slow`` first, keeping the order otherwise.

    Under pytest-xdist the run lasts as long as its busiest worker: a 40-second test handed out last
    runs alone at the end, while handed out first it overlaps with everything else. xdist's ``load``
    scheduler deals the first tests round-robin, so each worker starts with a different slow test.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
