"""sbemulator: a pure-Python Azure Service Bus emulator that the official SDKs use unchanged."""

from .runtime.emulator import Emulator, connection_string

__all__ = ["Emulator", "connection_string"]
