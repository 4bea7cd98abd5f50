"""SQLite implementation of :class:`~sbemulator.store.base.Store`.

One connection, WAL journal, ``synchronous=NORMAL`` (durable across process crashes; an OS crash
may lose the last commits, an acceptable trade for an emulator). Mutations are buffered in Python
and written with ``executemany`` inside one explicit transaction per :meth:`commit`. Buffering by
message key also coalesces work: a message sent and completed within one batch never touches disk,
and several delivery-count updates of one message become one UPDATE. A commit that only deletes
messages and updates their delivery state (completions, receive-and-delete, the locks a delivery
takes) goes to the :class:`~.journal.DeliveryJournal` beside the database instead, with the same
durability, and reaches SQLite with a later transaction.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from sbemulator.model import BrokerMessage, MessageState

from .base import IndexEntry, StoreError, store_error
from .journal import DeliveryJournal
from .serialize import decode_message, encode_message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entities(key TEXT PRIMARY KEY, kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages(
    entity TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state INTEGER NOT NULL,
    delivery_count INTEGER NOT NULL,
    enqueued_ms INTEGER NOT NULL,
    expires_ms INTEGER,
    data BLOB NOT NULL,
    size INTEGER,
    PRIMARY KEY(entity, seq)
);
CREATE TABLE IF NOT EXISTS sequences(entity TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS session_states(
    entity TEXT NOT NULL, session_id TEXT NOT NULL, state BLOB NOT NULL, PRIMARY KEY(entity, session_id)
);
CREATE TABLE IF NOT EXISTS session_state_times(
    entity TEXT NOT NULL, session_id TEXT NOT NULL, updated_ms INTEGER NOT NULL, PRIMARY KEY(entity, session_id)
);
CREATE TABLE IF NOT EXISTS duplicates(
    entity TEXT NOT NULL, message_id TEXT NOT NULL, expires_ms INTEGER NOT NULL,
    PRIMARY KEY(entity, message_id)
);
CREATE INDEX IF NOT EXISTS duplicates_expiry ON duplicates(expires_ms);
"""
_SCHEMA_VERSION = "1"

_DEL, _META, _PUT = 0, 1, 2

