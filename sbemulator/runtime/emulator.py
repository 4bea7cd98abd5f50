"""Embedding: run the emulator on a background thread inside a test or a tool.

``with Emulator(config="infra/servicebus.json", in_memory=True) as emu: emu.connection_string``
binds a free loopback port unless one is given, and stops cleanly on exit.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasRule, SasValidator, own_hosts, parse_rights
from ..broker.clock import Clock, ManualClock, clock_mode, make_clock, to_datetime
from ..broker.core import Broker
from ..config import NamespaceConfig, load_namespaces, parse_namespaces
from ..descriptions import entity_name_problem
from ..gateway.faults import Faults
from ..scheduling import DEFAULT_SLICES
from ..store.base import PROCESS
from ..store.memory import MemoryStore
from ..store.sqlite import DEFAULT_PAGE_WINDOW, SqliteStore
from .namespaces import (
    NamespaceRuntime,
    admin_connection_string,
    connection_string,
    generate_key,
    namespace_data_dir,
    renamed,
)
from .server import AmqpServer
from .snapshot import (
    MAX_SNAPSHOT_BYTES,
    SeededStore,
    check_loads,
    import_snapshot,
    read_snapshot,
    seed_store,
    snapshot_file,
)
from .websocket import WEBSOCKET_PATH, WebSocketListener, upgrade_factory

DEFAULT_DATA_DIR = ".sbemulator"


ConfigSource = str | Path | dict | NamespaceConfig | None


def resolve_config(config: ConfigSource) -> NamespaceConfig:
    """The first namespace of ``config``."""
    return resolve_namespaces(config)[0]


def resolve_namespaces(config: ConfigSource) -> tuple[NamespaceConfig, ...]:
    """Every namespace ``config`` describes (a file or its parsed JSON may hold several)."""
    if config is None:
        return (NamespaceConfig(),)
    if isinstance(config, NamespaceConfig):
        return (config,)
    if isinstance(config, dict):
        return parse_namespaces(config, "<dict>")
    return load_namespaces(config)


def sas_keys(config: NamespaceConfig, sas_key: str | None) -> dict[str, str]:
    return {rule.key_name: rule.key for rule in sas_rules(config, sas_key)}


def sas_rules(config: NamespaceConfig, sas_key: str | None) -> list[SasRule]:
    """The namespace's rules: RootManageSharedAccessKey (every right; ``--sas-key`` sets its key) and
    the config file's ``SasKeys``."""
    rules = {DEFAULT_KEY_NAME: SasRule(DEFAULT_KEY_NAME, sas_key or DEFAULT_KEY)}
    for entry in config.sas_keys:
        rules[entry.key_name] = SasRule(entry.key_name, entry.key, parse_rights(entry.rights))
    if sas_key:
        rules[DEFAULT_KEY_NAME] = SasRule(DEFAULT_KEY_NAME, sas_key, rules[DEFAULT_KEY_NAME].rights)
    return list(rules.values())


def build(config: NamespaceConfig, *, in_memory: bool, data_dir: str | Path | None,
          sas_key: str | None, host: str, port: int, clock: str | Clock | None = None,
          snapshot: str | Path | bytes | dict | None = None, page_window: int | None = None,
          hostnames: Iterable[str] = (), durability: str = PROCESS,
          **server_options: Any) -> tuple[AmqpServer, Any]:
    """Wire store, broker and server together (shared by the CLI and ``Emulator``). ``clock``:
    ``"real"`` (default), ``"manual"`` or a clock callable (broker/clock.py). ``snapshot``: a snapshot
    (a file, its bytes or the parsed object, sbemulator/runtime/snapshot.py) the broker starts from. ``page_window``:
    available messages per durable queue or subscription held in memory (broker/paging.py; None: the
    default). ``durability``: ``"process"`` (default) or ``"full"`` (store/base.py, docs/emulator.md)."""
    broker_clock = make_clock(clock)
    store: Any
    if in_memory:
        store = MemoryStore()
    else:
        directory = Path(data_dir or DEFAULT_DATA_DIR)
        store = SqliteStore(directory / "sbemulator.db",
                            DEFAULT_PAGE_WINDOW if page_window is None else page_window, durability=durability)
    if snapshot is not None:
        parsed = read_snapshot(snapshot)
        check_loads(config, SeededStore(parsed), broker_clock)  # refused whole, before the store has any of it
        store = seed_store(store, parsed, durable=not in_memory)
    broker = Broker(config, store, clock=broker_clock, slices=server_options.get("slices", DEFAULT_SLICES))
    # A token's resource must name one of the emulator's own hosts (auth.py; ``hostnames``: the names
    # clients reach it by besides loopback and ``host``, the CLI's --hostname).
    validator = SasValidator(sas_rules(config, sas_key), entity_rules=broker.authorization_rules,
                             hosts=own_hosts(host, hostnames))
    server = AmqpServer(broker, store, validator, host=host, port=port, clock=broker_clock, **server_options)
    return server, broker


