"""Embedding: run the emulator on a background thread inside a test or a tool.

``with Emulator(config="infra/servicebus.json", in_memory=True) as emu: emu.connection_string``
binds a free loopback port unless one is given, and stops cleanly on exit.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..auth import DEFAULT_KEY_NAME
from ..broker.clock import Clock, ManualClock, clock_mode, make_clock, to_datetime
from ..config import NamespaceConfig, load_namespaces, parse_namespaces
from ..descriptions import entity_name_problem
from ..gateway.faults import Faults
from ..gateway.limits import DEFAULT_LIMITS, Limits
from ..scheduling import DEFAULT_SLICES, Slices
from ..store.base import PROCESS
from .composition import (
    DEFAULT_DATA_DIR,
    AdminOptions,
    NamespaceOptions,
    NamespaceRuntime,
    ServerTuning,
    WebSocketOptions,
    sas_keys,
)
from .namespace_group import NamespaceGroup
from .namespaces import admin_connection_string, connection_string, generate_key, renamed
from .server import AmqpServer
from .snapshot import import_snapshot, read_snapshot
from .websocket import WEBSOCKET_PATH, WebSocketListener

if TYPE_CHECKING:
    from ..admin import AdminServer
    from ..broker.core import Broker

__all__ = ["DEFAULT_DATA_DIR", "ConfigSource", "Emulator", "connection_string", "resolve_config", "resolve_namespaces"]


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
        page_window: int | None = None,
        durability: str = PROCESS,
        hostnames: Iterable[str] = (),
        one_port: bool = True,
        limits: Limits = DEFAULT_LIMITS,
        slices: Slices = DEFAULT_SLICES,
        **tuning: Any,
    ) -> None:
        """``port``/``admin_port``/``websocket_port`` 0 pick free ports; ``admin_port=None`` serves no HTTPS
        management endpoint; ``websocket_port`` None serves AMQP over WebSockets only on the HTTPS endpoint
        (``wss://``), a number also on a port of its own (``ws://``, what the Python SDK dials in emulator
        mode: point it there with ``custom_endpoint_address=emu.websocket_endpoint``; ``wss://`` too).
        ``admin_limits`` (``sbemulator.admin.HttpLimits``) bounds the management endpoint's requests and
        connections. ``one_port=False`` makes the AMQP port serve plain AMQP only, instead of AMQP,
        amqps, HTTP(S) and WebSockets told apart by their first bytes. ``clock="manual"``
        runs the broker on a clock that moves only through :meth:`advance` (docs/emulator.md, "A clock
        you control"). ``snapshot`` starts it from a snapshot file (or its bytes, or the parsed object;
        docs/emulator.md, "Snapshots"): refused at once (SnapshotError) when it cannot be read.
        ``page_window``, ``durability``, ``hostnames`` and ``limits`` are the command line's ``--page-window``,
        ``--durability``, ``--hostname`` and AMQP limit flags; ``slices`` (``sbemulator.scheduling.Slices``) how
        large the slices of long work are (tests make them tiny); ``tuning``: the AMQP server's
        ``max_frame_size``, ``idle_timeout_ms``, ``transaction_timeout_s`` (composition.ServerTuning)."""
        unknown = sorted(set(tuning) - set(ServerTuning.__annotations__))
        if unknown:
            raise TypeError(f"Emulator() got unexpected keyword arguments: {', '.join(unknown)}")
        # Every namespace of the file (docs/emulator.md, "Several namespaces"): the first is this object's
        # own (connection_string, port, broker, admin), the others get free ports (emu.namespace(name)).
        self.configs = resolve_namespaces(config)
        self.config = self.configs[0]
        self.snapshot = read_snapshot(snapshot) if snapshot is not None else None
        self.clock: Clock = make_clock(clock)
        # Injected faults (docs/emulator.md, "Fault injection"): emu.faults.add(...) from any thread.
        self.faults = Faults(self.config.name)
        # One options object for every namespace (runtime/composition.py): the others derive theirs.
        self.options = NamespaceOptions(
            in_memory=in_memory, data_dir=data_dir, durability=durability, page_window=page_window,
            sas_key=sas_key, host=host, port=port, hostnames=tuple(hostnames), one_port=one_port, limits=limits,
            slices=slices, tuning=cast(ServerTuning, tuning),  # its keys are checked above
            clock=self.clock, snapshot=self.snapshot,
            admin=None if admin_port is None else AdminOptions(admin_port, tls_cert, tls_key, admin_limits),
            websocket=None if websocket_port is None else WebSocketOptions(websocket_port))
        self.websocket_port: int | None = websocket_port
        self.websocket: WebSocketListener | None = None
        self.admin_port: int | None = admin_port
        self.admin: AdminServer | None = None
        self.host = host
        self.key_name = DEFAULT_KEY_NAME
        self.key = sas_keys(self.config, sas_key)[DEFAULT_KEY_NAME]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.server: AmqpServer | None = None
        self._broker: Broker | None = None
        self.port: int = port
        self._namespaces = NamespaceGroup()

    @property
    def broker(self) -> Broker:
        """The first namespace's broker (for tests that look inside it); RuntimeError before ``start``."""
        if self._broker is None:
            raise RuntimeError("The emulator is not started: it has no broker yet.")
        return self._broker

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
            first = loop.run_until_complete(self._namespaces.start(self.configs, self.options, faults=self.faults))
        except BaseException as exc:  # report start-up failures to the caller's thread
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self.server, self._broker, self.admin, self.websocket = first.server, first.broker, first.admin, first.websocket
        self.port = first.port
        self.admin_port = first.admin_port
        self.websocket_port = None if first.websocket is None else first.websocket.port
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._namespaces.stop())
            _cancel_remaining_tasks(loop)
            loop.close()

    @property
    def namespaces(self) -> tuple[NamespaceRuntime, ...]:
        """Every running namespace, the first (this object's own) first."""
        return tuple(self._namespaces)

    def namespace(self, name: str | None = None) -> NamespaceRuntime:
        """A running namespace by name (case-insensitive; None: the first): its ``connection_string``,
        ``admin_connection_string``, ``ca_path``, ``broker``, ``faults``. KeyError when there is none."""
        return self._namespaces.get(name)

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
        options = self.options.for_namespace(name, sas_key or generate_key())
        # checked on the loop by the group: two callers cannot both add it
        return self._on_loop(self._namespaces.add(renamed(base, name), options), timeout)

    def remove_namespace(self, name: str, timeout: float = 10.0) -> None:
        """Stop a namespace added after the first and free what it held (its ports, broker and memory;
        a durable one's files stay in the data directory and open again when it is added again)."""
        self._on_loop(self._namespaces.remove(name), timeout)

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
            for runtime in self._namespaces:  # fn may have changed any namespace
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
