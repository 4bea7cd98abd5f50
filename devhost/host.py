"""The host: settings, local services, discovery, scale-out, listeners; started and stopped as one.

``Host(HostOptions(...))`` is a context manager. Start-up fails fast with a :class:`SettingsError`
that names a missing or invalid setting, or :class:`HostError` for an unreachable endpoint, before
any function runs.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import azure.functions as func

from devhost.bindings import ServiceBusOutputs, TableOutputs
from devhost.config import HOST_OVERRIDE_PREFIX, HostSettings, ServiceBusOptions, load_host_json
from devhost.discovery import SERVICE_BUS_TRIGGER, TIMER_TRIGGER, FunctionSpec, discover
from devhost.instances import InstanceId, InstanceScope
from devhost.listeners import Listener, Outputs, ServiceBusListener, TimerListener
from devhost.local_services import (
    LocalServices,
    Unreachable,
    accepts_connections,
    emulator_admin_connection_string,
    is_local_service_bus,
    is_local_storage,
    service_bus_endpoint,
    table_endpoint,
    wait_for_port,
)
from devhost.scale import RoleScale, load_role_scales
from devhost.scale_controller import ScaleController, ScaleOptions
from devhost.schedule import parse_schedule
from devhost.stats import InvocationStats
from shared.settings import SettingsError, parse_roles

log = logging.getLogger("devhost")
ROOT = Path(__file__).resolve().parents[1]
SERVICE_BUS = "ServiceBusConnection"
#: What a Service Bus binding without ``connection`` uses ("Azure Service Bus trigger for Azure Functions").
DEFAULT_SERVICE_BUS = "AzureWebJobsServiceBus"
TABLE = "TableStorageConnection"
#: Packages whose code runs inside the functions (their process-wide caches become per instance).
NOT_APP_CODE = ("devhost", "sbemulator", "tests", "bench")
#: Roles that write to Table Storage (``TableStorageConnection``).
TABLE_ROLES = {"leveler", "ordered"}


def _has_service_bus(settings: HostSettings, name: str) -> bool:
    """A connection string, or the identity-based ``<name>__fullyQualifiedNamespace`` form."""
    return bool(settings.get(name) or settings.get(f"{name}__fullyQualifiedNamespace"))


class HostError(RuntimeError):
    """The host cannot run: an endpoint is unreachable or the app cannot be loaded."""


@dataclass
class HostOptions:
    roles: tuple[str, ...] | None = None  # None: the APP_ROLES setting (empty: every role)
    settings_file: Path | None = None  # None: local.settings.json in the app root, if present
    use_local_settings: bool = True  # False: only env + overrides (benchmarks want a known setup)
    app_root: Path = ROOT
    host_json: Path | None = None
    bicep: Path | None = None
    topology: Path | None = None  # what the embedded emulator serves
    instances: dict[str, int] = field(default_factory=dict)  # fixed pools: ROLE -> N instances for the run
    scale: ScaleOptions | None = None  # None: every role runs its whole limit (or `instances`) from the start
    overrides: dict[str, str] = field(default_factory=dict)  # app settings that win over everything
    extra_apps: dict[str, tuple[func.FunctionApp, RoleScale]] = field(default_factory=dict)
    connect_timeout: float = 5.0
    env: Mapping[str, str] | None = None  # None: os.environ
    # the management endpoint of an emulator the caller started (connection string with its port, CA file)
    admin_connection: tuple[str, str | None] | None = None

    def path(self, value: Path | None, default: str) -> Path:
        return Path(value) if value is not None else self.app_root / default


@dataclass
class RolePlan:
    role: str
    instances: int  # what runs from the start without the scale controller (the limit, or a fixed pool)
    options: ServiceBusOptions
    specs: list[FunctionSpec]
    max_instances: int = 1  # maximumInstanceCount (or the fixed pool size)
    always_ready: int = 0


@dataclass
class RunningInstance:
    """One instance: the listeners of its app's functions and its output bindings."""

    instance: InstanceId
    listeners: list[Listener]
    outputs: Outputs

    def signal(self) -> None:
        for listener in self.listeners:
            listener.stop()


