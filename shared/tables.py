"""A Table Storage table that its users create on first use.

The leveler's sink, the ordered store and the shared write budget each own one table. None of them
needs a deployment step for it: the first request creates it if it is missing.
"""

from __future__ import annotations

import threading

from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableClient


class TableCreatedOnFirstUse:
    """One table, created on first use if it does not exist: the app needs no deployment step for it, and
    the create request is made once per process, not once per write (threads share the flag)."""

    def __init__(self, table: TableClient) -> None:
        self.table = table
        self._created = False
        self._created_lock = threading.Lock()

    def ensure_table(self) -> None:
        with self._created_lock:
            if self._created:
                return
            try:
                self.table.create_table()
            except ResourceExistsError:
                pass
            self._created = True
