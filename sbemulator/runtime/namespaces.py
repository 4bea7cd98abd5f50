"""Several namespaces in one emulator: a port per namespace, one broker and store each.

Why a port per namespace: what the unchanged SDKs carry without DNS is the Endpoint's host and port
(and the SAS key). ``*.localhost`` names do not resolve everywhere, extra loopback addresses
(127.0.0.2, ...) are not configured on macOS by default, but every SDK (Python, JavaScript, Java, Go)
dials ``sb://127.0.0.1:<port>`` from a plain connection string with ``UseDevelopmentEmulator=true``.
So each namespace listens on an AMQP port of its own (and, with the management plane on, an HTTPS port
of its own: ``ServiceBusAdministrationClient.from_connection_string`` lands in the namespace whose port
its Endpoint names). All listeners run on the one event loop; each namespace has its own broker, store,
SAS rules, fault rules and connection limits, so nothing of one is visible from another. They share the
clock: one advance moves every namespace (docs/emulator.md, "Several namespaces").

Durable layout: the first namespace keeps ``<data dir>/sbemulator.db`` (the one-namespace layout opens
unchanged); every other one lives in ``<data dir>/namespaces/<name>/``.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

from ..auth import DEFAULT_KEY, DEFAULT_KEY_NAME
from ..config import NamespaceConfig

NAMESPACES_DIR = "namespaces"
DEFAULT_AMQP_PORT = 5672  # what an Endpoint without a port means to every SDK


def connection_string(host: str, port: int, key_name: str = DEFAULT_KEY_NAME, key: str = DEFAULT_KEY) -> str:
    endpoint = f"sb://{host}" if port == DEFAULT_AMQP_PORT else f"sb://{host}:{port}"
    return (
        f"Endpoint={endpoint};SharedAccessKeyName={key_name};SharedAccessKey={key};"
        "UseDevelopmentEmulator=true;"
    )


def admin_connection_string(host: str, admin_port: int, key_name: str, key: str) -> str:
    """For ServiceBusAdministrationClient: a namespace's key with its HTTPS management port (always
    written out: the admin client has no default port to fall back on)."""
    return (f"Endpoint=sb://{host}:{admin_port};SharedAccessKeyName={key_name};"
            f"SharedAccessKey={key};UseDevelopmentEmulator=true;")


def namespace_data_dir(base: str | Path, name: str) -> Path:
    """Where a namespace other than the first keeps its store (its lower-case name: names are
    case-insensitive, and one directory must serve ``Orders`` and ``orders``)."""
    return Path(base) / NAMESPACES_DIR / name.lower()


def generate_key() -> str:
    """A fresh SAS key (256 random bits, URL-safe base64): a namespace added at run time gets its own,
    so a connection string of one namespace does not open another."""
    return secrets.token_urlsafe(32)


def renamed(config: NamespaceConfig, name: str) -> NamespaceConfig:
    """``config``'s entities and keys under the namespace name ``name``."""
    return config if config.name == name else replace(config, name=name)
