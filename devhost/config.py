"""Settings a Functions host reads: local.settings.json ``Values``, the environment, host.json.

The precedence is the host's: a value in the environment wins over local.settings.json, and an app
setting ``AzureFunctionsJobHost__extensions__serviceBus__<option>`` wins over host.json (that is how
infra/main.bicep gives each role its own ``maxConcurrentCalls``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from shared.settings import SettingsError

HOST_OVERRIDE_PREFIX = "AzureFunctionsJobHost__extensions__serviceBus__"
_TIMESPAN = re.compile(r"^(?:(\d+)\.)?(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,7}))?$")
_APP_SETTING_REF = re.compile(r"%([^%]+)%")


def parse_timespan(text: str) -> timedelta:
    """A .NET TimeSpan (``[d.]hh:mm:ss[.fffffff]``), the format host.json durations use."""
    match = _TIMESPAN.match(text.strip())
    if not match:
        raise ValueError(f"not a TimeSpan (expected [d.]hh:mm:ss[.fffffff]): {text!r}")
    days, hours, minutes, seconds, fraction = match.groups()
    if int(minutes) > 59 or int(seconds) > 59 or int(hours) > 23:
        raise ValueError(f"TimeSpan field out of range: {text!r}")
    micro = int((fraction or "0").ljust(7, "0")[:7]) / 10
    return timedelta(days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                     microseconds=micro)


@dataclass(frozen=True)
class ServiceBusOptions:
    """``extensions.serviceBus`` of host.json, with the Functions defaults for what it leaves out."""

    max_concurrent_calls: int = 16
    prefetch_count: int = 0
    auto_complete_messages: bool = True
    max_auto_lock_renewal_duration: timedelta = timedelta(minutes=5)
    max_concurrent_sessions: int = 8
    session_idle_timeout: timedelta | None = None
    max_message_batch_size: int = 1000  # batch triggers; also their target executions per instance
    min_message_batch_size: int = 1  # batch triggers: wait up to max_batch_wait_time for this many
    max_batch_wait_time: timedelta = timedelta(seconds=30)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], source: str = "host.json") -> ServiceBusOptions:
        """Known keys are parsed and checked; unknown ones (retry options, batch size) are ignored."""
        return cls()._merged(raw, source)

    def with_overrides(self, env: Mapping[str, str]) -> ServiceBusOptions:
        """Apply ``AzureFunctionsJobHost__extensions__serviceBus__*`` app settings."""
        raw = {key[len(HOST_OVERRIDE_PREFIX):]: value for key, value in env.items()
               if key.startswith(HOST_OVERRIDE_PREFIX)}
        return self._merged(raw, "app setting")

    def _merged(self, raw: Mapping[str, Any], source: str) -> ServiceBusOptions:
        by_lower = {key.lower(): (key, attr) for key, attr in _HOST_KEYS.items()}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            known = by_lower.get(key.lower())
            if known is not None:
                values[known[1]] = _convert(known[1], value, f"{source}: serviceBus.{known[0]}")
        merged = replace(self, **values)
        merged._check(source)
        return merged

    def _check(self, source: str) -> None:
        """The extension's own consistency checks ("host.json settings", Service Bus bindings page)."""
        if self.min_message_batch_size > self.max_message_batch_size:
            raise SettingsError(f"{source}: serviceBus.minMessageBatchSize ({self.min_message_batch_size}) must not "
                                f"exceed maxMessageBatchSize ({self.max_message_batch_size})")
        if self.max_batch_wait_time > MAX_BATCH_WAIT_TIME:
            raise SettingsError(f"{source}: serviceBus.maxBatchWaitTime ({self.max_batch_wait_time}) exceeds the "
                                f"longest allowed wait, 00:02:30 (half of the longest message lock)")


