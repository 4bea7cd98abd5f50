"""Instance scope: what is process-wide in a Functions worker is per instance here.

In Azure each instance of a Function App is its own worker process, so a module-level
``functools.cache`` factory (a client, a write pacer, a recorder) exists once per instance. devhost
runs every instance as threads of one process, so it swaps such zero-argument cached factories in the
app's modules for ones that cache per instance (the instance of the calling thread). Without this,
four leveler instances would share one write pacer sized for a quarter of the cap.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class InstanceId:
    role: str
    index: int

    def __str__(self) -> str:
        return f"{self.role}#{self.index}"


_current = threading.local()


def current_instance() -> InstanceId | None:
    return getattr(_current, "instance", None)


def enter_instance(instance: InstanceId | None) -> None:
    """Mark the calling thread as running on ``instance`` (every listener thread does this first)."""
    _current.instance = instance


class InstanceScopedFactory:
    """A drop-in for a ``functools.cache`` zero-argument factory, caching one value per instance."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.__wrapped__ = original.__wrapped__
        functools.update_wrapper(self, original.__wrapped__)
        self._values: dict[InstanceId | None, Any] = {}
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        key = current_instance()
        with self._lock:
            if key in self._values:
                return self._values[key]
        value = self.__wrapped__()
        with self._lock:
            return self._values.setdefault(key, value)

    def cache_clear(self) -> None:
        with self._lock:
            self._values.clear()
        self.original.cache_clear()

    def values(self) -> dict[InstanceId | None, Any]:
        with self._lock:
            return dict(self._values)

    def forget(self, instance: InstanceId) -> Any:
        """Drop what ``instance`` made (it stopped: a later instance of that index is a new process)."""
        with self._lock:
            return self._values.pop(instance, None)


def _is_zero_arg_cache(value: Any) -> bool:
    if not (callable(value) and hasattr(value, "cache_clear") and hasattr(value, "__wrapped__")):
        return False
    try:
        return not inspect.signature(value.__wrapped__).parameters
    except (TypeError, ValueError):
        return False


class InstanceScope:
    """Patches the cached factories of ``modules`` while installed; ``uninstall`` puts them back."""

    def __init__(self, modules: Iterable[ModuleType]) -> None:
        self.modules = list(modules)
        self.patched: dict[tuple[str, str], InstanceScopedFactory] = {}

    def install(self) -> None:
        for module in self.modules:
            for name, value in list(vars(module).items()):
                if isinstance(value, InstanceScopedFactory) or not _is_zero_arg_cache(value):
                    continue
                if getattr(value, "__module__", None) != module.__name__:
                    continue  # imported from elsewhere: patched in its own module
                value.cache_clear()
                scoped = InstanceScopedFactory(value)
                setattr(module, name, scoped)
                self.patched[(module.__name__, name)] = scoped

    def uninstall(self) -> None:
        for module in self.modules:
            for name, value in list(vars(module).items()):
                if isinstance(value, InstanceScopedFactory) and (module.__name__, name) in self.patched:
                    value.cache_clear()
                    setattr(module, name, value.original)
        self.patched.clear()

    def forget(self, instance: InstanceId) -> None:
        for factory in self.patched.values():
            value = factory.forget(instance)
            close = getattr(value, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:  # a client that cannot close cleanly is dropped all the same
                    pass

    def factory(self, qualified: str) -> InstanceScopedFactory | None:
        module, _, name = qualified.rpartition(".")
        return self.patched.get((module, name))


def run_as(instance: InstanceId, target: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    def run() -> Any:
        enter_instance(instance)
        return target(*args)

    return run
