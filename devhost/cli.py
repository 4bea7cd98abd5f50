"""``python -m devhost [--roles ...] [--duration S] [--settings local.settings.json]``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from devhost.host import ROOT, Host, HostError, HostOptions
from devhost.local_services import LocalServiceError
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="devhost", description="Run function_app.py locally.")
    parser.add_argument("--roles", default=None,
                        help=f"comma-separated roles to run (default: APP_ROLES, else all of {','.join(ROLES)})")
    parser.add_argument("--duration", type=float, default=None, help="seconds to run (default: until Ctrl-C)")
    parser.add_argument("--settings", type=Path, default=None,
                        help="local.settings.json (default: the one in the app root, if present)")
    parser.add_argument("--instances", action="append", default=[], metavar="ROLE=N",
                        help="run N instances of ROLE instead of its limit in infra/main.bicep")
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
            connect_timeout=args.connect_timeout,
        )
        host = Host(options).start()
    except (SettingsError, HostError, LocalServiceError) as exc:
        print(f"devhost: {exc}", file=sys.stderr)
        if isinstance(exc, SettingsError) and args.settings is None and not (ROOT / "local.settings.json").exists():
            print("devhost: there is no local.settings.json: copy local.settings.json.example (and remove its "
                  "connection settings to let devhost start the emulator and Azurite)", file=sys.stderr)
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
    return 0
