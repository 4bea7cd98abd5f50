"""``python -m sbemulator``: run the emulator until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from ..broker.clock import CLOCK_MODES, REAL, make_clock
from ..config import ConfigError, load_namespaces
from ..gateway.limits import DEFAULT_LIMITS, Limits
from ..net.ports import DEFAULT_ADMIN_PORT
from ..store.base import DURABILITY_MODES, PROCESS, StoreError
from ..store.sqlite import DEFAULT_PAGE_WINDOW, DataDirError
from .collector import Collector
from .composition import AdminOptions, ListenError, ListenHints, NamespaceOptions, WebSocketOptions
from .environment import EnvironmentError_, admin_port_from, config_from
from .namespace_group import NamespaceGroup
from .namespaces import DEFAULT_AMQP_PORT
from .public import certificate_hosts, shown_host
from .ready import ready_info, remove_ready, version, write_ready
from .snapshot import read_snapshot
from .websocket import WEBSOCKET_PATH

STARTED = time.perf_counter()
LOOPS = ("asyncio", "uvloop")
DEFAULT_PORT = DEFAULT_AMQP_PORT
DEFAULT_WEBSOCKET_PORT = 443  # what the SDKs dial for AMQP over WebSockets


# The AMQP limits (gateway/limits.py) a flag may change: flag, Limits field, type, what it bounds.
LIMIT_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--max-connections", "max_connections", int, "concurrent AMQP connections on the namespace"),
    ("--max-links-per-connection", "max_links_per_connection", int, "links on one connection"),
    ("--max-receivers-per-entity", "max_receivers_per_entity", int,
     "concurrent receive requests (receiver links) on a queue or subscription, a topic's counted together"),
    ("--channel-max", "channel_max", int, "the highest session channel a connection may use"),
    ("--auth-timeout", "auth_timeout_s", float, "seconds a connection may stay without a valid token"),
    ("--max-cbs-token-size", "max_cbs_message_bytes", int, "bytes of one put-token request on $cbs"),
    ("--write-high-water", "write_high_water", int, "bytes of unsent output at which receivers pause"),
    ("--write-low-water", "write_low_water", int, "bytes of unsent output below which they resume"),
)


def admin_limits_from(args: argparse.Namespace) -> Any:
    """The management endpoint's bounds from the command line (admin.HttpLimits; defaults where not given)."""
    import dataclasses

    from ..admin.http import current_limits

    given = {"request_timeout_s": args.admin_request_timeout, "idle_timeout_s": args.admin_idle_timeout,
             "max_connections": args.admin_max_connections,
             "max_connections_per_client": args.admin_max_connections_per_client}
    return dataclasses.replace(current_limits(), **{k: v for k, v in given.items() if v is not None})


def limits_from(args: argparse.Namespace) -> Limits:
    """The limits the flags ask for; the others keep their Service Bus defaults."""
    given = {name: getattr(args, name) for _, name, _, _ in LIMIT_FLAGS if getattr(args, name) is not None}
    for flag, name, _, _ in LIMIT_FLAGS:
        if name in given and given[name] < 0:
            raise ValueError(f"{flag} must not be negative")
    return Limits(**given) if given else DEFAULT_LIMITS


# What a refused port's message says moves it (runtime/composition.py's ListenError).
CLI_HINTS = ListenHints(
    amqp="--port N moves it (0 picks a free port)",
    admin="--admin-port N moves it (0 picks a free port), --no-admin turns it off",
    websocket="--websocket-port N moves it (0 picks a free port), --no-websocket turns it off",
)


