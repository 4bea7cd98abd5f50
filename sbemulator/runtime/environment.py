"""The official emulator image's environment, read the way that image reads it, so a compose file or a
Testcontainers setup written for it starts sbemulator with the same settings (docs/migrating.md).

* ``/ServiceBus_Emulator/ConfigFiles/Config.json`` (the path the official image reads its topology
  from) and ``CONFIG_PATH`` (the installer's ``.env`` name for the file mounted there) give ``--config``
  when it is not passed.
* ``EMULATOR_HTTP_PORT``: the management (and health) port, the official image's setting; gives
  ``--admin-port`` when it is not passed.
* ``ACCEPT_EULA``, ``SQL_SERVER``, ``MSSQL_SA_PASSWORD``, ``SQL_WAIT_INTERVAL``: the official image's
  SQL Server settings. sbemulator has no SQL Server and no licence to accept: they are accepted and
  have no effect.

A flag on the command line always wins over the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

OFFICIAL_CONFIG_PATH = "/ServiceBus_Emulator/ConfigFiles/Config.json"
CONFIG_ENV = "CONFIG_PATH"
HTTP_PORT_ENV = "EMULATOR_HTTP_PORT"
IGNORED = ("ACCEPT_EULA", "SQL_SERVER", "MSSQL_SA_PASSWORD", "SQL_WAIT_INTERVAL")


class EnvironmentError_(ValueError):
    """An environment variable holds a value the emulator cannot use (the message names it)."""


def config_from(env: Mapping[str, str] | None = None) -> str | None:
    """The topology file the environment names, or None."""
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return env[CONFIG_ENV]
    if Path(OFFICIAL_CONFIG_PATH).is_file():
        return OFFICIAL_CONFIG_PATH
    return None


def admin_port_from(env: Mapping[str, str] | None = None) -> int | None:
    """The management port ``EMULATOR_HTTP_PORT`` names, or None; a value that is not a port is an error."""
    env = os.environ if env is None else env
    text = env.get(HTTP_PORT_ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise EnvironmentError_(f"{HTTP_PORT_ENV} must be a port number from 0 to 65535, not {text!r}")
    return int(text)
