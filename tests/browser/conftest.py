"""Browser fixtures: headless Chromium (the system's package) driven by Playwright, against a real emulator.

Playwright's own browser download cannot run everywhere, so the tests launch the system's Chromium
(`apt-get install chromium`; `SBEMULATOR_CHROMIUM` names another executable). Where it is missing the
tests are skipped with a warning that pytest prints in its summary; under CI (`CI=true`) they fail
instead, so a CI machine without the browser can never pass silently.
"""

from __future__ import annotations

import copy
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sbemulator import Emulator

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("SBEMULATOR_SCREENSHOTS", ROOT / "out" / "console-screenshots"))
UI_TIMEOUT_MS = 10_000

# Locks of a minute: a test receives in the console, checks from the SDK and then settles, which took
# more than the 5 and 10 s these queues had on a loaded machine (the settle then met a lapsed lock).
# No test here waits for a lock to lapse.
TOPOLOGY: dict[str, Any] = {
    "UserConfig": {
        "Namespaces": [{
            "Name": "sbemulatorns",
            "Queues": [
                {"Name": "orders", "Properties": {"MaxDeliveryCount": 3, "LockDuration": "PT1M"}},
                {"Name": "payments", "Properties": {"RequiresSession": True, "LockDuration": "PT1M"}},
            ],
            "Topics": [{
                "Name": "events",
                "Properties": {},
                "Subscriptions": [
                    {"Name": "all", "Properties": {}},
                    {"Name": "high", "Properties": {}, "Rules": [{"Name": "high-only", "Properties": {
                        "FilterType": "Sql",
                        "SqlFilter": {"SqlExpression": "Priority = 'High'"},
                        "Action": {"SqlExpression": "SET Escalated = 'yes'"},
                    }}]},
                ],
            }],
        }],
        "Logging": {"Type": "Console"},
    }
}


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _missing(reason: str) -> None:
    message = f"web console browser tests NOT RUN: {reason}"
    if _ci():
        pytest.fail(message + " (CI=true: the browser is required)", pytrace=False)
    warnings.warn(message, pytest.PytestWarning, stacklevel=2)
    pytest.skip(message)


def chromium_path() -> str | None:
    configured = os.environ.get("SBEMULATOR_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the Python package 'playwright' is not installed (pip install -r requirements-dev.txt)")
    executable = chromium_path()
    if executable is None:
        _missing("no Chromium executable (apt-get install chromium, or set SBEMULATOR_CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"], timeout=30_000)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def console_emulator() -> Iterator[Emulator]:
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as emu:
        yield emu


@pytest.fixture
def page(browser: Any, console_emulator: Emulator) -> Iterator[Any]:
    """A fresh browser context (no cookies) at a laptop screen size; dialogs (confirm) are accepted."""
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1366, "height": 800},
                                  base_url=console_emulator.admin_url)
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    try:
        yield page
    finally:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
