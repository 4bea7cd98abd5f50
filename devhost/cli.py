"""``python -m devhost [--roles ...] [--duration S] [--settings local.settings.json]``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from devhost.host import ROOT, Host, HostError, HostOptions
from devhost.local_services import LocalServiceError
from devhost.scale_controller import DEFAULT_COLD_START, DEFAULT_SCALE_IN_DELAY, ScaleOptions
from shared.settings import ROLES, SettingsError


class _KnownNoise(logging.Filter):
    """azure.functions warns about HTTP auth levels for every app it builds; none of ours has HTTP."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Auth level is not applied" not in record.getMessage()


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_KnownNoise())
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("pipeline.latency").setLevel(logging.WARNING)  # one line per message otherwise


def parse_instances(values: list[str]) -> dict[str, int]:
    result = {}
    for value in values:
        role, _, count = value.partition("=")
        if not count.isdigit() or int(count) < 1:
            raise SettingsError(f"--instances takes ROLE=N with N >= 1, got {value!r}")
        result[role] = int(count)
    return result


def add_scale_arguments(parser: argparse.ArgumentParser, scale_in_delay: float = DEFAULT_SCALE_IN_DELAY) -> None:
    """The scaling options; ``scale_in_delay`` is this program's default (the demo's is shorter), and
    the help states it."""
    group = parser.add_argument_group("scaling (target-based, as Flex Consumption; see docs/devhost.md)")
    group.add_argument("--fixed", action="store_true",
                       help="no scale controller: every role runs its whole limit from the start")
    group.add_argument("--cold-start", type=float, default=DEFAULT_COLD_START, metavar="S",
                       help=f"seconds a new instance takes before it receives (default {DEFAULT_COLD_START:g})")
    group.add_argument("--scale-in-delay", type=float, default=scale_in_delay, metavar="S",
                       help="seconds the backlog must stay below what the instances serve before they are "
                            f"removed (default {scale_in_delay:g})")
    group.add_argument("--scale-interval", type=float, default=1.0, metavar="S",
                       help="seconds between scaling decisions (default 1)")


def scale_options(args: argparse.Namespace) -> ScaleOptions | None:
    if args.fixed:
        return None
    for name in ("cold_start", "scale_in_delay"):
        if getattr(args, name) < 0:
            raise SettingsError(f"--{name.replace('_', '-')} must be >= 0")
    if args.scale_interval <= 0:
        raise SettingsError("--scale-interval must be > 0")
    return ScaleOptions(interval=args.scale_interval, cold_start=args.cold_start,
                        scale_in_delay=args.scale_in_delay)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="devhost", description="Run function_app.py locally.")
    parser.add_argument("--roles", default=None,
                        help=f"comma-separated roles to run (default: APP_ROLES, else all of {','.join(ROLES)})")
    parser.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    parser.add_argument("--settings", type=Path, default=None,
                        help="local.settings.json (default: the one in the app root, if present)")
    parser.add_argument("--instances", action="append", default=[], metavar="ROLE=N",
                        help="a fixed pool: run N instances of ROLE for the whole run instead of scaling it")
    add_scale_arguments(parser)
    parser.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to wait for an endpoint")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    try:
        options = HostOptions(
            roles=tuple(r.strip() for r in args.roles.split(",") if r.strip()) if args.roles else None,
            settings_file=args.settings,
            instances=parse_instances(args.instances),
            scale=scale_options(args),
            connect_timeout=args.connect_timeout,
        )
        host = Host(options).start()
    except (SettingsError, HostError, LocalServiceError) as exc:
        print(f"devhost: {exc}", file=sys.stderr)
        settings_file = args.settings if args.settings is not None else ROOT / "local.settings.json"
        if isinstance(exc, SettingsError) and not settings_file.exists():
            print(f"devhost: there is no {settings_file}: copy local.settings.json.example to it "
                  "(`cp local.settings.json.example local.settings.json`); with its loopback connection strings "
                  "devhost starts sbemulator and Azurite itself when nothing listens there", file=sys.stderr)
        return 2
    try:
        host.run(args.duration)
    finally:
        host.stop()
        if not host.stats.by_function():
            print("devhost: no function was invoked", flush=True)
        for function, counts in sorted(host.stats.by_function().items()):
            print(f"devhost: {function}: {counts['succeeded']} succeeded, {counts['failed']} failed, "
                  f"{counts['instances']} instance(s)")
        if host.scaler is not None:
            for role in host.scaler.apps:
                print(f"devhost: {role}: peak {host.scaler.peak(role)} of {host.scaler.limit(role)} instance(s), "
                      f"{len(host.scaler.events_of(role))} scale event(s)")
    return 0