def _table_address(connection: str | None) -> str:
    """Where a Table Storage connection string points, for a log line (never its key)."""
    try:
        return "http://{}:{}".format(*table_endpoint(connection, None))
    except Exception:  # not a connection string table_endpoint understands: say no more than that
        return "(the configured account)"


class Host:
    def __init__(self, options: HostOptions | None = None) -> None:
        self.options = options or HostOptions()
        self.stats = InvocationStats()
        self.services = LocalServices(self.options.app_root)
        self.settings: HostSettings | None = None
        self.plans: dict[str, RolePlan] = {}
        self.listeners: list[Listener] = []
        self.outputs: list[Outputs] = []
        self.scaler: ScaleController | None = None
        self._instances_lock = threading.RLock()
        self.scope: InstanceScope | None = None
        self._saved_env: dict[str, str | None] = {}
        self.started_at: float | None = None
        # An emulator the user started: its management connection string and CA (from its ready file).
        self.external_admin: tuple[str, str | None] | None = None
        self.no_management = False  # a local emulator that announced no management endpoint

    # -- settings ------------------------------------------------------------------------------------
    def _load_settings(self) -> HostSettings:
        opts = self.options
        settings_file = opts.settings_file
        if not opts.use_local_settings:
            settings_file = None
        elif settings_file is None and (opts.app_root / "local.settings.json").exists():
            settings_file = opts.app_root / "local.settings.json"
        if settings_file is not None and not Path(settings_file).exists():
            raise SettingsError(f"settings file {settings_file} does not exist")
        settings = HostSettings.load(settings_file, opts.env)
        for name, value in opts.overrides.items():
            settings.set(name, value)
        return settings

    def _roles(self, settings: HostSettings) -> tuple[str, ...]:
        if self.options.roles is not None:  # () runs only the extra apps
            return parse_roles(",".join(self.options.roles)) if self.options.roles else ()
        return parse_roles(settings.get("APP_ROLES"))

    def _ensure_connections(self, settings: HostSettings, roles: tuple[str, ...]) -> None:
        """Start sbemulator/Azurite for what is not configured; probe what is (bounded timeout)."""
        needs_service_bus = any(binding["type"] in (SERVICE_BUS_TRIGGER, "serviceBus")
                                for plan in self.plans.values() for spec in plan.specs
                                for binding in (spec.trigger, *spec.outputs)) or bool(roles)
        if not needs_service_bus:
            return
        configured = settings.get(SERVICE_BUS)
        if not (configured or settings.get(f"{SERVICE_BUS}__fullyQualifiedNamespace")):
            self._start_service_bus(settings, f"no {SERVICE_BUS} configured")
        elif configured and is_local_service_bus(configured) and accepts_connections(
                *service_bus_endpoint(configured, None)):
            self._use_running_emulator(configured)
        elif is_local_service_bus(configured):
            # the example settings (local.settings.json.example) name the emulator's default port: with
            # nothing there, stand one in on a free port, as `make demo` does, rather than fail
            self._start_service_bus(settings, "{} names a local emulator at {}:{} where nothing listens".format(
                SERVICE_BUS, *service_bus_endpoint(configured, None)), replacing=configured)
        needs_table = bool(TABLE_ROLES & set(roles))
        configured = settings.get(TABLE)
        if needs_table and not (configured or settings.get(f"{TABLE}__tableServiceUri")):
            log.info("no %s configured: starting Azurite on loopback", TABLE)
            settings.set(TABLE, self.services.start_azurite())
            log.info("Azurite started: %s", _table_address(settings.get(TABLE)))
        elif needs_table and is_local_storage(configured) and not accepts_connections(
                *table_endpoint(configured, None)):
            log.info("%s names Azurite at %s:%d where nothing listens: starting Azurite on free loopback ports "
                     "for this run (in memory)", TABLE, *table_endpoint(configured, None))
            started = self.services.start_azurite()
            log.info("Azurite started: %s", _table_address(started))
            for name in (TABLE, "AzureWebJobsStorage"):  # the host's own storage points at the same Azurite
                if settings.get(name) == configured:
                    settings.set(name, started)
        elif needs_table:
            log.info("using Table Storage at %s", _table_address(configured))
        timeout = self.options.connect_timeout
        host, port = service_bus_endpoint(settings.get(SERVICE_BUS),
                                          settings.get(f"{SERVICE_BUS}__fullyQualifiedNamespace"))
        try:
            wait_for_port(host, port, timeout)
        except Unreachable as exc:
            raise HostError(f"cannot reach the Service Bus namespace in {SERVICE_BUS}: {exc}") from None
        if needs_table:
            host, port = table_endpoint(settings.get(TABLE), settings.get(f"{TABLE}__tableServiceUri"))
            try:
                wait_for_port(host, port, timeout)
            except Unreachable as exc:
                raise HostError(f"cannot reach Table Storage in {TABLE}: {exc}") from None

    def _use_running_emulator(self, configured: str) -> None:
        """An emulator a user started listens where the settings point: find its management endpoint
        the way it announces it (the ready file sbemulator writes, sbemulator/runtime/ready.py), not by
        guessing ports, and say what is used."""
        from sbemulator.runtime.ready import read_ready

        host, port = service_bus_endpoint(configured, None)
        info = read_ready(port)
        if info is not None and info.get("admin_url"):
            self.external_admin = emulator_admin_connection_string(configured, str(info["admin_url"])), \
                info.get("ca_path")
            log.info("using the emulator at %s:%d (sbemulator %s; management %s, console %s)", host, port,
                     info.get("version"), info["admin_url"], info.get("console_url"))
        else:  # another emulator (the official one), or sbemulator with --no-admin: no port is guessed
            self.external_admin = None
            self.no_management = True
            log.info("using the emulator at %s:%d (it announced no management endpoint: backlogs are "
                     "counted by peeking)", host, port)

    def _start_service_bus(self, settings: HostSettings, why: str, replacing: str | None = None) -> None:
        topology = self.options.path(self.options.topology, "infra/servicebus.json")
        log.info("%s: starting sbemulator (in memory, free loopback port) on %s for this run", why, topology)
        started = self.services.start_service_bus(topology)
        log.info("sbemulator started: %s (management %s, console %s/console/, CA certificate %s)",
                 started.split(";")[0], self.services.admin_url, self.services.admin_url, self.services.admin_ca)
        settings.set(SERVICE_BUS, started)
        if not _has_service_bus(settings, DEFAULT_SERVICE_BUS) or (
                replacing is not None and settings.get(DEFAULT_SERVICE_BUS) == replacing):
            settings.set(DEFAULT_SERVICE_BUS, started)  # for bindings that name no connection

    # -- discovery and scale -------------------------------------------------------------------------
    def _apps(self, roles: tuple[str, ...]) -> dict[str, func.FunctionApp]:
        root = str(self.options.app_root)
        if root not in sys.path:
            sys.path.insert(0, root)
        try:
            function_app = importlib.import_module("function_app")
        except Exception as exc:
            raise HostError(f"cannot import function_app.py from {root}: {exc!r}") from exc
        strategy = self.settings.get("PRIORITY_STRATEGY") if self.settings is not None else None
        apps = {role: function_app.create_app([role], strategy=strategy or "") for role in roles}
        apps.update({role: app for role, (app, _) in self.options.extra_apps.items()})
        return apps

    def _plan(self, settings: HostSettings, roles: tuple[str, ...]) -> dict[str, RolePlan]:
        host_json = load_host_json(self.options.path(self.options.host_json, "host.json"))
        scales = load_role_scales(self.options.path(self.options.bicep, "infra/main.bicep"))
        scales.update({role: scale for role, (_, scale) in self.options.extra_apps.items()})
        explicit = {k: v for k, v in settings.values.items() if k.startswith(HOST_OVERRIDE_PREFIX)}
        plans = {}
        for role, app in self._apps(roles).items():
            if role not in scales:
                raise SettingsError(f"role {role!r} has no entry in the functionApps of infra/main.bicep")
            scale = scales[role]
            instances = self.options.instances.get(role, scale.max_instances)
            if instances < 1:
                raise SettingsError(f"instances of {role} must be >= 1, got {instances}")
            # host.json, then the per-role app settings the Bicep sets, then an explicit setting
            per_role = {f"{HOST_OVERRIDE_PREFIX}maxConcurrentCalls": str(scale.max_concurrent_calls)}
            if scale.max_concurrent_sessions is not None:
                per_role[f"{HOST_OVERRIDE_PREFIX}maxConcurrentSessions"] = str(scale.max_concurrent_sessions)
            options = host_json.service_bus.with_overrides(per_role).with_overrides(explicit)
            specs = discover(app, role)
            if not specs:  # e.g. consumer-low under PRIORITY_STRATEGY=shared: its app has nothing to run
                log.info("%s registers no function (PRIORITY_STRATEGY=%s): not run", role,
                         settings.get("PRIORITY_STRATEGY") or "separate")
                continue
            plans[role] = RolePlan(role, instances, options, specs, max_instances=instances,
                                   always_ready=scale.always_ready)
        return plans

    def _check_settings(self, settings: HostSettings) -> None:
        """Resolve every binding expression now, so a gap fails before anything starts."""
        from shared.settings import load_app

        load_app(settings.values)
        for plan in self.plans.values():
            for spec in plan.specs:
                if spec.trigger_type == TIMER_TRIGGER:
                    where = f"function {spec.name}"
                    schedule = settings.resolve(str(spec.trigger["schedule"]), f"{where} (schedule)")
                    try:
                        parse_schedule(schedule, datetime.now(UTC))
                    except ValueError as exc:
                        raise SettingsError(f"{where}: {exc}") from None

    def _check_connections(self, settings: HostSettings) -> None:
        """Every connection a trigger or output binding names must be set (after local services)."""
        for plan in self.plans.values():
            for spec in plan.specs:
                for binding in (spec.trigger, *spec.outputs):
                    name = binding.get("connection")
                    if binding["type"] in (SERVICE_BUS_TRIGGER, "serviceBus"):
                        name = name or DEFAULT_SERVICE_BUS
                        if not _has_service_bus(settings, name):
                            raise SettingsError(f"function {spec.name}: connection setting {name!r} is not set "
                                                f"(nor {name}__fullyQualifiedNamespace)")
                    elif binding["type"] == "table" and not settings.get(name or "AzureWebJobsStorage"):
                        raise SettingsError(f"function {spec.name}: connection setting "
                                            f"{name or 'AzureWebJobsStorage'!r} is not set")

    # -- clients -------------------------------------------------------------------------------------
    def service_bus_client(self, connection: str = SERVICE_BUS, retry_total: int = 3) -> Any:
        from shared.clients import service_bus_client
        from shared.settings import ServiceBusSettings

        assert self.settings is not None
        conn = self.settings.get(connection)
        settings = (ServiceBusSettings(connection_string=conn) if conn else
                    ServiceBusSettings(fully_qualified_namespace=self.settings.get(
                        f"{connection}__fullyQualifiedNamespace")))
        return service_bus_client(settings, retry_total=retry_total, retry_backoff_factor=0.5)

    def admin_client(self) -> Any:
        """ServiceBusAdministrationClient for runtime properties, or None when it cannot be built."""
        from azure.servicebus.management import ServiceBusAdministrationClient

        assert self.settings is not None
        if self.options.admin_connection is not None:
            given, ca = self.options.admin_connection
            return ServiceBusAdministrationClient.from_connection_string(
                given, connection_verify=ca or True, connection_timeout=3, read_timeout=5)
        if self.no_management:
            return None
        if self.external_admin is not None:  # an emulator the user started, as its ready file says
            given, ca = self.external_admin
            return ServiceBusAdministrationClient.from_connection_string(
                given, connection_verify=ca or True, connection_timeout=3, read_timeout=5)
        if self.services.service_bus_connection:  # the embedded emulator
            embedded = self.services.admin_connection_string
            if embedded is None:
                return None
            return ServiceBusAdministrationClient.from_connection_string(
                embedded, connection_verify=self.services.admin_ca, connection_timeout=3, read_timeout=5)
        conn = self.settings.get(SERVICE_BUS)
        if conn:
            return ServiceBusAdministrationClient.from_connection_string(conn, connection_timeout=5)
        namespace = self.settings.get(f"{SERVICE_BUS}__fullyQualifiedNamespace")
        if not namespace:
            return None
        from shared.clients import default_credential

        return ServiceBusAdministrationClient(namespace, default_credential())

    def table_client(self, table_name: str, connection: str = TABLE) -> Any:
        from shared.clients import table_service_client
        from shared.settings import load_table

        assert self.settings is not None
        values = {**self.settings.values, "RESULTS_TABLE": table_name}
        if connection != TABLE:
            values[TABLE] = self.settings.get(connection) or ""
        return table_service_client(load_table(values)).get_table_client(table_name)

    def _table_service(self, connection: str) -> Any:
        from azure.data.tables import TableServiceClient

        assert self.settings is not None
        return TableServiceClient.from_connection_string(self.settings.get(connection) or "")

    # -- lifecycle -----------------------------------------------------------------------------------
    def _export(self, settings: HostSettings) -> None:
        for name, value in settings.values.items():
            if os.environ.get(name) != value:
                self._saved_env.setdefault(name, os.environ.get(name))
                os.environ[name] = value

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env.clear()

    def _app_modules(self) -> list[ModuleType]:
        root = self.options.app_root.resolve()
        modules = []
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if not path or module.__name__.split(".")[0] in NOT_APP_CODE:
                continue
            try:
                Path(path).resolve().relative_to(root)
            except ValueError:
                continue
            modules.append(module)
        return modules

    def start(self) -> Host:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        settings = self._load_settings()
        self.settings = settings
        roles = self._roles(settings)
        self.plans = self._plan(settings, roles)
        self._check_settings(settings)
        self._ensure_connections(settings, roles)
        self._check_connections(settings)
        self._export(settings)
        self.scope = InstanceScope(self._app_modules())
        self.scope.install()
        if self.options.scale is None:
            for plan in self.plans.values():
                for index in range(plan.instances):
                    self._start_instance(plan, InstanceId(plan.role, index))
        else:
            self._start_scale_controller(self.options.scale)
        self.started_at = time.monotonic()
        log.info("running %s", ", ".join(
            f"{p.role} {self._describe_scale(p)} ({', '.join(s.name for s in p.specs)}; "
            f"maxConcurrentCalls={p.options.max_concurrent_calls})" for p in self.plans.values()))
        self._log_next_timers(settings)

    def _log_next_timers(self, settings: HostSettings) -> None:
        """Say when each timer fires first: until then nothing happens, and silence reads as a hang."""
        now = datetime.now(UTC)
        for plan in self.plans.values():
            for spec in plan.specs:
                if spec.trigger_type != TIMER_TRIGGER:
                    continue
                schedule = settings.resolve(str(spec.trigger["schedule"]), f"function {spec.name} (schedule)")
                first = parse_schedule(schedule, now).next_after(now)
                log.info("%s: first run at %s UTC, in %.0f s (schedule %r); nothing is sent before it",
                         spec.name, first.strftime("%H:%M:%S"), (first - now).total_seconds(), schedule)

    def _describe_scale(self, plan: RolePlan) -> str:
        if self.scaler is None or plan.role in self.options.instances:
            return f"x{plan.instances}"
        return f"0..{plan.max_instances} (scale controller)"

    def _start_scale_controller(self, scale: ScaleOptions) -> None:
        from devhost.trigger_backlog import TriggerBacklog

        backlog = TriggerBacklog(self.admin_client, self.service_bus_client)
        self.scaler = ScaleController(
            self.plans, scale, backlog, self._start_instance, self.stop_instance,
            fixed={role: n for role, n in self.options.instances.items() if role in self.plans},
            always_ready={role: plan.always_ready for role, plan in self.plans.items()},
            executions=self.stats.executions,
        )
        self.scaler.start()

    def stop_instance(self, running: RunningInstance, timeout: float = 15.0) -> None:
        """Stop one instance: no new messages, in-flight invocations finish, outputs close.

        Its per-instance resources are forgotten, so an instance started later with the same index
        starts cold, as a new worker process would.
        """
        running.signal()
        deadline = time.monotonic() + timeout
        for listener in running.listeners:
            listener.join(max(0.0, deadline - time.monotonic()))
        running.outputs.close()
        with self._instances_lock:
            self.listeners[:] = [x for x in self.listeners if x not in running.listeners]
            if running.outputs in self.outputs:
                self.outputs.remove(running.outputs)
        if self.scope is not None:
            self.scope.forget(running.instance)

    def _start_instance(self, plan: RolePlan, instance: InstanceId) -> RunningInstance:
        assert self.settings is not None
        outputs = Outputs(
            ServiceBusOutputs(self.service_bus_client, default_connection=DEFAULT_SERVICE_BUS),
            TableOutputs(self._table_service),
        )
        running = RunningInstance(instance, [], outputs)
        with self._instances_lock:
            self.outputs.append(outputs)
        for spec in plan.specs:
            listener: Listener
            if spec.trigger_type == TIMER_TRIGGER:
                if instance.index != 0:
                    continue  # timers are singletons across the instances of an app
                expression = self.settings.resolve(str(spec.trigger["schedule"]), f"function {spec.name}")
                listener = TimerListener(spec, instance, self.stats,
                                         parse_schedule(expression, datetime.now(UTC)), outputs)
            else:
                connection = spec.trigger.get("connection") or DEFAULT_SERVICE_BUS
                # A session slot asks for the next available session in its own loop; the SDK's retries
                # would hold each "no session has messages" answer back for many seconds (and stop()).
                retries = 0 if spec.trigger.get("isSessionsEnabled") else 3
                listener = ServiceBusListener(spec, instance, self.stats, plan.options,
                                              functools.partial(self.service_bus_client, connection, retries), outputs)
            with self._instances_lock:
                self.listeners.append(listener)
            running.listeners.append(listener)
            listener.start()
        return running

    def stop_timers(self) -> None:
        """Stop every timer (a drain: no new work is made while the backlog empties); the rest runs on."""
        with self._instances_lock:
            timers = [listener for listener in self.listeners if isinstance(listener, TimerListener)]
        for timer in timers:
            timer.stop()

    def wait_connected(self, timeout: float = 30.0) -> bool:
        """True once every Service Bus listener has an open receiver."""
        deadline = time.monotonic() + timeout
        if self.scaler is not None and not self.scaler.wait_live(timeout):
            return False
        with self._instances_lock:
            listeners = list(self.listeners)
        for listener in listeners:
            remaining = max(0.0, deadline - time.monotonic())
            if isinstance(listener, ServiceBusListener) and not listener.connected.wait(remaining):
                return False
        return True

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the functions, restore the environment, stop the local services."""
        self.stop_functions(timeout)
        self._restore_env()
        self.services.stop()

    def stop_functions(self, timeout: float = 15.0) -> None:
        """Stop every listener (in-flight invocations finish first); local services keep running."""
        if self.scaler is not None:
            self.scaler.stop(timeout)
        for listener in self.listeners:
            listener.stop()
        deadline = time.monotonic() + timeout
        for listener in self.listeners:
            listener.join(max(0.0, deadline - time.monotonic()))
        for outputs in self.outputs:
            outputs.close()
        self.listeners.clear()
        self.outputs.clear()
        if self.scope is not None:
            self.scope.uninstall()
            self.scope = None

    def run(self, duration: float | None) -> None:
        """Block for ``duration`` seconds (None: until Ctrl-C)."""
        try:
            if duration is None:
                while True:
                    time.sleep(3600)
            time.sleep(max(0.0, duration))
        except KeyboardInterrupt:
            log.info("devhost: interrupted")

    def instance_values(self, qualified: str) -> dict[InstanceId | None, Any]:
        """What a process-wide factory (e.g. ``functions.runtime.leveling_worker``) made per instance."""
        factory = self.scope.factory(qualified) if self.scope else None
        return factory.values() if factory else {}

    def __enter__(self) -> Host:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