def controls_for(server: AmqpServer) -> Any:
    """What the management plane may control (admin/control.py): the broker's clock, how to move it
    (a manual clock only), the injected faults, and snapshot export and import."""
    from ..admin.control import Controls

    manual = isinstance(server.clock, ManualClock)
    broker = server.broker
    assert isinstance(broker, Broker)  # the runtime built it (an import replaces the broker's state)
    return Controls(clock=server.clock, advance=server.advance_clock if manual else None, faults=server.faults,
                    snapshot=lambda: snapshot_file(broker, broker.config.name),
                    import_snapshot=lambda data: import_snapshot(broker, read_snapshot(data)),
                    max_snapshot_bytes=MAX_SNAPSHOT_BYTES)


async def start_namespace(config: NamespaceConfig, *, key: str, host: str, options: dict[str, Any],
                          admin_like: Any = None, admin_port: int | None = None) -> NamespaceRuntime:
    """Build and start one more namespace on the running loop: ``options`` are :func:`build`'s (the
    emulator's, with this namespace's data directory); its AMQP port is a free one, and so is its HTTPS
    port when ``admin_port`` is not None (0 for a free one), sharing ``admin_like``'s TLS (the first
    namespace's CA and certificate). Nothing is left listening when it fails."""
    faults = Faults(config.name)
    server, broker = build(config, **dict(options, sas_key=key, host=host, port=0, faults=faults,
                                          snapshot=None))
    runtime = NamespaceRuntime(config=config, server=server, broker=broker, host=host, key=key, faults=faults)
    try:
        await server.start()
        if admin_port is not None:
            from ..admin import AdminServer

            runtime.admin = AdminServer(broker, server.validator, host=host, port=admin_port,
                                        like=admin_like, commit=server.commit, jobs=server.jobs,
                                        websocket=upgrade_factory(server), controls=controls_for(server))
            await runtime.admin.start()
            server.serve_http(runtime.admin.http.protocol, runtime.admin.ssl_context)
    except BaseException:
        await runtime.stop()
        raise
    return runtime


def _cancel_remaining_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel and wait for whatever still runs on the loop before it closes, as ``asyncio.run`` does.

    The servers have stopped their own work by now, but asyncio keeps tasks of its own: a connection
    accepted on the HTTPS port whose TLS handshake has not finished is an ``_accept_connection2`` task
    that no server object can reach. Closing the loop under it printed "Task was destroyed but it is
    pending!" (and "Event loop is closed") into the embedding program's output."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=5))
    loop.run_until_complete(loop.shutdown_asyncgens())


@dataclass(frozen=True)
class _AdminOptions:
    """How the HTTPS management endpoint is started (``port`` None: not at all, 0: a free port)."""

    port: int | None
    tls_cert: str | Path | None
    tls_key: str | Path | None
    cert_dir: Path | None
    limits: Any = None  # admin.HttpLimits (None: the defaults)



def _listen(loop: asyncio.AbstractEventLoop, start: Callable[[], Awaitable[Any]], what: str, host: str, port: int,
            hint: str) -> None:
    """Start one listener; a port that cannot be bound is an OSError (as before) whose message names the
    listener and the argument that moves it, as the command line's names its option."""
    try:
        loop.run_until_complete(start())
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise OSError(exc.errno, f"cannot listen on {host}:{port} ({what}): {reason}; {hint}") from None