def options_from(args: argparse.Namespace) -> NamespaceOptions:
    """The namespace options the command line asks for (runtime/composition.py builds every namespace
    from them, the file's other namespaces from ``for_namespace``)."""
    admin = None if args.no_admin else AdminOptions(
        port=args.admin_port, tls_cert=args.tls_cert, tls_key=args.tls_key, limits=admin_limits_from(args),
        cert_hosts=certificate_hosts(args.host, args.public_host))
    websocket = None if args.no_websocket else WebSocketOptions(args.websocket_port,
                                                                required=args.websocket_port_given)
    return NamespaceOptions(
        in_memory=args.in_memory, data_dir=args.data_dir, durability=args.durability, page_window=args.page_window,
        sas_key=args.sas_key, host=args.host, port=args.port, public_host=shown_host(args.host, args.public_host),
        hostnames=tuple(args.hostname), one_port=not args.amqp_port_only, limits=limits_from(args),
        clock=make_clock(args.clock), snapshot=None if args.snapshot is None else read_snapshot(args.snapshot),
        admin=admin, websocket=websocket, hints=CLI_HINTS)


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to run on. uvloop is optional (never a dependency): asking for it without it
    installed is an error that says how to get it, not a silent fall-back."""
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        raise ValueError("--loop uvloop needs the uvloop package: pip install uvloop") from None
    return uvloop.new_event_loop


def build_parser() -> argparse.ArgumentParser:
    """Every option of ``python -m sbemulator`` (the README's table lists them all; a test checks)."""
    parser = argparse.ArgumentParser(prog="sbemulator", description="A pure-Python Azure Service Bus emulator.")
    parser.add_argument("--version", action="version", version=f"sbemulator {version()}")
    parser.add_argument("--config", default=None,
                        help="topology file (official emulator Config.json schema); default: $CONFIG_PATH, else "
                             "/ServiceBus_Emulator/ConfigFiles/Config.json when it exists (as the official image)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--hostname", action="append", default=[], metavar="NAME",
                        help="a host name clients reach the emulator by (repeatable): SAS tokens signed for it "
                             "are accepted, as for loopback and --host")
    parser.add_argument("--public-host", default=None, metavar="NAME",
                        help="the host name or address clients use, in the printed connection string and the "
                             "generated certificate (default: --host; with 0.0.0.0 or ::, this machine's name)")
    parser.add_argument("--ready-json", action="store_true",
                        help="also print the ready facts as one JSON line (for harnesses; docs/emulator.md)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help="AMQP port (default 5672; 0 picks a free port)")
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--data-dir", default=None, help="where messages are kept (default .sbemulator/)")
    store.add_argument("--in-memory", action="store_true", help="keep nothing on disk")
    parser.add_argument("--page-window", type=int, default=None,
                        help="available messages per durable queue or subscription kept in memory; the rest "
                             f"wait in the store and are read ahead of delivery (default {DEFAULT_PAGE_WINDOW})")
    parser.add_argument("--durability", choices=DURABILITY_MODES, default=PROCESS,
                        help="process (default): what is confirmed survives a killed emulator, not an OS crash or "
                             "power loss; full: fsynced before it is confirmed (one fsync shared by the "
                             "operations of every connection in a loop turn), so it survives those too")
    parser.add_argument("--sas-key", default=None, help="key of RootManageSharedAccessKey (default SAS_KEY_VALUE)")
    parser.add_argument("--clock", choices=CLOCK_MODES, default=REAL,
                        help="real (default) or manual: the broker's time moves only when told to, through "
                             "POST /$admin/clock/advance on the management endpoint (docs/emulator.md)")
    parser.add_argument("--snapshot", default=None, metavar="FILE",
                        help="start from a snapshot (entities and messages, exported through GET /$admin/snapshot "
                             "or the console; docs/emulator.md, Snapshots)")
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    parser.add_argument("--gc", choices=("idle", "python"), default="idle",
                        help="idle (default): what start-up loaded is frozen and the cyclic collector's full "
                             "collections run when no AMQP input came for ten seconds, so they do not stall "
                             "clients (docs/emulator.md, \"Limits and faults\"); python: Python's own policy")
    parser.add_argument("--loop", choices=LOOPS, default="asyncio",
                        help="event loop: the standard asyncio one (default) or uvloop, when it is installed")
    # --- admin (HTTPS management) options
    admin = parser.add_mutually_exclusive_group()
    admin.add_argument("--admin-port", type=int, default=None,
                       help="HTTPS management port (default 5300 with the default --port, else a free port; "
                            "0 picks a free port)")
    admin.add_argument("--no-admin", action="store_true", help="do not serve the HTTPS management API")
    parser.add_argument("--tls-cert", default=None,
                        help="certificate chain (PEM) for the management port instead of the generated one")
    parser.add_argument("--tls-key", default=None, help="private key (PEM) for --tls-cert")
    parser.add_argument("--admin-request-timeout", type=float, default=None, metavar="SECONDS",
                        help="management port: a whole request (head and body) from its first byte; "
                             "then 408 and closed (default 60; a head alone: 10)")
    parser.add_argument("--admin-idle-timeout", type=float, default=None, metavar="SECONDS",
                        help="management port: a kept-alive connection with no request is closed (default 60)")
    parser.add_argument("--admin-max-connections", type=int, default=None, metavar="N",
                        help="management port: connections at once; the next gets 503 (default 128)")
    parser.add_argument("--admin-max-connections-per-client", type=int, default=None, metavar="N",
                        help="management port: connections at once from one client address; the next gets 503 "
                             "(default 64)")
    # --- end admin options
    websocket = parser.add_mutually_exclusive_group()
    websocket.add_argument("--websocket-port", type=int, default=None,
                           help="AMQP over WebSockets (ws://HOST:PORT/$servicebus/websocket) on a port of its own "
                                "(default 443, as the SDKs dial, with the default --port, else a free port; "
                                "0 picks a free port); the management port serves it too (wss://)")
    parser.add_argument("--amqp-port-only", action="store_true",
                        help="the AMQP port serves plain AMQP only; by default it also serves AMQP over TLS (amqps), "
                             "HTTP and HTTPS (management, /health, console) and WebSockets (ws, wss), told apart by "
                             "each connection's first bytes, so one host:port reaches everything")
    websocket.add_argument("--no-websocket", action="store_true",
                           help="no WebSocket port of its own (the management port still serves wss://)")
    limits = parser.add_argument_group("AMQP limits (Service Bus's values by default; docs/emulator.md, "
                                       "\"Limits and faults\")")
    for flag, name, kind, what in LIMIT_FLAGS:
        limits.add_argument(flag, dest=name, type=kind, default=None, metavar="N",
                            help=f"{what} (default {getattr(DEFAULT_LIMITS, name)})")
    return parser


# The least value each limit flag takes (a connection bound of 0 would refuse every client; a channel-max
# is an AMQP ushort, so at most 65535).
LIMIT_MINIMUMS: dict[str, float] = {"channel_max": 0, "write_low_water": 0, "auth_timeout_s": 0.001}
MAX_CHANNEL = 65535


def _check_values(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Values argparse's types let through but that make no sense: a usage error (exit 2) that names
    the flag, before anything starts (a port above 65535 was a traceback from bind)."""
    for flag, name in (("--port", "port"), ("--admin-port", "admin_port"), ("--websocket-port", "websocket_port")):
        value = getattr(args, name)
        if value is not None and not 0 <= value <= 65535:
            parser.error(f"{flag} must be a port number from 0 to 65535 (0 picks a free one), not {value}")
    for flag, name, _, _ in LIMIT_FLAGS:
        value = getattr(args, name)
        least = LIMIT_MINIMUMS.get(name, 1)
        if value is not None and value < least:
            parser.error(f"{flag} must be at least {least:g}, not {value:g}")
    for flag, name in (("--admin-request-timeout", "admin_request_timeout"),
                       ("--admin-idle-timeout", "admin_idle_timeout")):
        value = getattr(args, name)
        if value is not None and not value > 0:
            parser.error(f"{flag} must be above 0 seconds, not {value:g}")
    for flag, name in (("--admin-max-connections", "admin_max_connections"),
                       ("--admin-max-connections-per-client", "admin_max_connections_per_client")):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    if args.channel_max is not None and args.channel_max > MAX_CHANNEL:
        parser.error(f"--channel-max must be at most {MAX_CHANNEL} (an AMQP ushort), not {args.channel_max}")
    high = args.write_high_water if args.write_high_water is not None else DEFAULT_LIMITS.write_high_water
    low = args.write_low_water if args.write_low_water is not None else DEFAULT_LIMITS.write_low_water
    if low >= high:
        parser.error(f"--write-low-water ({low}) must be below --write-high-water ({high})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.config is None:  # the official image's way: a mounted file, or CONFIG_PATH
        args.config = config_from()
        if args.config is None:
            parser.error("--config FILE is required (or set CONFIG_PATH, or mount the file at "
                         "/ServiceBus_Emulator/ConfigFiles/Config.json as for the official emulator)")
    if args.admin_port is None and not args.no_admin:
        try:
            args.admin_port = admin_port_from()
        except EnvironmentError_ as exc:
            parser.error(str(exc))
    _check_values(parser, args)
    # A second emulator started with --port N must not collide with the first one on the other ports:
    # their fixed defaults go with the default AMQP port only, any other --port picks free ones (printed).
    args.admin_port_given = args.admin_port is not None
    if args.admin_port is None:
        args.admin_port = DEFAULT_ADMIN_PORT if args.port == DEFAULT_PORT else 0
    args.websocket_port_given = args.websocket_port is not None
    if args.websocket_port is None:
        args.websocket_port = DEFAULT_WEBSOCKET_PORT if args.port == DEFAULT_PORT else 0
    return args


async def serve(args: argparse.Namespace) -> int:
    configs = load_namespaces(args.config)
    namespaces = NamespaceGroup()  # the file's first namespace on the given ports, the others on free ones
    first = await namespaces.start(configs, options_from(args))
    server, admin, websocket = first.server, first.admin, first.websocket
    if first.websocket_refused is not None:
        # The default, 443, is privileged and often taken: without it the emulator still serves
        # everything else (WebSockets too, on the management port), so say so and go on.
        print(f"sbemulator: warning: {first.websocket_refused.strerror}; WebSockets are still served on the "
              "management port", file=sys.stderr, flush=True)
    extras = list(namespaces)[1:]
    # Signal handlers before the ready line: a supervisor may send SIGTERM as soon as it reads it.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if args.gc == "idle":  # after start-up: what it loaded is frozen, full collections wait for idle moments
        server.collector = Collector()
        server.collector.start()
    shown = first.host
    elapsed = time.perf_counter() - STARTED
    # The other namespaces follow the first one's connection string, " | namespace NAME: <string>" each
    # (a connection string has no spaces); their management endpoints come before the first one's.
    others = "".join(f" | namespace {runtime.name}: {runtime.connection_string}" for runtime in extras)
    connection = first.connection_string
    websocket_url = first.websocket_url
    # The same facts for tools: a file tools beside it read (runtime/ready.py), written before the ready
    # line so whoever reads that line finds the file; and a JSON line on request.
    info = ready_info(host=args.host, port=server.port, connection_string=connection,
                      admin_url=None if admin is None else admin.url(shown),
                      ca_path=None if admin is None else str(admin.ca_path), websocket_url=websocket_url,
                      startup_seconds=elapsed,
                      namespaces={runtime.name: runtime.connection_string for runtime in extras})
    ready_path = write_ready(info)
    print(f"sbemulator ready on {args.host}:{server.port} in {elapsed:.2f}s; connection string: {connection}{others}",
          flush=True)
    if websocket is not None and websocket_url is not None:
        secure = "" if websocket.ssl_context is None else f" and wss://{shown}:{websocket.port}{WEBSOCKET_PATH}"
        print(f"sbemulator websocket on {websocket_url}{secure}", flush=True)
    for runtime in extras:
        if runtime.admin is not None:
            print(f"sbemulator namespace {runtime.name} admin on {runtime.admin_url}", flush=True)
    if admin is not None:  # admin wiring: a line of its own, the ready line above keeps its format
        print(f"sbemulator admin on {admin.url(shown)}; CA certificate: {admin.ca_path}", flush=True)
    if args.ready_json:
        print(json.dumps(info), flush=True)
    try:
        await stop.wait()
    finally:
        remove_ready(ready_path)
    try:
        await namespaces.stop()
    except StoreError as exc:  # a full disk at shutdown: say what was not written, no traceback
        print(f"sbemulator: warning: {exc}", file=sys.stderr, flush=True)
    if server.collector is not None:
        server.collector.stop()
    print("sbemulator stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            return runner.run(serve(args))
    except ListenError as exc:
        print(f"sbemulator: {exc.strerror}", file=sys.stderr)
        return 1
    except DataDirError as exc:  # in use by another emulator, read-only, full: one line, what to do
        print(f"sbemulator: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"sbemulator: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # admin wiring: e.g. --tls-cert without --tls-key
        print(f"sbemulator: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # not a port (those are ListenError): say what failed, not "cannot listen"
        print(f"sbemulator: {exc}", file=sys.stderr)
        return 1
