"""Shared fixtures: sbemulator (tests/fixtures/emulator.py) and Azurite (tests/fixtures/azurite.py)."""

pytest_plugins = ["tests.fixtures.emulator", "tests.fixtures.azurite"]