class Emulator:
    """A running emulator on its own thread and event loop."""

    def __init__(
        self,
        config: str | Path | dict | NamespaceConfig | None = None,
        *,
        in_memory: bool = True,
        data_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        sas_key: str | None = None,
        admin_port: int | None = 0,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        admin_limits: Any = None,
        websocket_port: int | None = None,
        clock: str | Clock | None = None,
        snapshot: str | Path | bytes | dict | None = None,
        **server_options: Any,
    ) -> None:
        """``port``/``admin_port``/``websocket_port`` 0 pick free ports; ``admin_port=None`` serves no HTTPS
        management endpoint; ``websocket_port`` None serves AMQP over WebSockets only on the HTTPS endpoint
        (``wss://``), a number also on a port of its own (``ws://``, what the Python SDK dials in emulator
        mode: point it there with ``custom_endpoint_address=emu.websocket_endpoint``; ``wss://`` too).
        ``admin_limits`` (``sbemulator.admin.HttpLimits``) bounds the management endpoint's requests and
        connections. ``slices`` (a server option, ``sbemulator.scheduling.Slices``) sets how large the slices
        of long work are (tests make them tiny). ``one_port=False`` (a server option) makes the AMQP port
        serve plain AMQP only, instead of AMQP, amqps, HTTP(S) and WebSockets told apart by their first
        bytes. ``clock="manual"`` runs the broker on a clock that moves only through :meth:`advance`
        (docs/emulator.md, "A clock you control"). ``snapshot`` starts it from a snapshot file (or its
        bytes, or the parsed object; docs/emulator.md, "Snapshots"): refused at once (SnapshotError)
        when it cannot be read."""
        # Every namespace of the file (docs/emulator.md, "Several namespaces"): the first is this object's
        # own (connection_string, port, broker, admin), the others get free ports (emu.namespace(name)).
        self.configs = resolve_namespaces(config)
        self.config = self.configs[0]
        self.snapshot = read_snapshot(snapshot) if snapshot is not None else None
        self.clock: Clock = make_clock(clock)
        # Injected faults (docs/emulator.md, "Fault injection"): emu.faults.add(...) from any thread.
        self.faults = Faults(self.config.name)
        self.websocket_port: int | None = websocket_port
        self.websocket: WebSocketListener | None = None
        # --- admin (HTTPS management) wiring: admin_port None disables it, 0 picks a free port.
        self.admin_port: int | None = admin_port
        self.admin: Any = None
        self._admin_options = _AdminOptions(admin_port, tls_cert, tls_key,
                                            None if in_memory else Path(data_dir or DEFAULT_DATA_DIR) / "tls",
                                            admin_limits)
        # --- end admin wiring
        self.host = host
        self.key_name = DEFAULT_KEY_NAME
        self.key = sas_key or DEFAULT_KEY
        self._options = dict(in_memory=in_memory, data_dir=data_dir, sas_key=sas_key, host=host, port=port,
                             clock=self.clock, snapshot=self.snapshot, faults=self.faults, **server_options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.server: AmqpServer | None = None
        self.broker: Any = None
        self.port: int = port
        self._namespaces: dict[str, NamespaceRuntime] = {}  # by lower-case name, in start order
        self._clock_group: list[AmqpServer] = []  # every namespace's server: one advance moves all

    @property
    def connection_string(self) -> str:
        return connection_string(self.host, self.port, self.key_name, self.key)

    # --- admin (HTTPS management) accessors
    @property
    def admin_url(self) -> str | None:
        """``https://127.0.0.1:<admin port>``, or None when the admin endpoint is disabled."""
        return None if self.admin is None else self.admin.url(self.host)

    @property
    def websocket_endpoint(self) -> str | None:
        """``sb://127.0.0.1:<websocket port>``: the SDKs' ``custom_endpoint_address`` for AMQP over
        WebSockets on the emulator's own WebSocket port (None when it has none)."""
        return None if self.websocket is None else f"sb://{self.host}:{self.websocket.port}"

    @property
    def websocket_url(self) -> str | None:
        """``ws://127.0.0.1:<websocket port>/$servicebus/websocket`` (None without a WebSocket port)."""
        return None if self.websocket is None else f"ws://{self.host}:{self.websocket.port}{WEBSOCKET_PATH}"

    @property
    def ca_path(self) -> str | None:
        """The CA certificate to trust (``connection_verify=emu.ca_path``)."""
        return None if self.admin is None else str(self.admin.ca_path)

    @property
    def admin_connection_string(self) -> str | None:
        """The connection string for ServiceBusAdministrationClient: the same keys, the admin port."""
        return None if self.admin is None else admin_connection_string(self.host, self.admin.port, self.key_name,
                                                                       self.key)
    # --- end admin accessors

    # --- the clock (broker/clock.py)
    @property
    def clock_mode(self) -> str:
        """``"manual"`` or ``"real"``."""
        return clock_mode(self.clock)

    def now(self) -> dt.datetime:
        """The emulator's time (UTC): what enqueued times, locks, TTLs and schedules are measured by.
        With a manual clock, compute scheduled enqueue times from this, not from the machine's clock."""
        return to_datetime(self.clock())

    def advance(self, seconds: float | dt.timedelta, timeout: float = 10.0) -> dt.datetime:
        """Move a manual clock forward by ``seconds`` and run every timer that became due (locks lapse,
        messages expire to the dead-letter queue, scheduled messages become active) before returning
        the new time. ``ValueError`` on a real clock or a negative amount."""
        if isinstance(seconds, dt.timedelta):
            seconds = seconds.total_seconds()
        if not isinstance(self.clock, ManualClock):
            raise ValueError("The emulator runs on real time: start it with clock='manual' to move its time.")
        assert self.server is not None
        return to_datetime(self.call(self.server.advance_clock, float(seconds), timeout=timeout))
    # --- end clock

    # --- snapshots (runtime/snapshot.py)
    def import_snapshot(self, snapshot: str | Path | bytes | dict, timeout: float = 60.0) -> dict[str, int]:
        """Replace the running namespace with a snapshot (a file, its bytes or the parsed object): the
        entities and messages a fresh ``Emulator(config=..., snapshot=...)`` would have, and nothing of
        what was there before (docs/emulator.md, "Snapshots"). A snapshot that cannot be read or loaded
        raises SnapshotError naming the problem, and nothing changes. Returns the numbers imported."""
        parsed = read_snapshot(snapshot)
        result: dict[str, int] = self.call(import_snapshot, self.broker, parsed, timeout=timeout)
        return result

    def start(self, timeout: float = 10.0) -> Emulator:
        self._thread = threading.Thread(target=self._run, name="sbemulator", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("sbemulator did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self.server, self.broker = build(self.config, **self._options)
            _listen(loop, self.server.start, "AMQP", self.host, self.server.port,
                    "port=0 picks a free port")
            self.port = self.server.port
            try:
                admin = self._admin_options
                if admin.port is not None:  # admin wiring
                    from ..admin import AdminServer

                    self.admin = AdminServer(self.broker, self.server.validator, host=self.host, port=admin.port,
                                             cert_dir=admin.cert_dir, tls_cert=admin.tls_cert, tls_key=admin.tls_key,
                                             limits=admin.limits,
                                             commit=self.server.commit, jobs=self.server.jobs,
                                             websocket=upgrade_factory(self.server),
                                             controls=controls_for(self.server))
                    _listen(loop, self.admin.start, "HTTPS management", self.host, admin.port,
                            "admin_port=0 picks a free port, admin_port=None serves none")
                    self.admin_port = self.admin.port
                    self.server.serve_http(self.admin.http.protocol, self.admin.ssl_context)
                if self.websocket_port is not None:
                    self.websocket = WebSocketListener(
                        self.server, self.host, self.websocket_port,
                        ssl_context=None if self.admin is None else self.admin.ssl_context)
                    _listen(loop, self.websocket.start, "AMQP over WebSockets", self.host, self.websocket_port,
                            "websocket_port=0 picks a free port, websocket_port=None serves none")
                    self.websocket_port = self.websocket.port
                primary = NamespaceRuntime(config=self.config, server=self.server, broker=self.broker,
                                           host=self.host, key=self.key, faults=self.faults, admin=self.admin)
                self._register(primary)
                for extra in self.configs[1:]:
                    key = sas_keys(extra, self._options["sas_key"])[DEFAULT_KEY_NAME]
                    self._register(loop.run_until_complete(self._start_namespace(extra, key)))
            except BaseException:
                self._shut_down(loop)
                raise
        except BaseException as exc:  # report start-up failures to the caller's thread
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._shut_down(loop)
            _cancel_remaining_tasks(loop)
            loop.close()

    def _shut_down(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop the namespaces added after the first (newest first), then the first one's listeners."""
        for runtime in reversed(list(self._namespaces.values())[1:]):
            loop.run_until_complete(runtime.stop())
        self._namespaces.clear()
        if self.websocket is not None:
            loop.run_until_complete(self.websocket.stop())
        if self.admin is not None:  # admin wiring
            loop.run_until_complete(self.admin.stop())
            self.admin.cleanup()
        if self.server is not None:
            loop.run_until_complete(self.server.stop())
        if self.broker is not None:
            self.broker.close()

    # --- several namespaces (runtime/namespaces.py; docs/emulator.md, "Several namespaces")
    def _register(self, runtime: NamespaceRuntime) -> None:
        runtime.join_clock(self._clock_group)
        self._namespaces[runtime.name.lower()] = runtime

    def _start_namespace(self, config: NamespaceConfig, key: str) -> Any:
        options = {k: v for k, v in self._options.items() if k != "faults"}
        if not self._options["in_memory"]:
            options["data_dir"] = namespace_data_dir(self._options["data_dir"] or DEFAULT_DATA_DIR, config.name)
        return start_namespace(config, key=key, host=self.host, options=options, admin_like=self.admin,
                               admin_port=None if self.admin is None else 0)

    @property
    def namespaces(self) -> tuple[NamespaceRuntime, ...]:
        """Every running namespace, the first (this object's own) first."""
        return tuple(self._namespaces.values())

    def namespace(self, name: str | None = None) -> NamespaceRuntime:
        """A running namespace by name (case-insensitive; None: the first): its ``connection_string``,
        ``admin_connection_string``, ``ca_path``, ``broker``, ``faults``. KeyError when there is none."""
        if name is None:
            return next(iter(self._namespaces.values()))
        try:
            return self._namespaces[name.lower()]
        except KeyError:
            known = ", ".join(runtime.name for runtime in self._namespaces.values())
            raise KeyError(f"no namespace {name!r} in this emulator (it has: {known})") from None

    def add_namespace(self, name: str, config: ConfigSource = None, *, sas_key: str | None = None,
                      timeout: float = 10.0) -> NamespaceRuntime:
        """Start one more namespace while the emulator runs, on free AMQP and HTTPS ports: the entities
        of ``config`` (a file, its JSON or a NamespaceConfig; its first namespace) or, by default, those
        the emulator's first namespace was configured with, under the name ``name``. Its
        RootManageSharedAccessKey gets ``sas_key`` or a freshly generated key, so no other namespace's
        connection string opens it. Durable emulators keep it in ``<data dir>/namespaces/<name>/``.
        ValueError for a name in use or not a valid name."""
        problem = entity_name_problem(name, child=False)
        if problem is not None:
            raise ValueError(f"invalid namespace name {name!r}: {problem}")
        base = self.config if config is None else resolve_config(config)
        namespace_config = renamed(base, name)
        key = sas_key or generate_key()

        async def start() -> NamespaceRuntime:
            if name.lower() in self._namespaces:  # checked on the loop: two callers cannot both add it
                raise ValueError(f"the emulator already has a namespace named {name!r}")
            runtime = await self._start_namespace(namespace_config, key)
            self._register(runtime)
            return runtime

        return self._on_loop(start(), timeout)

    def remove_namespace(self, name: str, timeout: float = 10.0) -> None:
        """Stop a namespace added after the first and free what it held (its ports, broker and memory;
        a durable one's files stay in the data directory and open again when it is added again)."""
        async def stop() -> None:
            runtime = self.namespace(name)
            if runtime.server is self.server:
                raise ValueError("the emulator's first namespace cannot be removed: stop the emulator")
            del self._namespaces[name.lower()]
            await runtime.stop()

        self._on_loop(stop(), timeout)

    def _on_loop(self, coroutine: Any, timeout: float) -> Any:
        if self._loop is None:
            coroutine.close()
            raise RuntimeError("the emulator is not running")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)
    # --- end several namespaces

    def call(self, fn: Any, *args: Any, timeout: float = 10.0) -> Any:
        """Run ``fn(*args)`` on the emulator's loop (the broker is not thread-safe) and return its result
        (awaited there when it is awaitable: work done in slices, such as a purge, finishes first)."""
        assert self._loop is not None
        server = self.server
        assert server is not None, "the emulator is not running"

        async def run() -> Any:
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            server.commit()
            for runtime in list(self._namespaces.values()):  # fn may have changed any namespace
                if runtime.server is not server:
                    runtime.server.commit()
            return result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._loop = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