_SQL_PUT = (
    "INSERT OR REPLACE INTO messages(entity, seq, state, delivery_count, enqueued_ms, expires_ms, data, size) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# Read-ahead of paged messages (broker.paging): available messages per container held in memory.
DEFAULT_PAGE_WINDOW = 10_000
_SQL_META = (
    "UPDATE messages SET state = ?, delivery_count = ?, enqueued_ms = ?, expires_ms = ? "
    "WHERE entity = ? AND seq = ?"
)
_SQL_DEL = "DELETE FROM messages WHERE entity = ? AND seq = ?"
_SQL_DEL_RANGE = "DELETE FROM messages WHERE entity = ? AND seq BETWEEN ? AND ?"


def _runs(keys: Iterable[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """The keys as runs of consecutive sequence numbers per entity ``(entity, first, last)``: every
    number of a run is one of the keys, so a range delete of the run deletes those rows and no other.
    Receivers complete mostly in sequence order, and one range delete costs SQLite far less than a
    delete per row."""
    runs: list[list] = []
    for entity, seq in sorted(keys):
        if runs:
            last = runs[-1]
            if last[2] == seq - 1 and last[0] == entity:
                last[2] = seq
                continue
        runs.append([entity, seq, seq])
    return [(entity, first, last) for entity, first, last in runs]


class SqliteStore:
    """``SqliteStore(None)`` keeps everything in memory (tests, ``--in-memory``).

    ``page_window``: how many available messages of a queue or subscription the broker keeps in memory
    before it leaves the rest to the store and pages them in ahead of delivery (broker/paging.py);
    0 keeps every message in memory."""

    def __init__(self, path: str | Path | None = None, page_window: int = DEFAULT_PAGE_WINDOW) -> None:
        try:
            self._open(path, page_window)
        except (sqlite3.Error, OSError) as exc:
            if path is None:
                raise
            raise DataDirError.of(Path(path).parent, exc) from None
        if self.path is not None:
            _write_pid(self.path)

    def _open(self, path: str | Path | None, page_window: int) -> None:
        self.path = None if path is None else Path(path)
        self.page_window = page_window if path is not None else 0
        target = ":memory:" if path is None else str(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves.
        # timeout=0: a data directory another process holds is reported at once (its lock is held for
        # good, so waiting would not help), not after SQLite's default five seconds of retries.
        self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        if self.path is not None:
            # One process owns its data directory: holding the lock for good spares the file locking
            # (fcntl calls) of every transaction, a fifth of a small commit's cost.
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
        self._db.executescript(_SCHEMA)
        if "size" not in {row[1] for row in self._db.execute("PRAGMA table_info(messages)")}:
            # A store written before sizes were kept: its rows load whole (their size is in their data).
            self._db.execute("ALTER TABLE messages ADD COLUMN size INTEGER")
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)", (_SCHEMA_VERSION,))
        elif row[0] != _SCHEMA_VERSION:
            raise RuntimeError(
                f"{target}: store schema version {row[0]} is not supported (expected "
                f"{_SCHEMA_VERSION}); delete the data directory to start afresh"
            )
        self._messages: dict[tuple[str, int], tuple[int, BrokerMessage | None]] = {}
        self._sequences: dict[str, int] = {}
        self._sessions: dict[tuple[str, str], tuple[bytes | None, int]] = {}  # -> (state, updated ms)
        self._duplicates: list[tuple[str, str, int]] = []
        self._entity_ops: list[tuple[str, tuple]] = []
        self._closed = False
        self._journal: DeliveryJournal | None = None
        if self.path is not None:
            self._journal = DeliveryJournal(self.path.with_name(self.path.name + "-delivery-log"))
            self.fold_journal()  # what the last process confirmed: applied before anything is read

    # --- loading ---------------------------------------------------------------------------
    def load_entities(self) -> list[tuple[str, str, str]]:
        return list(self._db.execute("SELECT key, kind, data FROM entities ORDER BY rowid"))

    def load_messages(self, paged: Collection[str] = ()) -> Iterator[tuple[str, BrokerMessage | IndexEntry]]:
        """Every message in (entity, sequence) order; the active ones of the ``paged`` entities as an
        :data:`IndexEntry` only, their data not even fetched from SQLite (one scan for both)."""
        if paged:
            marks = ", ".join("?" * len(paged))
            data = f"CASE WHEN state = 0 AND size IS NOT NULL AND entity IN ({marks}) THEN NULL ELSE data END"
        else:
            data = "data"
        cur = self._db.execute(
            f"SELECT entity, seq, state, delivery_count, enqueued_ms, expires_ms, size, {data} FROM messages "
            "ORDER BY entity, seq",
            tuple(paged),
        )
        for entity, seq, state, count, enqueued, expires, size, data in cur:
            if data is None:
                yield entity, (seq, count, enqueued, expires, size)
                continue
            msg = decode_message(data)
            msg.sequence_number = seq
            msg.state = MessageState(state)
            msg.delivery_count = count
            msg.enqueued_time_ms = enqueued
            msg.expires_at_ms = expires
            yield entity, msg

    def read_messages(self, entity: str, first: int, last: int) -> dict[int, BrokerMessage]:
        """The stored messages of ``entity`` numbered ``first`` to ``last`` (one range scan), the ones
        still waiting for a commit included; their state columns are the caller's (it has them in its
        index), so only what ``encode_message`` keeps is read."""
        pending = self._messages
        out: dict[int, BrokerMessage] = {}
        for seq, data in self._db.execute(
            "SELECT seq, data FROM messages WHERE entity = ? AND seq BETWEEN ? AND ?", (entity, first, last)
        ):
            out[seq] = decode_message(data)
        if pending:
            if last - first < len(pending):
                for seq in range(first, last + 1):
                    entry = pending.get((entity, seq))
                    if entry is not None and entry[0] == _PUT:
                        out[seq] = entry[1]  # type: ignore[assignment]
            else:
                for (ent, seq), (op, msg) in pending.items():
                    if op == _PUT and ent == entity and first <= seq <= last:
                        out[seq] = msg  # type: ignore[assignment]
        return out

    def load_sequences(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT entity, last_seq FROM sequences"))

    def load_session_states(self) -> Iterator[tuple[str, str, bytes]]:
        yield from self._db.execute("SELECT entity, session_id, state FROM session_states")

    def load_session_state_times(self) -> Iterator[tuple[str, str, int]]:
        yield from self._db.execute("SELECT entity, session_id, updated_ms FROM session_state_times")

    def load_duplicates(self, now_ms: int) -> Iterator[tuple[str, str, int]]:
        yield from self._db.execute(
            "SELECT entity, message_id, expires_ms FROM duplicates WHERE expires_ms > ? ORDER BY expires_ms",
            (now_ms,),
        )

    # --- buffered mutations ------------------------------------------------------------------
    def put_message(self, entity: str, msg: BrokerMessage) -> None:
        self._messages[(entity, msg.sequence_number)] = (_PUT, msg)

    def update_message(self, entity: str, msg: BrokerMessage) -> None:
        key = (entity, msg.sequence_number)
        prev = self._messages.get(key)
        # A pending full write already carries the new values; after a pending delete the row
        # may be gone, so write it fully.
        op = _META if prev is None else (_PUT if prev[0] in (_PUT, _DEL) else _META)
        self._messages[key] = (op, msg)

    def delete_message(self, entity: str, sequence_number: int) -> None:
        self._messages[(entity, sequence_number)] = (_DEL, None)

    def set_sequence(self, entity: str, last_sequence_number: int) -> None:
        self._sequences[entity] = last_sequence_number

    def set_session_state(self, entity: str, session_id: str, state: bytes | None, updated_ms: int = 0) -> None:
        self._sessions[(entity, session_id)] = (state, updated_ms)

    def add_duplicate(self, entity: str, message_id: str, expires_ms: int) -> None:
        self._duplicates.append((entity, message_id, expires_ms))

    def save_entity(self, key: str, kind: str, description: str) -> None:
        self._entity_ops.append(
            ("INSERT OR REPLACE INTO entities(key, kind, data) VALUES (?, ?, ?)", (key, kind, description))
        )

    def forget_entity(self, key: str) -> None:
        self._entity_ops.append(("DELETE FROM entities WHERE key = ?", (key,)))

    def delete_entity(self, key: str) -> None:
        # Flush pending work first so later buffered writes cannot resurrect rows.
        prefix = key + "/"
        self._messages = {
            k: v for k, v in self._messages.items() if k[0] != key and not k[0].startswith(prefix)
        }
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        self._entity_ops.append(("DELETE FROM entities WHERE key = ? OR key LIKE ? ESCAPE '\\'", (key, like)))
        for table in ("messages", "sequences", "session_states", "session_state_times", "duplicates"):
            self._entity_ops.append(
                (f"DELETE FROM {table} WHERE entity = ? OR entity LIKE ? ESCAPE '\\'", (key, like))
            )

    # --- a commit that failed ------------------------------------------------------------------
    def pending_messages(self) -> Iterator[tuple[str, int, BrokerMessage]]:
        for (entity, seq), (op, msg) in self._messages.items():
            if op == _PUT and msg is not None:
                yield entity, seq, msg

    def discard(self, entity: str, sequence_number: int) -> None:
        self._messages.pop((entity, sequence_number), None)

    def discard_duplicate(self, entity: str, message_id: str) -> None:
        self._duplicates = [d for d in self._duplicates if d[0] != entity or d[1] != message_id]

    # --- durability --------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return bool(
            self._messages or self._sequences or self._sessions or self._duplicates or self._entity_ops
        )

    def commit(self) -> None:
        """Write what is buffered in one transaction (or one journal record). If it cannot be written
        (a full disk, an I/O error) it raises :class:`~.base.StoreError` and keeps all of it buffered,
        to be tried again by the next commit."""
        try:
            messages = self._messages
            only_messages = self._only_messages()
            if not messages and only_messages:
                return  # most flushes follow a read that changed nothing durable
            if self._closed:
                return
            journal = self._journal
            if journal is not None and len(messages) == 1 and only_messages:
                # One completion per request is the SDK's peek-lock path: its record without the general loop.
                ((key, (op, _)),) = messages.items()
                if op == _DEL and journal.append_delete(key):
                    messages.clear()
                    return
            journal_full = False
            if journal is not None and self._only_deliveries():
                deletes = [key for key, (op, _) in messages.items() if op == _DEL]
                updates = [
                    (key, (int(msg.state), msg.delivery_count, msg.enqueued_time_ms, msg.expires_at_ms))
                    for key, (op, msg) in messages.items()
                    if op == _META and msg is not None
                ]
                if journal.append(deletes, updates):
                    messages.clear()
                    return
                journal_full = True
            # The journal is folded into SQLite (and emptied) before the writes below when they could be
            # undone by its replay at start-up (a journaled key written again, an entity deleted and created
            # again) or when it is full. Folding in its own transaction first means a kill at any point
            # leaves nothing in the journal older than what SQLite holds.
            if journal is not None and journal and (
                journal_full or bool(self._entity_ops) or journal.holds_any(messages)
            ):
                self.fold_journal()
            puts, metas, dels = [], [], []
            for (entity, seq), (op, msg) in messages.items():
                if op == _DEL:
                    dels.append((entity, seq))
                elif op == _PUT:
                    assert msg is not None
                    puts.append(
                        (
                            entity,
                            seq,
                            int(msg.state),
                            msg.delivery_count,
                            msg.enqueued_time_ms,
                            msg.expires_at_ms,
                            encode_message(msg),
                            msg.size,
                        )
                    )
                else:
                    assert msg is not None
                    metas.append(
                        (int(msg.state), msg.delivery_count, msg.enqueued_time_ms, msg.expires_at_ms, entity, seq)
                    )
            db = self._db
            db.execute("BEGIN")
            try:
                for sql, args in self._entity_ops:
                    db.execute(sql, args)
                if dels:
                    db.executemany(_SQL_DEL, dels)
                if puts:
                    db.executemany(_SQL_PUT, puts)
                if metas:
                    db.executemany(_SQL_META, metas)
                if self._sequences:
                    db.executemany(
                        "INSERT INTO sequences(entity, last_seq) VALUES (?, ?) "
                        "ON CONFLICT(entity) DO UPDATE SET last_seq = excluded.last_seq",
                        list(self._sequences.items()),
                    )
                if self._sessions:
                    sets = [(e, s, st) for (e, s), (st, _) in self._sessions.items() if st is not None]
                    clears = [(e, s) for (e, s), (st, _) in self._sessions.items() if st is None]
                    db.executemany(
                        "INSERT OR REPLACE INTO session_state_times(entity, session_id, updated_ms) VALUES (?, ?, ?)",
                        [(e, s, ms) for (e, s), (_, ms) in self._sessions.items()],
                    )
                    if clears:
                        db.executemany("DELETE FROM session_states WHERE entity = ? AND session_id = ?", clears)
                    if sets:
                        db.executemany(
                            "INSERT OR REPLACE INTO session_states(entity, session_id, state) VALUES (?, ?, ?)",
                            sets,
                        )
                if self._duplicates:
                    db.executemany(
                        "INSERT OR REPLACE INTO duplicates(entity, message_id, expires_ms) VALUES (?, ?, ?)",
                        self._duplicates,
                    )
                db.execute("COMMIT")
            except BaseException:
                _roll_back(db)
                raise
            self._messages.clear()
            self._sequences.clear()
            self._sessions.clear()
            self._duplicates.clear()
            self._entity_ops.clear()
        except (sqlite3.Error, OSError) as exc:
            raise store_error(exc) from exc

    def _only_messages(self) -> bool:
        """Whether the pending work touches messages only (no sequences, sessions, duplicates, entities)."""
        return not (self._sequences or self._sessions or self._duplicates or self._entity_ops)

    def _only_deliveries(self) -> bool:
        """Whether the pending work is only deletions and delivery-state updates (the journal's)."""
        return self._only_messages() and all(op != _PUT for op, _ in self._messages.values())

    def _apply_journal(self, journal: DeliveryJournal) -> None:
        db = self._db
        if journal.updates:
            db.executemany(_SQL_META, [(*values, entity, seq) for (entity, seq), values in journal.updates.items()])
        if journal.deletes:
            db.executemany(_SQL_DEL_RANGE, _runs(journal.deletes))

    def fold_journal(self) -> None:
        """Apply the journaled deletions and updates to SQLite and empty the journal."""
        journal = self._journal
        if journal is None or not journal:
            return
        db = self._db
        db.execute("BEGIN")
        try:
            self._apply_journal(journal)
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            raise
        journal.reset()

    def prune_duplicates(self, now_ms: int) -> None:
        """Drop expired duplicate-detection rows (called occasionally by the broker)."""
        self._entity_ops.append(("DELETE FROM duplicates WHERE expires_ms <= ?", (now_ms,)))

    def close(self) -> None:
        """Write what is pending and fold the journal into SQLite. If the disk cannot take it, the store
        is closed anyway and a :class:`~.base.StoreError` says what was not written: acknowledged sends
        are on disk already (they were committed before they were accepted) and the journal keeps its
        records for the next start; what stays unwritten (completions beyond the journal, lock and
        expiry changes) only means that those messages are delivered again."""
        if self._closed:
            return
        failure: StoreError | None = None
        unwritten = self._pending_count()
        try:
            self.commit()
            unwritten = 0
            self.fold_journal()
        except (sqlite3.Error, OSError, StoreError) as exc:
            failure = store_error(exc)
        self._closed = True
        self._db.close()
        if self._journal is not None:
            self._journal.close()
        if self.path is not None:
            self.path.with_name(PID_FILE).unlink(missing_ok=True)
        if failure is not None:
            journal = "the delivery journal stays and is applied at the next start"
            lost = (f"{unwritten} buffered changes were not written (those messages are delivered again); "
                    if unwritten else "")
            raise type(failure)(f"could not write to {self.path} at shutdown ({failure.reason}): {lost}{journal}; "
                                "every acknowledged send is stored")

    def _pending_count(self) -> int:
        return (len(self._messages) + len(self._sequences) + len(self._sessions) + len(self._duplicates)
                + len(self._entity_ops))


def _roll_back(db: sqlite3.Connection) -> None:
    """End a failed transaction. SQLite may have rolled it back itself (it does on SQLITE_FULL and some
    I/O errors), and a ROLLBACK then fails: that must not hide the error that made it fail."""
    if getattr(db, "in_transaction", True):
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass


PID_FILE = "sbemulator.pid"  # beside the database: who holds the data directory, for the next one's error


def _write_pid(db_path: Path) -> None:
    try:
        db_path.with_name(PID_FILE).write_text(f"{os.getpid()}\n")
    except OSError:
        pass  # only a hint for another process's error message


class DataDirError(Exception):
    """The data directory cannot serve as the store: one line that says why and what to do."""

    @classmethod
    def of(cls, directory: Path, exc: BaseException) -> DataDirError:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        err = getattr(exc, "errno", None)
        what = f"data directory {directory}"
        if code == _SQLITE_BUSY or "locked" in str(exc):
            holder = _holder(directory)
            return cls(f"{what} is in use by {holder}: use --data-dir or --in-memory")
        if (code == _SQLITE_READONLY or err in (errno.EROFS, errno.EACCES, errno.EPERM) or "readonly" in str(exc)
                or (code == _SQLITE_CANTOPEN and not _writable(directory))):
            return cls(f"{what} is read-only ({exc}): make it writable, or use --data-dir or --in-memory")
        if store_error(exc).full:
            return cls(f"{what} is on a full file system ({exc}): free space there, or use --data-dir or "
                       "--in-memory")
        return cls(f"{what} cannot hold the store ({exc}): use --data-dir or --in-memory")


_SQLITE_BUSY, _SQLITE_READONLY, _SQLITE_CANTOPEN = 5, 8, 14


def _writable(directory: Path) -> bool:
    try:
        return os.access(directory, os.W_OK) and not os.statvfs(directory).f_flag & os.ST_RDONLY
    except OSError:
        return False


def _holder(directory: Path) -> str:
    try:
        pid = int((directory / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return "another process"
    return f"process {pid}"
