"""What a started emulator tells the tools beside it: one JSON object with its addresses.

The CLI prints human lines (``sbemulator ready on ...``); a harness in another language, or a tool
that finds an emulator a user started (devhost beside ``make emulator``), wants the same facts without
parsing prose or guessing ports. So the emulator

* prints them as one JSON line on request (``--ready-json``), and
* writes them to a small file named after its AMQP port in a per-user run directory
  (:func:`ready_file`), removed again when it stops. A reader checks that the process named in it
  still runs (:func:`read_ready`), so a file left by a killed emulator is ignored.

Only the addresses and the CA certificate's path go in it, never a key other than what the printed
connection string already holds.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

RUN_DIR_ENV = "SBEMULATOR_RUN_DIR"  # where ready files go; default: a per-user folder in the temp dir


def version() -> str:
    """The installed package's version (``--version``); the source tree's when it is not installed."""
    try:
        return metadata.version("sbemulator")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        return "0.1.0+source"


def run_dir() -> Path:
    """The folder for ready files: ``$SBEMULATOR_RUN_DIR``, else ``<temp>/sbemulator-<user>``."""
    given = os.environ.get(RUN_DIR_ENV)
    if given:
        return Path(given)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name (e.g. a container with an unknown uid)
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"sbemulator-{user}"


def ready_file(port: int) -> Path:
    """The ready file of the emulator whose AMQP port is ``port``."""
    return run_dir() / f"{port}.json"


def ready_info(*, host: str, port: int, connection_string: str, admin_url: str | None, ca_path: str | None,
               websocket_url: str | None, startup_seconds: float,
               namespaces: dict[str, str] | None = None) -> dict[str, Any]:
    """The ready facts as one JSON-able object (the keys are documented in docs/emulator.md)."""
    return {
        "event": "ready",
        "version": version(),
        "pid": os.getpid(),
        "host": host,
        "amqp_port": port,
        "connection_string": connection_string,
        "admin_url": admin_url,
        "console_url": None if admin_url is None else admin_url.rstrip("/") + "/console/",
        "ca_path": ca_path,
        "websocket_url": websocket_url,
        "namespaces": namespaces or {},
        "startup_seconds": round(startup_seconds, 3),
    }


def write_ready(info: dict[str, Any]) -> Path | None:
    """Write ``info`` to its ready file (atomically); None when the run directory cannot be written
    (the emulator runs on, only tools beside it cannot find it)."""
    path = ready_file(int(info["amqp_port"]))
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(info) + "\n")
        partial.replace(path)
    except OSError:
        return None
    return path


def remove_ready(path: Path | None) -> None:
    """Remove the ready file this process wrote (not one another emulator wrote since)."""
    if path is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def read_ready(port: int) -> dict[str, Any] | None:
    """The ready facts of the emulator running on AMQP port ``port``, or None (no file, unreadable, or
    the process that wrote it is gone)."""
    try:
        info = json.loads(ready_file(port).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or info.get("amqp_port") != port:
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    return info
