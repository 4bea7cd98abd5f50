"""Recording sanitizers and matchers: nothing to do in live mode."""

from __future__ import annotations

from typing import Any


def add_remove_header_sanitizer(*args: Any, **kwargs: Any) -> None:
    pass


def add_general_regex_sanitizer(*args: Any, **kwargs: Any) -> None:
    pass


def add_oauth_response_sanitizer(*args: Any, **kwargs: Any) -> None:
    pass


def set_custom_default_matcher(*args: Any, **kwargs: Any) -> None:
    pass
