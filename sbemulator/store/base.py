"""The persistence interface the broker writes through.

The broker keeps its live state in memory and treats the store as a durable log: mutations are
buffered and become durable together at :meth:`Store.commit` (group commit). The one thing it reads
back while running is the data of the messages it paged out (``read_messages``, broker/paging.py). The server calls
commit once per batch of network input, before it sends the accepts for that batch, so an
accepted message is on disk before the sender learns it was accepted.

Lock state is never stored: after a restart every message is unlocked, which is how the locks of a
dead process are released.
"""

from __future__ import annotations

import errno
import sqlite3
from array import array
from collections.abc import Collection, Iterable, Iterator
from typing import Protocol

from sbemulator.model import BrokerMessage

IndexRow = tuple[int, int, int, int | None, int]
"""An available message of a paging container as loaded at start-up without its data: (sequence number,
delivery count, enqueued ms, expires ms or None, size); a row of broker.paging.ColdIndex."""
IndexRows = array
"""Many :data:`IndexRow` at once, in sequence order: an ``array('q')`` of five numbers per message, an
expiry of -1 for none (what the SQLite store reads at start-up without a Python object per message)."""
IndexEntry = IndexRow | IndexRows


PROCESS = "process"
"""Durability mode (``--durability``): what the store confirms survives a killed process (a commit is in
the page cache: WAL with ``synchronous=NORMAL``, the delivery journal a shared mapping), not an OS crash."""
FULL = "full"
"""Durability mode: what the store confirms is on the disk (SQLite ``synchronous=FULL``, the delivery
journal msynced), so it survives an OS crash or a power loss too; one fsync per commit, which many
connections' operations share (runtime/server.py's group commit)."""
DURABILITY_MODES = (PROCESS, FULL)


class StoreError(Exception):
    """A commit that could not be written (raised by :meth:`Store.commit`). Nothing of it reached the
    disk and all of it is still pending, so the next commit tries again: what the broker confirmed
    before is not lost while the process lives, and the sends of the failed commit can be taken back
    (:meth:`Store.pending_messages`, :meth:`Store.discard`) and refused."""

    full = False  # the disk or the database is full: it stays so until space is freed
    # ``full`` durability: the journal's records of this commit were written but their msync failed, so
    # what they settle may not be on the disk: nothing of this commit may be confirmed (runtime/server.py).
    unsynced = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StoreFullError(StoreError):
    full = True


