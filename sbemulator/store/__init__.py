"""Durable storage for the broker (SQLite, stdlib only)."""

from .base import Store
from .sqlite import SqliteStore

__all__ = ["SqliteStore", "Store"]
