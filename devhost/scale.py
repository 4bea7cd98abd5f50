"""Per-role scale-out limits and concurrency, read from infra/main.bicep (the one source).

main.bicep declares a ``functionApps`` array: one entry per role with ``maximumInstanceCount``,
``maxConcurrentCalls`` and (optionally) ``maxConcurrentSessions``, each a parameter with a default.
The deployment uses those parameters; the local host reads the same defaults (pycep-parser, as
tests/unit/test_infra_bicep.py does), so a change of a limit in the Bicep changes what devhost simulates.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
def _parse_cached(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    from pycep import BicepParser

    return BicepParser().parse(file_path=path)


def _parse(path: Path) -> dict[str, Any]:
    """Parsing takes a second; re-parse only when the file changed."""
    stat = path.stat()
    return _parse_cached(path, stat.st_mtime_ns, stat.st_size)


def _resolve(doc: dict[str, Any], value: Any, where: str) -> Any:
    """Follow a parameter or variable name to its default; literals stay as they are."""
    seen: set[str] = set()
    while isinstance(value, str) and value not in seen:
        seen.add(value)
        if value in doc.get("parameters", {}):
            parameter = doc["parameters"][value]
            if parameter.get("default") is None:
                raise SettingsError(f"{where}: parameter {value!r} has no default")
            value = parameter["default"]
        elif value in doc.get("variables", {}):
            value = doc["variables"][value]["value"]
        else:
            break
    return value


def parameter_default(name: str, bicep: str | Path = DEFAULT_BICEP) -> Any:
    """The default of one Bicep parameter (e.g. ``levelerMaxWritesPerSecond``)."""
    path = Path(bicep)
    doc = _parse(path.resolve())
    if name not in doc.get("parameters", {}):
        raise SettingsError(f"{path.name} has no parameter {name!r}")
    return _resolve(doc, name, f"{path.name}: {name}")


def load_role_scales(bicep: str | Path = DEFAULT_BICEP) -> dict[str, RoleScale]:
    path = Path(bicep)
    if not path.exists():
        raise SettingsError(f"cannot read the scale limits: {path} does not exist")
    doc = _parse(path.resolve())
    apps = doc.get("variables", {}).get("functionApps", {}).get("value")
    if not isinstance(apps, list):
        raise SettingsError(f"{path}: no 'functionApps' array variable with the per-role limits")
    scales = {}
    for app in apps:
        role = app["role"]
        where = f"{path.name}: functionApps[{role}]"
        instances = _resolve(doc, app.get("maximumInstanceCount"), where)
        calls = _resolve(doc, app.get("maxConcurrentCalls"), where)
        if not isinstance(instances, int) or not isinstance(calls, int) or instances < 1 or calls < 1:
            raise SettingsError(f"{where}: maximumInstanceCount/maxConcurrentCalls must be positive ints, "
                                f"got {instances!r}/{calls!r}")
        sessions = _resolve(doc, app.get("maxConcurrentSessions"), where)
        if sessions is not None and (not isinstance(sessions, int) or sessions < 1):
            raise SettingsError(f"{where}: maxConcurrentSessions must be a positive int, got {sessions!r}")
        ready = _resolve(doc, app.get("alwaysReadyInstanceCount", 0), where)
        if not isinstance(ready, int) or not 0 <= ready <= instances:
            raise SettingsError(f"{where}: alwaysReadyInstanceCount must be an int within 0..{instances}, "
                                f"got {ready!r}")
        scales[role] = RoleScale(role, instances, calls, sessions, ready)
    return scales
