"""devhost: a local Azure Functions host for function_app.py (Core Tools cannot be installed here).

It reads the functions, triggers and bindings from the azure-functions object model, runs timer and
Service Bus triggers with host.json semantics through the real SDKs, and simulates scale-out: every
role runs as many instances as its Flex Consumption limit in infra/main.bicep allows.
"""

from devhost.config import HostSettings, ServiceBusOptions, load_host_json, load_local_settings
from devhost.host import Host

__all__ = ["Host", "HostSettings", "ServiceBusOptions", "load_host_json", "load_local_settings"]
