"""``recorded_by_proxy_async`` in live mode: the test runs as is."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import trim_kwargs


def recorded_by_proxy_async(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def _wrapper(*args: Any, **kwargs: Any) -> Any:
        return await fn(*args, **trim_kwargs(fn, kwargs))
    return _wrapper
