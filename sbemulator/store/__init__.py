"""Durable storage for the broker: the Store Protocol (``base``), SQLite with a delivery journal
(``sqlite``, ``journal``), and the store of ``--in-memory`` mode (``memory``).

May import: ``sbemulator.model`` (what it stores), ``sbemulator.amqp`` (how messages are
encoded) and ``sbemulator.scheduling`` (its ``Slices``: when a commit is wanted, rows a fold deletes).
Must not import the gateway, the runtime or the admin plane; the broker knows it only as the Protocol
in ``base``.
"""

from .base import Store, StoreError, StoreFullError, store_error
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore", "Store", "StoreError", "StoreFullError", "store_error"]
