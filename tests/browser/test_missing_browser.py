"""Where Chromium is missing the console tests must not pass silently: a warning (shown in pytest's
summary) and a skip on a developer machine, a failure under CI."""

from __future__ import annotations

import pytest

from . import conftest


def test_missing_browser_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NOT RUN: no Chromium"):
        conftest._missing("no Chromium executable")


def test_missing_browser_warns_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.warns(pytest.PytestWarning, match="web console browser tests NOT RUN"):
        with pytest.raises(pytest.skip.Exception):
            conftest._missing("no Chromium executable")


def test_configured_executable_must_exist(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("SBEMULATOR_CHROMIUM", str(tmp_path / "no-such-browser"))
    assert conftest.chromium_path() is None
