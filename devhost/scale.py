"""Per-role scale-out limits and concurrency, read from infra/main.bicep (the one source).

main.bicep declares a ``functionApps`` array: one entry per role with ``maximumInstanceCount``,
``maxConcurrentCalls`` and (optionally) ``maxConcurrentSessions``, each a parameter with a default.
The deployment uses those parameters; the local host reads the same defaults through the Bicep
evaluator of ``infra.check`` (the one Bicep reader of the repository), so a change of a limit in the
Bicep changes what devhost simulates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.check.bicep import read
from infra.check.evaluate import FileInstance
from infra.check.findings import Findings
from infra.check.values import Unknown
from shared.settings import SettingsError

DEFAULT_BICEP = Path(__file__).resolve().parents[1] / "infra" / "main.bicep"


@dataclass(frozen=True)
class RoleScale:
    role: str
    max_instances: int
    max_concurrent_calls: int
    max_concurrent_sessions: int | None = None  # None: host.json's value
    always_ready: int = 0  # Flex Consumption always-ready instances, when the Bicep sets them


@functools.cache
def _instance_cached(path: Path, mtime_ns: int, size: int) -> FileInstance:
    return FileInstance(read(path), {}, path.name, Findings())


def _instance(path: Path) -> FileInstance:
    """The Bicep file evaluated with its parameters' defaults; read again only when the file changed."""
    stat = path.stat()
    return _instance_cached(path, stat.st_mtime_ns, stat.st_size)


def _known(value: Any, where: str) -> Any:
    """A value the defaults determine; a parameter without a default is an error here."""
    if isinstance(value, Unknown):
        what = value.origin or "a value"
        if what.startswith("parameter "):
            what = f"parameter {what.split(' ', 1)[1]!r}"
        raise SettingsError(f"{where}: {what} has no default")
    return value


def parameter_default(name: str, bicep: str | Path = DEFAULT_BICEP) -> Any:
    """The default of one Bicep parameter (e.g. ``levelerMaxWritesPerSecond``)."""
    path = Path(bicep)
    instance = _instance(path.resolve())
    if name not in instance.file.params:
        raise SettingsError(f"{path.name} has no parameter {name!r}")
    return _known(instance.param(name), f"{path.name}: {name}")


def load_role_scales(bicep: str | Path = DEFAULT_BICEP) -> dict[str, RoleScale]:
    path = Path(bicep)
    if not path.exists():
        raise SettingsError(f"cannot read the scale limits: {path} does not exist")
    instance = _instance(path.resolve())
    apps = instance.variable("functionApps") if "functionApps" in instance.file.variables else None
    if not isinstance(apps, list):
        raise SettingsError(f"{path}: no 'functionApps' array variable with the per-role limits")
    scales = {}
    for app in apps:
        role = app["role"]
        where = f"{path.name}: functionApps[{role}]"
        instances = _known(app.get("maximumInstanceCount"), where)
        calls = _known(app.get("maxConcurrentCalls"), where)
        if not isinstance(instances, int) or not isinstance(calls, int) or instances < 1 or calls < 1:
            raise SettingsError(f"{where}: maximumInstanceCount/maxConcurrentCalls must be positive ints, "
                                f"got {instances!r}/{calls!r}")
        sessions = _known(app.get("maxConcurrentSessions"), where)
        if sessions is not None and (not isinstance(sessions, int) or sessions < 1):
            raise SettingsError(f"{where}: maxConcurrentSessions must be a positive int, got {sessions!r}")
        ready = _known(app.get("alwaysReadyInstanceCount", 0), where)
        if not isinstance(ready, int) or not 0 <= ready <= instances:
            raise SettingsError(f"{where}: alwaysReadyInstanceCount must be an int within 0..{instances}, "
                                f"got {ready!r}")
        scales[role] = RoleScale(role, instances, calls, sessions, ready)
    return scales