_HOST_KEYS = {
    "maxConcurrentCalls": "max_concurrent_calls",
    "prefetchCount": "prefetch_count",
    "autoCompleteMessages": "auto_complete_messages",
    "maxAutoLockRenewalDuration": "max_auto_lock_renewal_duration",
    "maxConcurrentSessions": "max_concurrent_sessions",
    "sessionIdleTimeout": "session_idle_timeout",
    "maxMessageBatchSize": "max_message_batch_size",
    "minMessageBatchSize": "min_message_batch_size",
    "maxBatchWaitTime": "max_batch_wait_time",
}
#: "The longest allowed wait time is 50% of the entity message lock duration" (5 minutes at most).
MAX_BATCH_WAIT_TIME = timedelta(minutes=2, seconds=30)


def _convert(name: str, value: Any, where: str) -> Any:
    try:
        if name in ("max_concurrent_calls", "prefetch_count", "max_concurrent_sessions", "max_message_batch_size",
                    "min_message_batch_size"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("not an integer")  # int() would read true as 1 and 1.5 as 1
            number = int(value)
            if number < (0 if name == "prefetch_count" else 1):
                raise ValueError("out of range")
            return number
        if name == "auto_complete_messages":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError("not a boolean")
        return parse_timespan(str(value))
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{where}: invalid value {value!r} ({exc})") from None


@dataclass(frozen=True)
class HostJson:
    """The parts of host.json this host honours."""

    service_bus: ServiceBusOptions = field(default_factory=ServiceBusOptions)
    function_timeout: timedelta | None = None


def load_host_json(path: str | Path) -> HostJson:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"host.json not found at {path}") from None
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path} is not valid JSON: {exc}") from None
    if str(data.get("version", "")) != "2.0":
        raise SettingsError(f"{path}: version must be \"2.0\", got {data.get('version')!r}")
    service_bus = (data.get("extensions") or {}).get("serviceBus") or {}
    timeout = data.get("functionTimeout")
    return HostJson(
        service_bus=ServiceBusOptions.from_mapping(service_bus, source=str(path)),
        function_timeout=_convert("function_timeout", timeout, f"{path}: functionTimeout") if timeout else None,
    )


def load_local_settings(path: str | Path | None) -> dict[str, str]:
    """``Values`` of local.settings.json as strings; a missing file is an empty mapping."""
    if path is None:
        return {}
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: the file must hold a JSON object with 'Values'")
    if data.get("IsEncrypted") is True:
        # Core Tools encrypts with a key of the machine ("func settings decrypt" undoes it); the values
        # would reach the functions as ciphertext
        raise SettingsError(f"{path}: IsEncrypted is true; decrypt the settings first (func settings decrypt)")
    values = data.get("Values") or {}
    if not isinstance(values, dict):
        raise SettingsError(f"{path}: 'Values' must be an object")
    nested = sorted(str(key) for key, value in values.items() if isinstance(value, dict | list))
    if nested:  # "Values must be strings and not JSON objects or arrays" (local.settings.json, Core Tools docs)
        raise SettingsError(f"{path}: Values.{nested[0]} is a JSON object or array; app settings are strings")
    return {str(key): "" if value is None else str(value) for key, value in values.items()}


@dataclass
class HostSettings:
    """App settings as the functions see them: the environment overrides local.settings.json Values."""

    local: dict[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, local_settings: str | Path | None, env: Mapping[str, str] | None = None) -> HostSettings:
        return cls(load_local_settings(local_settings), dict(os.environ if env is None else env))

    @property
    def values(self) -> dict[str, str]:
        return {**self.local, **self.env}

    def get(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None or not value.strip():
            value = self.local.get(name)
        return value.strip() if value and value.strip() else None

    def set(self, name: str, value: str) -> None:
        """A setting the host derives itself (as infra/main.bicep does for each app)."""
        self.env = {**self.env, name: value}

    def resolve(self, text: str, where: str) -> str:
        """Replace ``%NAME%`` references (binding expressions) by app settings; a missing one is an error."""

        def lookup(match: re.Match[str]) -> str:
            value = self.get(match.group(1))
            if value is None:
                raise SettingsError(f"{where} refers to app setting %{match.group(1)}% which is not set")
            return value

        return _APP_SETTING_REF.sub(lookup, text)

    def export(self) -> None:
        """Put the settings into os.environ, where the function code reads them (as the host does)."""
        os.environ.update(self.values)