_SQLITE_FULL = 13  # SQLITE_FULL, "database or disk is full"
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def store_error(exc: BaseException) -> StoreError:
    """The store error for what SQLite or the file system raised: full (no space, a quota, a file too
    large) or any other failure to write (an I/O error, a read-only or vanished file)."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        full = (code is not None and code & 0xFF == _SQLITE_FULL) or "full" in str(exc)
    else:
        full = isinstance(exc, OSError) and exc.errno in _NO_SPACE
    reason = str(exc) or type(exc).__name__
    return StoreFullError(reason) if full else StoreError(reason)


class Store(Protocol):
    page_window: int
    """Available messages per queue or subscription the broker holds in memory before it pages (0: all)."""
    writes: bool
    """Whether the store writes anything: False for one that keeps nothing (``--in-memory``), whose
    ``commit``, ``ensure_room`` and ``fold_due`` never do anything, so the server skips those calls on
    the per-message path."""

    # --- loading at start-up -----------------------------------------------------------------
    def load_entities(self) -> list[tuple[str, str, str]]:
        """Entities created, changed or deleted at run time: (key, kind, JSON description)."""
        ...

    def load_messages(self, paged: Collection[str] = ()) -> Iterator[tuple[str, BrokerMessage | IndexEntry]]:
        """Every stored message with the key of the container holding it, in sequence order; the active
        messages of the ``paged`` containers as an :data:`IndexEntry` (their data not read)."""
        ...

    def read_messages(self, entity: str, first: int, last: int) -> dict[int, BrokerMessage]:
        """The stored messages numbered ``first`` to ``last`` of ``entity``, by sequence number (one
        range scan; writes not committed yet included). Their state, delivery count and times are
        the caller's to set: they are the index's."""
        ...

    def load_sequences(self) -> dict[str, int]:
        """Last assigned sequence number per sequence-owning entity."""
        ...

    def load_session_states(self) -> Iterator[tuple[str, str, bytes]]: ...

    def load_session_state_times(self) -> Iterator[tuple[str, str, int]]:
        """(entity, session id, ms) of the last time each session's state was set (cleared included)."""
        ...

    def load_duplicates(self, now_ms: int) -> Iterator[tuple[str, str, int]]:
        """(entity, message id, expires ms) of duplicate-detection entries still valid at now_ms."""
        ...

    # --- buffered mutations -----------------------------------------------------------------
    def put_message(self, entity: str, msg: BrokerMessage) -> None:
        """Insert or fully rewrite a message (content or properties changed)."""
        ...

    def update_message(self, entity: str, msg: BrokerMessage) -> None:
        """Only state, delivery count and times changed."""
        ...

    def delete_message(self, entity: str, sequence_number: int) -> None: ...

    def delete_messages(self, entity: str, sequence_numbers: Iterable[int]) -> None:
        """A slice of a purge (broker/purge.py): forget exactly these messages of the container (their
        pending writes too); the container's other messages, older or newer, are kept."""
        ...

    def set_sequence(self, entity: str, last_sequence_number: int) -> None: ...

    def set_session_state(self, entity: str, session_id: str, state: bytes | None, updated_ms: int = 0) -> None:
        """Set (None: clear) a session's state, recording when (get-message-sessions lists by that time)."""
        ...

    def add_duplicate(self, entity: str, message_id: str, expires_ms: int) -> None: ...

    def prune_duplicates(self, now_ms: int) -> None:
        """Forget duplicate-detection entries that expired before now_ms."""
        ...

    def save_entity(self, key: str, kind: str, description: str) -> None:
        """Remember an entity's description (created or changed at run time, or a deletion marker)."""
        ...

    def forget_entity(self, key: str) -> None:
        """Drop only the stored description of an entity (its messages stay)."""
        ...

    def delete_entity(self, key: str) -> None:
        """Forget a runtime entity and everything stored under it (and under its sub-queues)."""
        ...

    # --- a commit that failed ---------------------------------------------------------------------
    def pending_messages(self) -> Iterator[tuple[str, int, BrokerMessage]]:
        """(entity, sequence number, message) of every full message write not yet committed."""
        ...

    def discard(self, entity: str, sequence_number: int) -> None:
        """Forget the pending write of one message (a send taken back after its commit failed)."""
        ...

    def discard_duplicate(self, entity: str, message_id: str) -> None:
        """Forget a pending duplicate-detection entry (of a send taken back)."""
        ...

    # --- a change taken back ------------------------------------------------------------------
    def savepoint(self) -> object:
        """The buffered writes as they are now, for :meth:`rollback_to`. It copies the buffer, so it is
        meant for one taken right after a commit (an empty or nearly empty buffer): a management change
        that must be written before it is answered (broker/topology.py's change log)."""
        ...

    def rollback_to(self, savepoint: object) -> None:
        """Forget every write buffered since ``savepoint`` (a change whose commit failed and that is
        taken back): they are neither written by a later commit nor read back."""
        ...

    def discard_entity(self, key: str) -> None:
        """Forget the pending message writes of a container and of the containers under it, without
        deleting anything stored (the lock returns of an entity whose deletion was just written)."""
        ...

    # --- durability ----------------------------------------------------------------------------
    def ensure_room(self, entity: str) -> None:
        """Make sure a settlement of ``entity`` (a completion, abandon, deferral: deletions and delivery
        state) will be written by the next commit whatever else that commit meets, or raise
        :class:`StoreError`: the gateway asks before it applies a settlement it confirms, and refuses
        the settlement (ServerBusy) when it cannot be kept. A store that keeps nothing passes."""
        ...

    def commit(self) -> None:
        """Make the buffered mutations durable; :class:`StoreError` if they could not be written (then
        they are all still buffered)."""
        ...

    def commit_wanted(self) -> bool:
        """Whether so much is buffered that work done in slices (a receiver's pump, lapsing or returned
        locks, a range settlement) should stop and let a commit run first. A durable commit's time grows
        with what it writes: 100,000 locks taken in slices of 10 ms but committed a slice at a time made
        single event-loop callbacks of 40-55 ms. Always False for a store whose commit costs nothing."""
        ...

    def fold_due(self) -> bool:
        """Whether the store has deferred work (a durable store's delivery journal filling up) that
        :meth:`fold` should do in a callback of its own, before a commit has to do it on its way."""
        ...

    def fold(self) -> None:
        """Do the deferred work :meth:`fold_due` announced; :class:`StoreError` if it could not be
        written (then it stays, and a later commit or fold tries again)."""
        ...

    def close(self) -> None: ...
