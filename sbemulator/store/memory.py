"""The store of ``--in-memory`` mode: it keeps nothing, because nothing is ever read back.

The broker holds all live state in its own structures and reads the store only at start-up, so in
memory mode every write is dropped. Writing them to an in-memory SQLite database instead cost a
transaction per request for data no one would read: measured on the SDK's peek-lock path (one
transaction per completed message) it was about a fifth of the emulator's CPU.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from sbemulator.model import BrokerMessage

from .base import IndexEntry


class MemoryStore:
    """Implements :class:`~sbemulator.store.base.Store`; loads are empty, writes are dropped."""

    page_window = 0  # nothing to page from: every message stays in memory (broker/paging.py)
    writes = False  # commit, ensure_room and fold_due never do anything (Store.writes)

    # --- loading at start-up: a fresh process has nothing -----------------------------------
    def load_entities(self) -> list[tuple[str, str, str]]:
        return []

    def load_messages(self, paged: Collection[str] = ()) -> Iterator[tuple[str, BrokerMessage | IndexEntry]]:
        return iter(())

    def read_messages(self, entity: str, first: int, last: int) -> dict[int, BrokerMessage]:
        return {}

    def load_sequences(self) -> dict[str, int]:
        return {}

    def load_session_states(self) -> Iterator[tuple[str, str, bytes]]:
        return iter(())

    def load_session_state_times(self) -> Iterator[tuple[str, str, int]]:
        return iter(())

    def load_duplicates(self, now_ms: int) -> Iterator[tuple[str, str, int]]:
        return iter(())

    # --- mutations: the broker's own state is the only copy -----------------------------------
    def put_message(self, entity: str, msg: BrokerMessage) -> None:
        return None

    def update_message(self, entity: str, msg: BrokerMessage) -> None:
        return None

    def delete_message(self, entity: str, sequence_number: int) -> None:
        return None

    def delete_messages(self, entity: str, sequence_numbers: Iterable[int]) -> None:
        return None

    def set_sequence(self, entity: str, last_sequence_number: int) -> None:
        return None

    def set_session_state(self, entity: str, session_id: str, state: bytes | None, updated_ms: int = 0) -> None:
        return None

    def add_duplicate(self, entity: str, message_id: str, expires_ms: int) -> None:
        return None

    def prune_duplicates(self, now_ms: int) -> None:
        return None

    def save_entity(self, key: str, kind: str, description: str) -> None:
        return None

    def forget_entity(self, key: str) -> None:
        return None

    def delete_entity(self, key: str) -> None:
        return None

    def pending_messages(self) -> Iterator[tuple[str, int, BrokerMessage]]:
        return iter(())

    def discard(self, entity: str, sequence_number: int) -> None:
        return None

    def discard_duplicate(self, entity: str, message_id: str) -> None:
        return None

    def savepoint(self) -> object:
        return None

    def rollback_to(self, savepoint: object) -> None:
        return None

    def discard_entity(self, key: str) -> None:
        return None

    @property
    def dirty(self) -> bool:
        return False

    def ensure_room(self, entity: str) -> None:
        pass  # nothing to write

    def commit(self) -> None:
        return None

    def commit_wanted(self) -> bool:
        return False  # a commit here costs nothing, however much was written

    def fold_due(self) -> bool:
        return False

    def fold(self) -> None:
        return None

    def close(self) -> None:
        return None
