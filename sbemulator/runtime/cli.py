"""``python -m sbemulator``: run the emulator until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable

from ..config import ConfigError, load_config
from .emulator import build, connection_string, sas_keys

STARTED = time.perf_counter()
LOOPS = ("asyncio", "uvloop")


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sbemulator", description="A pure-Python Azure Service Bus emulator.")
    parser.add_argument("--config", required=True, help="topology file (official emulator Config.json schema)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5672, help="AMQP port (default 5672; 0 picks a free port)")
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--data-dir", default=None, help="where messages are kept (default .sbemulator/)")
    store.add_argument("--in-memory", action="store_true", help="keep nothing on disk")
    parser.add_argument("--sas-key", default=None, help="key of RootManageSharedAccessKey (default SAS_KEY_VALUE)")
    parser.add_argument("--log-level", default="WARNING", help="logging level (default WARNING)")
    parser.add_argument("--loop", choices=LOOPS, default="asyncio",
                        help="event loop: the standard asyncio one (default) or uvloop, when it is installed")
    # --- admin (HTTPS management) options
    admin = parser.add_mutually_exclusive_group()
    admin.add_argument("--admin-port", type=int, default=5300,
                       help="HTTPS management port (default 5300; 0 picks a free port)")
    admin.add_argument("--no-admin", action="store_true", help="do not serve the HTTPS management API")
    parser.add_argument("--tls-cert", default=None,
                        help="certificate chain (PEM) for the management port instead of the generated one")
    parser.add_argument("--tls-key", default=None, help="private key (PEM) for --tls-cert")
    # --- end admin options
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    server, broker = build(
        config, in_memory=args.in_memory, data_dir=args.data_dir, sas_key=args.sas_key,
        host=args.host, port=args.port,
    )
    await server.start()
    admin = None
    if not args.no_admin:  # admin wiring
        from pathlib import Path

        from ..admin import AdminServer
        from .emulator import DEFAULT_DATA_DIR

        cert_dir = None if args.in_memory else Path(args.data_dir or DEFAULT_DATA_DIR) / "tls"
        try:
            admin = AdminServer(broker, server.validator, host=args.host, port=args.admin_port, cert_dir=cert_dir,
                                tls_cert=args.tls_cert, tls_key=args.tls_key, commit=server.commit)
            await admin.start()
        except OSError as exc:
            await server.stop()
            broker.close()
            print(f"sbemulator: cannot listen on {args.host}:{args.admin_port} (admin): {exc}", file=sys.stderr)
            return 1
        except BaseException:
            await server.stop()
            broker.close()
            raise
    # Signal handlers before the ready line: a supervisor may send SIGTERM as soon as it reads it.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    keys = sas_keys(config, args.sas_key)
    key_name = "RootManageSharedAccessKey"
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    elapsed = time.perf_counter() - STARTED
    print(
        f"sbemulator ready on {args.host}:{server.port} in {elapsed:.2f}s; connection string: "
        f"{connection_string(shown_host, server.port, key_name, keys[key_name])}",
        flush=True,
    )
    if admin is not None:  # admin wiring: a second line, the ready line above keeps its format
        print(f"sbemulator admin on {admin.url(shown_host)}; CA certificate: {admin.ca_path}", flush=True)
    await stop.wait()
    if admin is not None:  # admin wiring
        await admin.stop()
        admin.cleanup()
    await server.stop()
    broker.close()
    print("sbemulator stopped", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        with asyncio.Runner(loop_factory=loop_factory(args.loop)) as runner:
            return runner.run(serve(args))
    except ConfigError as exc:
        print(f"sbemulator: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # admin wiring: e.g. --tls-cert without --tls-key
        print(f"sbemulator: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sbemulator: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
