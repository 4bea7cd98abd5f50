"""Durable storage for the broker (SQLite, stdlib only)."""

from .base import Store
from .memory import MemoryStore
from .sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore", "Store"]
