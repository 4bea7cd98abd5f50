"""pytest plugin (registered through the ``pytest11`` entry point): a Service Bus emulator for a test run.

Why a session-scoped emulator with purging rather than one emulator per test: starting is cheap, but
SDK clients reconnecting to a new port in every test are not; purging every entity between tests keeps
tests independent at a fraction of the cost. Under pytest-xdist every worker process gets its own
emulator on its own free loopback port, so workers never see each other's messages. Tests that want
more than a purge (entities they create or change, faults, messages left behind while another test
runs) take ``servicebus_namespace``: a namespace of their own in the worker's emulator, a few
milliseconds to create (docs/emulator.md, "Several namespaces").

Configuration (a Config.json in the official emulator's schema; none: an empty namespace)::

    pytest --sbemulator-config infra/servicebus.json
    # or in pytest.ini / pyproject.toml [tool.pytest.ini_options]:
    sbemulator_config = "infra/servicebus.json"     # relative to the ini file

    pytest --sbemulator-clock manual                 # or sbemulator_clock = "manual" in the ini file

Fixtures:

* ``servicebus_emulator`` (session): a :class:`ServiceBusEmulator` with ``connection_string``,
  ``admin_url``, ``admin_connection_string``, ``ca_path``, ``purge()`` / ``reset()`` and, with a
  manual clock, ``now()`` / ``advance(seconds)``.
* ``clean_servicebus_emulator`` (function): the same object, every entity purged and every injected
  fault removed before the test.
* ``servicebus_namespace`` (function): a :class:`ServiceBusNamespace` of its own for the test (the
  session's topology in a fresh namespace of the same emulator, on its own ports with its own key;
  removed after the test): isolation without purging, and tests that may leave anything behind.

Faults: ``servicebus_emulator.faults.add(...)`` or
  ``with servicebus_emulator.inject(operation, effect, entity, count=..., probability=...)``.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .broker.clock import CLOCK_MODES, REAL
from .config import ConfigError, NamespaceConfig, load_config
from .gateway.faults import Faults
from .missing_entity import explain, missing_entity
from .runtime.composition import NamespaceRuntime
from .runtime.emulator import Emulator

CONFIG_OPTION = "--sbemulator-config"
CONFIG_INI = "sbemulator_config"
CLOCK_OPTION = "--sbemulator-clock"
CLOCK_INI = "sbemulator_clock"
_TOPOLOGY = pytest.StashKey[NamespaceConfig | None]()


class ServiceBusNamespace:
    """One namespace of the session's emulator: its addresses, keys and test-support operations. What
    ``servicebus_namespace`` yields (a fresh namespace per test); ``servicebus_emulator`` is the first
    namespace with the emulator-wide operations on top."""

    def __init__(self, emulator: Emulator, runtime: NamespaceRuntime | None = None) -> None:
        self.emulator = emulator
        self._runtime = runtime

    @property
    def runtime(self) -> NamespaceRuntime:
        return self._runtime if self._runtime is not None else self.emulator.namespace()

    @property
    def name(self) -> str:
        return self.runtime.name

    @property
    def connection_string(self) -> str:
        """For ``ServiceBusClient.from_connection_string`` (AMQP on a free loopback port)."""
        return self.runtime.connection_string

    @property
    def admin_url(self) -> str:
        """The HTTPS management endpoint (``https://127.0.0.1:<port>``); the web console is at ``/console/``."""
        url = self.runtime.admin_url
        assert url is not None
        return url

    @property
    def admin_connection_string(self) -> str:
        """For ``ServiceBusAdministrationClient`` (pass ``connection_verify=ca_path``)."""
        value = self.runtime.admin_connection_string
        assert value is not None
        return value

    @property
    def ca_path(self) -> str:
        """The generated CA certificate that the management endpoint's certificate chains to."""
        value = self.runtime.ca_path
        assert value is not None
        return value

    @property
    def key_name(self) -> str:
        return self.runtime.key_name

    @property
    def key(self) -> str:
        return self.runtime.key

    @property
    def _management(self) -> Any:
        """The namespace's management plane (admin.backend.Namespace): the plugin's emulator serves it."""
        admin = self.runtime.admin
        assert admin is not None, "the emulator was started without its management endpoint"
        return admin.namespace

    def entity_paths(self) -> list[str]:
        """Every queue and topic (subscriptions are purged with their topic)."""
        return self.emulator.call(_queues_and_topics, self._management)

    def purge(self, *entities: str) -> int:
        """Remove every message (dead-lettered and scheduled ones too) from the given queues or topics,
        or from all of them when none is given. Returns how many messages were removed."""
        namespace = self._management
        paths = list(entities) or self.entity_paths()
        return self.emulator.call(_purge_all, namespace, paths)

    # --- the clock (``--sbemulator-clock manual``; docs/emulator.md, "A clock you control"): one for
    # the whole emulator, so advancing it from any namespace moves them all.
    @property
    def clock_mode(self) -> str:
        """``"manual"`` or ``"real"``."""
        return self.emulator.clock_mode

    def now(self) -> dt.datetime:
        """The emulator's time (UTC); compute scheduled enqueue times from it under a manual clock."""
        return self.emulator.now()

    def advance(self, seconds: float | dt.timedelta) -> dt.datetime:
        """Move the manual clock forward and run what became due (locks lapse, messages expire,
        scheduled ones become active) before returning the new time."""
        return self.emulator.advance(seconds)

    # --- injected faults (docs/emulator.md, "Fault injection"): this namespace's own
    @property
    def faults(self) -> Faults:
        """The namespace's fault rules: ``add(...)`` (returns the rule), ``remove(rule)``, ``list()``,
        ``clear()``; ``clean_servicebus_emulator`` clears them before each test."""
        return self.runtime.faults

    def inject(self, operation: str, effect: str, entity: str = "*", **options: Any) -> Any:
        """A context manager: ``with servicebus_emulator.inject("send", "server-busy", "orders", count=2)
        as rule:`` the fault applies inside the block only (see ``Faults.add`` for the options)."""
        return self.runtime.faults.injected(operation, effect, entity, **options)

    def reset(self) -> None:
        """Back to the configured topology: entities created at run time are deleted, every message goes."""
        self.emulator.call(self._management.reset_async)


class ServiceBusEmulator(ServiceBusNamespace):
    """What the ``servicebus_emulator`` fixture yields: the emulator's first namespace (addresses, keys
    and test-support operations) and its other namespaces (docs/emulator.md, "Several namespaces")."""

    def __init__(self, emulator: Emulator) -> None:
        super().__init__(emulator)

    def namespace(self, name: str) -> ServiceBusNamespace:
        """A namespace of the config file, or one added with :meth:`add_namespace`."""
        return ServiceBusNamespace(self.emulator, self.emulator.namespace(name))

    def add_namespace(self, name: str, config: Any = None, *, sas_key: str | None = None) -> ServiceBusNamespace:
        """A new namespace on free ports with the session's topology (or ``config``) and a key of its own;
        ``remove_namespace(name)`` frees it. ``servicebus_namespace`` does both around a test."""
        return ServiceBusNamespace(self.emulator, self.emulator.add_namespace(name, config, sas_key=sas_key))

    def remove_namespace(self, name: str) -> None:
        self.emulator.remove_namespace(name)


def _queues_and_topics(namespace: Any) -> list[str]:
    return [info.name for kind in ("queue", "topic") for info in namespace.list_entities(kind)]


async def _purge_all(namespace: Any, paths: list[str]) -> int:
    """On the emulator's loop: each purge in slices, the loop serving the clients between them; returns
    once every slice is committed, so the test thread sees a finished purge."""
    removed = 0
    for path in paths:
        removed += await namespace.purge_async(path)
    return removed


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sbemulator", "Azure Service Bus emulator")
    group.addoption(CONFIG_OPTION, dest="sbemulator_config", default=None, metavar="FILE",
                    help="topology (Config.json schema) for the servicebus_emulator fixture")
    parser.addini(CONFIG_INI, "topology (Config.json schema) for the servicebus_emulator fixture, "
                  "relative to the ini file", default="")
    group.addoption(CLOCK_OPTION, dest="sbemulator_clock", default=None, choices=CLOCK_MODES,
                    help="the emulator's clock: real (default) or manual (moved by servicebus_emulator.advance)")
    parser.addini(CLOCK_INI, "the emulator's clock: real (default) or manual", default="")


def config_path(config: pytest.Config) -> Path | None:
    """The command-line option wins over the ini option; ini paths are relative to the ini file."""
    option = config.getoption("sbemulator_config")
    if option:
        return Path(option).expanduser().resolve()
    value = str(config.getini(CONFIG_INI) or "").strip()
    if not value:
        return None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return (base / value).resolve()


def clock_option(config: pytest.Config) -> str:
    """The command-line option wins over the ini option; real time by default."""
    value = config.getoption("sbemulator_clock") or str(config.getini(CLOCK_INI) or "").strip() or REAL
    if value not in CLOCK_MODES:
        raise pytest.UsageError(f"sbemulator: {CLOCK_INI} must be one of {', '.join(CLOCK_MODES)}, not {value!r}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    """Read the topology once, before any test runs: a missing or invalid file is one usage error for the
    run (every mistake in the file listed), not a failed fixture and a traceback in every test. The same
    for a clock mode the ini file misspells."""
    clock_option(config)
    path = config_path(config)
    if path is None:
        config.stash[_TOPOLOGY] = None
        return
    source = "--sbemulator-config" if config.getoption("sbemulator_config") else f"{CONFIG_INI} (ini)"
    if not path.is_file():
        raise pytest.UsageError(f"sbemulator: the topology file {path} ({source}) does not exist")
    try:
        config.stash[_TOPOLOGY] = load_config(path)
    except ConfigError as exc:
        raise pytest.UsageError(f"sbemulator: invalid topology ({source}): {exc}") from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that failed on an entity missing from the topology gets a section naming the entity and
    the file (the SDK's own error names neither; sbemulator/missing_entity.py)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if call.excinfo is None or not report.failed:
        return
    entity = missing_entity(call.excinfo.value)
    if entity is None:
        return
    path = config_path(item.config)
    message = explain(entity, None if path is None else str(path))
    if hasattr(report.longrepr, "addsection"):
        report.longrepr.addsection("sbemulator: missing entity", message)
    else:
        report.longrepr = f"{message}\n\n{report.longrepr}"


@pytest.fixture(scope="session")
def servicebus_emulator(pytestconfig: pytest.Config) -> Iterator[ServiceBusEmulator]:
    """An in-memory emulator for the whole test session (one per xdist worker)."""
    topology = pytestconfig.stash.get(_TOPOLOGY, None)
    with Emulator(config=topology, in_memory=True, clock=clock_option(pytestconfig)) as emulator:
        yield ServiceBusEmulator(emulator)


_namespace_numbers = itertools.count(1)


@pytest.fixture
def servicebus_namespace(servicebus_emulator: ServiceBusEmulator) -> Iterator[ServiceBusNamespace]:
    """A fresh namespace of its own for this test, in the session's emulator: the session's topology,
    no messages, a key of its own, free AMQP and HTTPS ports; removed after the test. Nothing another
    test does (in this worker or, under pytest-xdist, in another worker with its own emulator) is
    visible in it, so no purge is needed. Costs a few milliseconds (docs/benchmarks.md)."""
    name = f"test-{next(_namespace_numbers)}"
    namespace = servicebus_emulator.add_namespace(name)
    try:
        yield namespace
    finally:
        servicebus_emulator.remove_namespace(name)


@pytest.fixture
def clean_servicebus_emulator(servicebus_emulator: ServiceBusEmulator) -> ServiceBusEmulator:
    """The session's emulator with every entity purged, so this test starts from empty entities."""
    servicebus_emulator.faults.clear()
    servicebus_emulator.purge()
    return servicebus_emulator
