"""The one composition root of a namespace: its store, broker, SAS rules and listeners, from typed options.

``python -m sbemulator``, ``Emulator`` and every namespace added to either (runtime/namespace_group.py)
build a namespace the same way: :func:`compose` turns a ``NamespaceConfig`` and a
:class:`NamespaceOptions` into a :class:`NamespaceRuntime` (store, snapshot, broker, validator, AMQP
server; nothing listening yet), and :meth:`NamespaceRuntime.start` opens its listeners in one order
(AMQP, then the HTTPS management endpoint, which the AMQP port serves too, then AMQP over WebSockets),
leaving nothing open when one fails. What differs between the command line and Python is only what
the options say (the flag or keyword a refused port names, whether a WebSocket port that cannot be
bound is fatal), so a new option is added in one place and reaches every path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..auth import DEFAULT_KEY, DEFAULT_KEY_NAME, SasRule, SasValidator, own_hosts, parse_rights
from ..broker.clock import Clock, ManualClock
from ..broker.core import Broker
from ..config import NamespaceConfig
from ..gateway.faults import Faults
from ..gateway.limits import DEFAULT_LIMITS, Limits
from ..scheduling import DEFAULT_SLICES, Slices
from ..store.base import PROCESS, Store
from ..store.memory import MemoryStore
from ..store.sqlite import DEFAULT_PAGE_WINDOW, SqliteStore
from .namespaces import admin_connection_string, connection_string, namespace_data_dir
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

if TYPE_CHECKING:
    from ..admin import AdminServer, HttpLimits
    from ..admin.control import Controls

DEFAULT_DATA_DIR = ".sbemulator"


class ServerTuning(TypedDict, total=False):
    """AMQP server settings beyond the limits, for tests and tools (``AmqpServer``'s keywords; an absent
    key keeps the server's default)."""

    max_frame_size: int
    idle_timeout_ms: int | None
    transaction_timeout_s: float


@dataclass(frozen=True)
class ListenHints:
    """What a refused port's message says moves it: Python's keywords by default, the CLI's flags there."""

    amqp: str = "port=0 picks a free port"
    admin: str = "admin_port=0 picks a free port, admin_port=None serves none"
    websocket: str = "websocket_port=0 picks a free port, websocket_port=None serves none"


class ListenError(OSError):
    """A port could not be bound: an OSError (its errno kept) whose text (``strerror``) names the
    listener, the address and the option that moves it."""


@dataclass(frozen=True)
class AdminOptions:
    """The HTTPS management endpoint (``port`` 0: a free port). ``tls_cert``/``tls_key``: the user's own
    certificate instead of the generated one (kept under the data directory's ``tls/``, or a temporary
    one in memory); ``limits``: admin.HttpLimits (None: the defaults, or the first namespace's);
    ``cert_hosts``: names beyond loopback the generated certificate covers (None: ``host``'s)."""

    port: int = 0
    tls_cert: str | Path | None = None
    tls_key: str | Path | None = None
    limits: HttpLimits | None = None
    cert_hosts: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WebSocketOptions:
    """AMQP over WebSockets on a port of its own (``port`` 0: a free one). ``required`` False: a port that
    cannot be bound is kept in ``NamespaceRuntime.websocket_refused`` instead of failing the start (the
    CLI's default port, 443, is privileged and often taken; the management port still serves wss)."""

    port: int = 0
    required: bool = True


@dataclass(frozen=True)
class NamespaceOptions:
    """Everything a namespace is built with besides its topology. ``in_memory`` or ``data_dir`` (default
    ``.sbemulator``) with ``durability`` and ``page_window`` (store/base.py, broker/paging.py);
    ``sas_key``: RootManageSharedAccessKey's key (default: the file's, else SAS_KEY_VALUE); ``host`` and
    ``port`` to listen on, ``public_host`` the name clients use (default ``host``), ``hostnames`` more
    names SAS tokens may be signed for; ``one_port``: the AMQP port also serves amqps, HTTP(S) and
    WebSockets; ``limits`` and ``tuning`` for the AMQP server; ``slices`` how large the slices of long work are
    (sbemulator/scheduling/: the broker's, the server's jobs', the gateways'); ``clock`` the broker's (shared by
    every namespace); ``snapshot`` (parsed) to start from; ``admin``/``websocket``: the listeners beside the
    AMQP port (None: none)."""

    in_memory: bool = True
    data_dir: str | Path | None = None
    durability: str = PROCESS
    page_window: int | None = None
    sas_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    public_host: str | None = None
    hostnames: tuple[str, ...] = ()
    one_port: bool = True
    limits: Limits = DEFAULT_LIMITS
    slices: Slices = DEFAULT_SLICES
    tuning: ServerTuning = field(default_factory=lambda: ServerTuning())
    clock: Clock = time.time
    snapshot: dict[str, Any] | None = None
    admin: AdminOptions | None = None
    websocket: WebSocketOptions | None = None
    hints: ListenHints = ListenHints()

    @property
    def directory(self) -> Path | None:
        """Where the store (and the generated certificate, under ``tls/``) is kept; None in memory."""
        return None if self.in_memory else Path(self.data_dir or DEFAULT_DATA_DIR)

    @property
    def client_host(self) -> str:
        """The host connection strings and URLs name."""
        return self.public_host or self.host

    def for_namespace(self, name: str, sas_key: str | None) -> NamespaceOptions:
        """The options of another namespace of the same emulator: its own store under
        ``<data dir>/namespaces/<name>/``, free AMQP and HTTPS ports (when the first has HTTPS), no
        WebSocket port and no snapshot of its own; host, limits, clock and durability shared."""
        directory = self.directory
        return replace(self, data_dir=None if directory is None else namespace_data_dir(directory, name),
                       sas_key=sas_key, port=0, snapshot=None, websocket=None,
                       admin=None if self.admin is None else AdminOptions(port=0))


def sas_rules(config: NamespaceConfig, sas_key: str | None) -> list[SasRule]:
    """The namespace's rules: RootManageSharedAccessKey (every right; ``--sas-key`` sets its key) and
    the config file's ``SasKeys``."""
    rules = {DEFAULT_KEY_NAME: SasRule(DEFAULT_KEY_NAME, sas_key or DEFAULT_KEY)}
    for entry in config.sas_keys:
        rules[entry.key_name] = SasRule(entry.key_name, entry.key, parse_rights(entry.rights))
    if sas_key:
        rules[DEFAULT_KEY_NAME] = SasRule(DEFAULT_KEY_NAME, sas_key, rules[DEFAULT_KEY_NAME].rights)
    return list(rules.values())


def sas_keys(config: NamespaceConfig, sas_key: str | None) -> dict[str, str]:
    return {rule.key_name: rule.key for rule in sas_rules(config, sas_key)}


def open_store(options: NamespaceOptions) -> Store:
    """The namespace's store: in memory, or SQLite in its data directory."""
    directory = options.directory
    if directory is None:
        return MemoryStore()
    window = DEFAULT_PAGE_WINDOW if options.page_window is None else options.page_window
    return SqliteStore(directory / "sbemulator.db", window, durability=options.durability, slices=options.slices)


def controls_for(server: AmqpServer) -> Controls:
    """What the management plane may control (admin/control.py): the broker's clock, how to move it
    (a manual clock only), the injected faults, and snapshot export and import."""
    from ..admin.control import Controls

    manual = isinstance(server.clock, ManualClock)
    broker = server.broker
    assert isinstance(broker, Broker)  # composed here (an import replaces the broker's state)
    return Controls(clock=server.clock, advance=server.advance_clock if manual else None, faults=server.faults,
                    snapshot=lambda: snapshot_file(broker, broker.config.name),
                    import_snapshot=lambda data: import_snapshot(broker, read_snapshot(data)),
                    max_snapshot_bytes=MAX_SNAPSHOT_BYTES)


def compose(config: NamespaceConfig, options: NamespaceOptions, *, faults: Faults | None = None) -> NamespaceRuntime:
    """Wire one namespace: store (seeded from the snapshot, which is refused whole before the store has
    any of it), broker, SAS validator and AMQP server. Nothing listens until :meth:`NamespaceRuntime.start`.
    ``faults``: the fault registry to use (``Emulator`` makes its own before it starts)."""
    clock = options.clock
    store: Any = open_store(options)
    if options.snapshot is not None:
        check_loads(config, SeededStore(options.snapshot), clock)
        store = seed_store(store, options.snapshot, durable=not options.in_memory)
    broker = Broker(config, store, clock=clock, slices=options.slices)
    # A token's resource must name one of the emulator's own hosts (auth.py; ``hostnames``: the names
    # clients reach it by besides loopback and ``host``, the CLI's --hostname).
    validator = SasValidator(sas_rules(config, options.sas_key), entity_rules=broker.authorization_rules,
                             hosts=own_hosts(options.host, options.hostnames))
    faults = faults if faults is not None else Faults(config.name)
    server = AmqpServer(broker, store, validator, host=options.host, port=options.port, clock=clock,
                        limits=options.limits, faults=faults, one_port=options.one_port, slices=options.slices,
                        **options.tuning)
    return NamespaceRuntime(config=config, options=options, server=server, broker=broker, faults=faults,
                            host=options.client_host, key=sas_keys(config, options.sas_key)[DEFAULT_KEY_NAME])


async def _listen(start: Callable[[], Awaitable[Any]], what: str, host: str, port: int, hint: str) -> None:
    try:
        await start()
    except OSError as exc:
        reason = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
        raise ListenError(exc.errno, f"cannot listen on {host}:{port} ({what}): {reason}; {hint}") from None


@dataclass(eq=False)
class NamespaceRuntime:
    """One namespace: its AMQP listener (``server``, with its broker and store), its HTTPS management
    listener (``admin``, or None), its WebSocket listener (the first namespace only, or None) and the key
    of RootManageSharedAccessKey. ``host`` is the name its connection strings and URLs use."""

    config: NamespaceConfig
    options: NamespaceOptions
    server: AmqpServer
    broker: Broker
    faults: Faults
    host: str
    key: str
    admin: AdminServer | None = None
    websocket: WebSocketListener | None = None
    websocket_refused: ListenError | None = None
    key_name: str = DEFAULT_KEY_NAME

    async def start(self, like: AdminServer | None = None) -> None:
        """Listen: AMQP, then HTTPS management (``like``: the endpoint whose CA, certificate and bounds it
        shares, the first namespace's), then WebSockets. Nothing is left open when one fails."""
        options = self.options
        host, hints = options.host, options.hints
        try:
            await _listen(self.server.start, "AMQP", host, options.port, hints.amqp)
            if options.admin is not None:
                await self._start_admin(options.admin, like)
            if options.websocket is not None:
                self.websocket = WebSocketListener(self.server, host, options.websocket.port,
                                                   ssl_context=None if self.admin is None else self.admin.ssl_context)
                try:
                    await _listen(self.websocket.start, "AMQP over WebSockets", host, options.websocket.port,
                                  hints.websocket)
                except ListenError as exc:
                    if options.websocket.required:
                        raise
                    self.websocket, self.websocket_refused = None, exc
        except BaseException:
            await self.stop()
            raise

    async def _start_admin(self, admin: AdminOptions, like: AdminServer | None) -> None:
        from ..admin import AdminServer

        directory = self.options.directory
        self.admin = AdminServer(self.broker, self.server.validator, host=self.options.host, port=admin.port,
                                 cert_dir=None if directory is None else directory / "tls",
                                 tls_cert=admin.tls_cert, tls_key=admin.tls_key, like=like, limits=admin.limits,
                                 cert_hosts=admin.cert_hosts, commit=self.server.commit, jobs=self.server.jobs,
                                 websocket=upgrade_factory(self.server), controls=controls_for(self.server))
        await _listen(self.admin.start, "HTTPS management", self.options.host, admin.port, self.options.hints.admin)
        self.server.serve_http(self.admin.http.protocol, self.admin.ssl_context)

    async def stop(self) -> None:
        """Close its listeners and connections, then its store (after the last commit)."""
        group = self.server.clock_group
        if self.server in group and len(group) > 1:
            group.remove(self.server)
        if self.websocket is not None:
            await self.websocket.stop()
        if self.admin is not None:
            await self.admin.stop()
            self.admin.cleanup()
        await self.server.stop()
        self.broker.close()

    def join_clock(self, group: list[AmqpServer]) -> None:
        """Share ``group`` (the servers on one clock): an advance through any of them moves all."""
        if self.server not in group:
            group.append(self.server)
        self.server.clock_group = group

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def connection_string(self) -> str:
        """For the data-plane SDK clients: this namespace's AMQP port."""
        return connection_string(self.host, self.port, self.key_name, self.key)

    @property
    def admin_url(self) -> str | None:
        return None if self.admin is None else self.admin.url(self.host)

    @property
    def admin_port(self) -> int | None:
        return None if self.admin is None else self.admin.port

    @property
    def admin_connection_string(self) -> str | None:
        """For ServiceBusAdministrationClient: the same key, this namespace's HTTPS port."""
        return None if self.admin is None else admin_connection_string(self.host, self.admin.port, self.key_name,
                                                                       self.key)

    @property
    def ca_path(self) -> str | None:
        return None if self.admin is None else str(self.admin.ca_path)

    @property
    def websocket_url(self) -> str | None:
        """``ws://HOST:PORT/$servicebus/websocket`` (None without a WebSocket port)."""
        return None if self.websocket is None else f"ws://{self.host}:{self.websocket.port}{WEBSOCKET_PATH}"
