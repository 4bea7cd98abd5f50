"""devhost: a local Azure Functions host for function_app.py (Core Tools cannot be installed here).

It reads the functions, triggers and bindings from the azure-functions object model, runs timer and
Service Bus triggers with host.json semantics through the real SDKs, and simulates scale-out: every
role runs as many instances as its Flex Consumption limit in infra/main.bicep allows.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Host", "HostOptions"]


def __getattr__(name: str) -> Any:  # importing the host pulls in the SDKs: only when asked
    if name in __all__:
        from devhost import host

        return getattr(host, name)
    raise AttributeError(name)
