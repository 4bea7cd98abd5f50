"""Typed settings read from the environment (app settings in Azure, local.settings.json locally).

Every role reads only what it needs, so a sender app does not have to be given Table Storage
settings; a missing or malformed setting raises :class:`SettingsError` that names the setting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from shared.topology import SERVICE_BUS_CONNECTION, TABLE_CONNECTION

ROLES = ("sender", "consumer-high", "consumer-low", "leveler", "ordered")
#: PRIORITY_STRATEGY: how the consumer apps share the two priorities (docs/functions.md, "Strategies").
#: ``separate``: a pool per priority (the default); ``shared``: one app serves both subscriptions;
#: ``strict``: one app, low waits while high has messages; ``aging``: separate pools, and a low message
#: still waiting after AGING_AFTER_SECONDS is promoted to high; ``fifo``: one queue, no priority.
STRATEGIES = ("separate", "shared", "strict", "aging", "fifo")
DEFAULT_STRATEGY = "separate"
DEFAULT_SENDER_SCHEDULE = "0,30 * * * * *"


class SettingsError(ValueError):
    """A required setting is missing or has a value the app cannot use."""


@dataclass(frozen=True)
class ServiceBusSettings:
    """How to reach the namespace: a connection string (emulators) or a namespace + Azure AD."""

    connection_string: str | None = None
    fully_qualified_namespace: str | None = None

    @property
    def uses_identity(self) -> bool:
        return self.connection_string is None


@dataclass(frozen=True)
class TableSettings:
    """How to reach Table Storage and which table receives the leveled writes."""

    table_name: str
    connection_string: str | None = None
    table_service_uri: str | None = None

    @property
    def uses_identity(self) -> bool:
        return self.connection_string is None


@dataclass(frozen=True)
class AppSettings:
    """Behaviour knobs of the roles; all have defaults so a bare app starts."""

    roles: tuple[str, ...] = ROLES
    sender_schedule: str = DEFAULT_SENDER_SCHEDULE
    sender_batch_size: int = 10
    consumer_work_ms_high: int = 0
    consumer_work_ms_low: int = 0
    leveler_max_writes_per_second: float = 50.0
    #: where the leveler instances share that cap (shared/write_budget.py): one clock entity
    leveler_budget_table: str = "writebudget"
    ordered_table: str = "orderedwrites"
    ordered_work_ms: int = 0
    appinsights_connection_string: str | None = None
    priority_strategy: str = DEFAULT_STRATEGY
    #: ``aging``: seconds after which a waiting low-priority message is promoted to high
    aging_after_seconds: float = 30.0
    #: ``strict``: the longest a low-priority invocation waits for high to be empty before it gives the
    #: message back (under the 5-minute maxAutoLockRenewalDuration, so the lock never lapses meanwhile)
    strict_max_hold_seconds: float = 240.0
    #: the target end-to-end latency per priority (the pattern's "within 10 seconds" for high)
    slo_high_seconds: float = 10.0
    slo_low_seconds: float = 120.0

    def slo_seconds(self, priority: str) -> float:
        return self.slo_high_seconds if priority == "High" else self.slo_low_seconds


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}")
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}")
    if not value > 0:
        raise SettingsError(f"{name} must be > 0, got {value}")
    return value


def parse_strategy(raw: str | None) -> str:
    """``PRIORITY_STRATEGY``: one of :data:`STRATEGIES`; unset or empty means ``separate``."""
    if raw is None or not raw.strip():
        return DEFAULT_STRATEGY
    value = raw.strip().lower()
    if value not in STRATEGIES:
        raise SettingsError(f"PRIORITY_STRATEGY must be one of {list(STRATEGIES)}, got {raw!r}")
    return value


def parse_roles(raw: str | None) -> tuple[str, ...]:
    """``APP_ROLES``: comma-separated role names; empty or unset means every role."""
    if raw is None or not raw.strip():
        return ROLES
    roles = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    unknown = [role for role in roles if role not in ROLES]
    if unknown:
        raise SettingsError(f"APP_ROLES has unknown role(s) {unknown}; known roles: {list(ROLES)}")
    return roles


def load_service_bus(env: Mapping[str, str] | None = None) -> ServiceBusSettings:
    env = _env(env)
    conn = _get(env, SERVICE_BUS_CONNECTION)
    fqns = _get(env, f"{SERVICE_BUS_CONNECTION}__fullyQualifiedNamespace")
    if conn:
        return ServiceBusSettings(connection_string=conn)
    if fqns:
        return ServiceBusSettings(fully_qualified_namespace=fqns)
    raise SettingsError(
        f"Service Bus is not configured: set {SERVICE_BUS_CONNECTION} (a connection string) or "
        f"{SERVICE_BUS_CONNECTION}__fullyQualifiedNamespace (with a managed identity)"
    )


def _table_name(env: Mapping[str, str], name: str, default: str) -> str:
    table = _get(env, name) or default
    if not (3 <= len(table) <= 63 and table.isalnum() and table[0].isalpha()):
        raise SettingsError(f"{name} must be 3-63 letters/digits starting with a letter, got {table!r}")
    return table


def load_table(env: Mapping[str, str] | None = None) -> TableSettings:
    env = _env(env)
    table = _table_name(env, "RESULTS_TABLE", "results")
    conn = _get(env, TABLE_CONNECTION)
    uri = _get(env, f"{TABLE_CONNECTION}__tableServiceUri")
    if conn:
        return TableSettings(table_name=table, connection_string=conn)
    if uri:
        return TableSettings(table_name=table, table_service_uri=uri)
    raise SettingsError(
        f"Table Storage is not configured: set {TABLE_CONNECTION} (a connection string) or "
        f"{TABLE_CONNECTION}__tableServiceUri (with a managed identity)"
    )


def load_app(env: Mapping[str, str] | None = None) -> AppSettings:
    env = _env(env)
    return AppSettings(
        roles=parse_roles(_get(env, "APP_ROLES")),
        sender_schedule=_get(env, "SENDER_SCHEDULE") or DEFAULT_SENDER_SCHEDULE,
        sender_batch_size=_int(env, "SENDER_BATCH_SIZE", 10, minimum=0),
        consumer_work_ms_high=_int(env, "CONSUMER_WORK_MS_HIGH", 0, minimum=0),
        consumer_work_ms_low=_int(env, "CONSUMER_WORK_MS_LOW", 0, minimum=0),
        leveler_max_writes_per_second=_float(env, "LEVELER_MAX_WRITES_PER_SECOND", 50.0),
        leveler_budget_table=_table_name(env, "LEVELER_BUDGET_TABLE", "writebudget"),
        ordered_table=_table_name(env, "ORDERED_TABLE", "orderedwrites"),
        ordered_work_ms=_int(env, "ORDERED_WORK_MS", 0, minimum=0),
        appinsights_connection_string=_get(env, "APPLICATIONINSIGHTS_CONNECTION_STRING"),
        priority_strategy=parse_strategy(_get(env, "PRIORITY_STRATEGY")),
        aging_after_seconds=_float(env, "AGING_AFTER_SECONDS", 30.0),
        strict_max_hold_seconds=_float(env, "STRICT_MAX_HOLD_SECONDS", 240.0),
        slo_high_seconds=_float(env, "SLO_HIGH_SECONDS", 10.0),
        slo_low_seconds=_float(env, "SLO_LOW_SECONDS", 120.0),
    )
