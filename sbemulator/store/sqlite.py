"""SQLite implementation of :class:`~sbemulator.store.base.Store`.

One connection, WAL journal, ``synchronous=NORMAL`` (durable across process crashes; an OS crash
may lose the last commits, an acceptable trade for an emulator). Mutations are buffered in Python
and written with ``executemany`` inside one explicit transaction per :meth:`commit`. Buffering by
message key also coalesces work: a message sent and completed within one batch never touches disk,
and several delivery-count updates of one message become one UPDATE. A commit that only deletes
messages and updates their delivery state (completions, receive-and-delete, the locks a delivery
takes) goes to the :class:`~.journal.DeliveryJournal` beside the database instead, with the same
durability, and reaches SQLite with a later transaction.

Layout (schema 2): a message is two rows under one integer key, ``entity id << 40 | sequence number``
(``entity_ids`` numbers the containers): ``message_index`` holds its state and, packed in one 40-byte
blob, what the broker's index of a paged-out message needs (sequence number, delivery count, enqueued
and expiry times, size); ``message_data`` holds the rest (``serialize.encode_message``). Why: start-up
reads only the index rows of the messages it pages (a million of them are ~53 MB of SQLite pages, where
rows holding their bodies were ~700 MB), their entries concatenated by SQLite into one value per 16,384
messages that becomes the broker's arrays with ``array.frombytes``, not five Python ints each; a
page-in is a range scan of ``message_data`` by its integer key. Both tables are keyed by SQLite's
rowid, so a write still touches two b-trees, as a row of the older layout with its ``(entity, seq)``
index did. A store of schema 1 (one ``messages`` table) is
rewritten into this layout in one transaction when it is opened (:meth:`SqliteStore._migrate`).

Why one file of more than 800 lines: every statement that writes the store's tables is here, beside
the buffers it drains and the one transaction that writes them, so what a commit writes (and what a
failed commit leaves unwritten) can be read in one place; the delivery journal, message serialization,
reading rows for inspection and the data directory's errors are modules of their own.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
from array import array
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from sbemulator.model import BrokerMessage, MessageState
from sbemulator.scheduling import DEFAULT_SLICES, Slices

from .base import FULL, PROCESS, IndexEntry, StoreError, store_error
from .datadir import PID_FILE, DataDirError, _write_pid
from .journal import DeliveryJournal
from .rows import dropped_rows, stored_rows  # noqa: F401  (read over any connection: tests, a person)
from .serialize import decode_message, encode_message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entities(key TEXT PRIMARY KEY, kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entity_ids(entity TEXT PRIMARY KEY, id INTEGER NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS message_index(k INTEGER PRIMARY KEY, state INTEGER NOT NULL, entry BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS message_data(k INTEGER PRIMARY KEY, data BLOB NOT NULL);
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
CREATE TABLE IF NOT EXISTS dropped_ids(id INTEGER PRIMARY KEY);
"""
_SCHEMA_VERSION = "2"
_SCHEMA_V1 = "1"  # one messages table keyed by (entity, seq), bodies in its rows: migrated when opened

_DEL, _META, _PUT = 0, 1, 2

SEQ_BITS = 40  # a message's key is its container's id << SEQ_BITS | its sequence number
MAX_SEQUENCE = (1 << SEQ_BITS) - 1  # a trillion per container; ids up to 2**23
_ENTRY = struct.Struct("<5q")  # sequence number, delivery count, enqueued ms, expires ms (-1: none), size
ENTRY_FIELDS = 5
_SWAP = sys.byteorder != "little"
_LOAD_ROWS = 16_384  # index entries per array handed to the broker at start-up (640 KiB of them)

_SQL_PUT_INDEX = "INSERT OR REPLACE INTO message_index(k, state, entry) VALUES (?, ?, ?)"
_SQL_PUT_DATA = "INSERT OR REPLACE INTO message_data(k, data) VALUES (?, ?)"
# Read-ahead of paged messages (broker.paging): available messages per container held in memory.
DEFAULT_PAGE_WINDOW = 10_000
# The journal is folded in a callback of its own (fold_due) once it is this full, so that a commit seldom
# finds it full and folds on its way (a fold of a whole journal, ~1,300 updates, is about 8 ms).
FOLD_AT = 0.5
WAL_CHECKPOINT_PAGES = 256  # 1 MiB of WAL between checkpoints (see _open)
_SQL_META = "UPDATE message_index SET state = ?, entry = ? WHERE k = ?"
# The journal's updates carry no size: the entry keeps its own (sb_entry, a function of this connection).
_SQL_JOURNAL_META = "UPDATE message_index SET state = ?, entry = sb_entry(entry, ?, ?, ?) WHERE k = ?"
_SQL_DEL = ("DELETE FROM message_index WHERE k = ?", "DELETE FROM message_data WHERE k = ?")
_SQL_DEL_RANGE = ("DELETE FROM message_index WHERE k BETWEEN ? AND ?",
                  "DELETE FROM message_data WHERE k BETWEEN ? AND ?")


def _entry(seq: int, count: int, enqueued_ms: int, expires_ms: int | None, size: int) -> bytes:
    return _ENTRY.pack(seq, count, enqueued_ms, -1 if expires_ms is None else expires_ms, size)


def _sb_entry(entry: bytes, count: int, enqueued_ms: int, expires_ms: int | None) -> bytes:
    """An index entry with new delivery values, its sequence number and size kept (journal folds)."""
    seq, _, _, _, size = _ENTRY.unpack(entry)
    return _entry(seq, count, enqueued_ms, expires_ms, size)


def _entry_bound(name_bytes: int) -> int:
    """The most bytes a journal entry of a container named in ``name_bytes`` bytes, or of its sub-queues,
    takes: kind and length (3), the name and 32 for a suffix such as ``/$deadletterqueue``, sequence
    number (8), values (32)."""
    return 43 + name_bytes + 32


def _runs(keys: Iterable[int]) -> list[tuple[int, int]]:
    """The keys as runs of consecutive keys ``(first, last)``: every key of a run is one of ``keys``, so
    a range delete of the run deletes those rows and no other. Receivers complete mostly in sequence
    order, and one range delete costs SQLite far less than a delete per row."""
    runs: list[list[int]] = []
    for k in sorted(keys):
        if runs and runs[-1][1] == k - 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return [(first, last) for first, last in runs]


class SqliteStore:
    writes = True  # Store.writes
    """``SqliteStore(None)`` keeps everything in memory (tests, ``--in-memory``).

    ``page_window``: how many available messages of a queue or subscription the broker keeps in memory
    before it leaves the rest to the store and pages them in ahead of delivery (broker/paging.py);
    0 keeps every message in memory. ``slices``: the buffered writes at which work in slices wants a
    commit (``Slices.commit_rows``) and the rows of a deleted entity one fold deletes (``drop_rows``)."""

    def __init__(self, path: str | Path | None = None, page_window: int = DEFAULT_PAGE_WINDOW,
                 durability: str = PROCESS, slices: Slices = DEFAULT_SLICES) -> None:
        if durability not in (PROCESS, FULL):
            raise ValueError(f"durability {durability!r}: expected {PROCESS!r} or {FULL!r}")
        self.durability = durability
        self._commit_rows = slices.commit_rows
        self._drop_rows = slices.drop_rows
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
        # process: a commit is in the page cache (it survives a killed process, not an OS crash); full: SQLite
        # fsyncs the WAL at every commit, and the journal is msynced before its records are confirmed.
        self._db.execute("PRAGMA synchronous=FULL" if self.durability == FULL else "PRAGMA synchronous=NORMAL")
        # A checkpoint (WAL pages copied into the database, two fsyncs) runs inside the commit that fills
        # the WAL to this many pages, so it holds the event loop for as long. One-off script, purge slices
        # of 2,048 rows on a store of 200,000: at SQLite's default of 1,000 pages the slices with a
        # checkpoint took up to 45 ms of wall time (CPU 14 ms), at 250 pages up to 15.6 ms, for about the
        # same time in all (30 slices: 299 ms at 1,000 pages, 257 ms at 250).
        self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        if self.path is not None:
            # One process owns its data directory: holding the lock for good spares the file locking
            # (fcntl calls) of every transaction, a fifth of a small commit's cost.
            self._db.execute("PRAGMA locking_mode=EXCLUSIVE")
        self._db.create_function("sb_entry", 4, _sb_entry, deterministic=True)
        self._db.executescript(_SCHEMA)
        self._ids: dict[str, int] = dict(self._db.execute("SELECT entity, id FROM entity_ids"))
        # ensure_room: the most a journal entry can take (the longest container name known, sub-queues included)
        self._entry_bound = _entry_bound(max((len(name.encode()) for name in self._ids), default=0))
        self._new_ids: list[tuple[str, int]] = []  # allocated, written with the next commit
        # A deleted entity's containers (their entity_ids rows gone with the delete's commit): ids whose
        # rows are still to be deleted, a slice at a time (drop_slice). Ids are never reused: the next one is
        # above every id in use, dropped, or cleaned up already (meta 'last_id').
        self._dropped: list[int] = [row[0] for row in self._db.execute("SELECT id FROM dropped_ids ORDER BY id")]
        self._dropping: list[int] = []  # dropped by a delete not committed yet
        last_id = self._db.execute("SELECT value FROM meta WHERE key = 'last_id'").fetchone()
        self._next_id = max(max(self._ids.values(), default=0), max(self._dropped, default=0),
                            int(last_id[0]) if last_id is not None else 0) + 1
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)", (_SCHEMA_VERSION,))
        elif row[0] == _SCHEMA_V1:
            self._migrate()
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
        # A purge's slices (delete_messages): key ranges of purged rows, deleted with the next commit. Unlike
        # the entity operations they need no fold of the delivery journal first: its replay cannot bring back
        # a deleted row (an update of a missing row changes nothing), and a purged message is never written
        # again. A fold per slice cost a purge of 100,000 up to 40 ms per commit while other clients settled.
        self._range_deletes: list[tuple[int, int]] = []
        self._range_rows = 0  # how many rows those ranges cover (commit_wanted)
        self._closed = False
        self._atomic = False  # a savepoint is open: the next commit is one transaction, nothing journaled apart
        self._journal: DeliveryJournal | None = None
        if self.path is not None:
            self._journal = DeliveryJournal(self.path.with_name(self.path.name + "-delivery-log"))
            self.fold_journal()  # what the last process confirmed: applied before anything is read

    def _migrate(self) -> None:
        """Rewrite a schema-1 store (one ``messages`` table, bodies in the rows the start-up scan read)
        into the two tables of schema 2, in one transaction: a kill before its commit leaves the old
        layout as it was, to be migrated at the next start. Runs before the delivery journal is folded,
        which then applies to the new tables. Rows written before sizes were kept get theirs from their
        data (the one time a body is decoded for it)."""
        db = self._db
        columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
        size = "size" if "size" in columns else "NULL"
        db.execute("BEGIN")
        try:
            cur = db.execute(
                f"SELECT entity, seq, state, delivery_count, enqueued_ms, expires_ms, {size}, data FROM messages "
                "ORDER BY entity, seq"
            )
            while rows := cur.fetchmany(1000):
                index, data = [], []
                for entity, seq, state, count, enqueued, expires, msg_size, blob in rows:
                    if msg_size is None:
                        msg_size = decode_message(blob).size
                    k = self._key(entity, seq)
                    index.append((k, state, _entry(seq, count, enqueued, expires, msg_size)))
                    data.append((k, blob))
                db.executemany(_SQL_PUT_INDEX, index)
                db.executemany(_SQL_PUT_DATA, data)
            self._write_ids()
            db.execute("DROP TABLE messages")
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (_SCHEMA_VERSION,))
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            self._ids = dict(db.execute("SELECT entity, id FROM entity_ids"))
            self._new_ids.clear()
            raise
        self._new_ids.clear()

    def _key(self, entity: str, seq: int) -> int:
        """A message's row key; a container's id is allocated the first time one of its messages is
        written (ids are never reused: the table holds one small row per container that ever had one)."""
        eid = self._ids.get(entity)
        if eid is None:
            eid = self._ids[entity] = self._next_id
            self._next_id += 1
            self._entry_bound = max(self._entry_bound, _entry_bound(len(entity.encode())))
            self._new_ids.append((entity, eid))
        return eid << SEQ_BITS | seq

    def _write_ids(self) -> None:
        if self._new_ids:
            self._db.executemany("INSERT INTO entity_ids(entity, id) VALUES (?, ?)", self._new_ids)

    # --- loading ---------------------------------------------------------------------------
    def load_entities(self) -> list[tuple[str, str, str]]:
        return list(self._db.execute("SELECT key, kind, data FROM entities ORDER BY rowid"))

    def load_messages(self, paged: Collection[str] = ()) -> Iterator[tuple[str, BrokerMessage | IndexEntry]]:
        """Every message, container by container, in sequence order within each; the active ones of the
        ``paged`` containers as :data:`~.base.IndexRows` (arrays of index entries, their data not read:
        the scan reads ``message_index`` only), the others whole."""
        db = self._db
        paged = set(paged)
        for entity, eid in sorted(self._ids.items()):
            lo, hi = eid << SEQ_BITS, eid << SEQ_BITS | MAX_SEQUENCE
            rest = ""
            if entity in paged:
                yield from ((entity, entries) for entries in self._load_index(lo, hi))
                rest = " AND i.state != 0"
            for state, entry, data in db.execute(
                "SELECT i.state, i.entry, d.data FROM message_index i JOIN message_data d ON d.k = i.k "
                f"WHERE i.k BETWEEN ? AND ?{rest} ORDER BY i.k",
                (lo, hi),
            ):
                seq, count, enqueued, expires, _size = _ENTRY.unpack(entry)
                msg = decode_message(data)
                msg.sequence_number = seq
                msg.state = MessageState(state)
                msg.delivery_count = count
                msg.enqueued_time_ms = enqueued
                msg.expires_at_ms = None if expires < 0 else expires
                yield entity, msg

    def _load_index(self, lo: int, hi: int) -> Iterator[array]:
        """The index entries of the active messages keyed ``lo`` to ``hi``, in key order, as arrays of
        :data:`_LOAD_ROWS` entries. SQLite concatenates the entry blobs of each chunk itself
        (``group_concat`` keeps a blob's bytes, NULs included; the cast makes the result a blob again),
        so Python sees one bytes object per chunk instead of a row object and a bytes object per message:
        a third of the CPU of fetching the rows for a million messages."""
        db = self._db
        while True:
            count, last, blob = db.execute(
                "SELECT count(*), max(k), CAST(group_concat(entry, '') AS BLOB) FROM (SELECT k, entry FROM "
                "message_index WHERE k > ? AND k <= ? AND state = 0 ORDER BY k LIMIT ?)",
                (lo, hi, _LOAD_ROWS),
            ).fetchone()
            if not count:
                return
            entries = array("q")
            entries.frombytes(blob)
            if _SWAP:
                entries.byteswap()
            if len(entries) != count * ENTRY_FIELDS or entries[-ENTRY_FIELDS] != last & MAX_SEQUENCE:
                # Not in key order (SQLite does not promise an aggregate's order): sort the chunk here.
                rows = sorted(_ENTRY.unpack(row[0]) for row in db.execute(
                    "SELECT entry FROM message_index WHERE k > ? AND k <= ? AND state = 0 ORDER BY k LIMIT ?",
                    (lo, hi, _LOAD_ROWS)))
                entries = array("q", [value for row in rows for value in row])
            yield entries
            lo = last

    def read_messages(self, entity: str, first: int, last: int) -> dict[int, BrokerMessage]:
        """The stored messages of ``entity`` numbered ``first`` to ``last`` (one range scan), the ones
        still waiting for a commit included; their state columns are the caller's (it has them in its
        index), so only what ``encode_message`` keeps is read."""
        pending = self._messages
        out: dict[int, BrokerMessage] = {}
        eid = self._ids.get(entity)
        if eid is not None:
            base = eid << SEQ_BITS
            for k, data in self._db.execute(
                "SELECT k, data FROM message_data WHERE k BETWEEN ? AND ?", (base | first, base | last)
            ):
                out[k & MAX_SEQUENCE] = decode_message(data)
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
        if msg.sequence_number >> SEQ_BITS:  # negative or beyond MAX_SEQUENCE: not a key of this layout
            raise ValueError(f"sequence number {msg.sequence_number} is outside 0..{MAX_SEQUENCE}")
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

    def delete_messages(self, entity: str, sequence_numbers: Iterable[int]) -> None:
        """A slice of a purge (broker/purge.py): the rows of exactly these messages go with the next
        commit, as one range delete per run of consecutive numbers, before that commit's writes (a delete
        per row took 100,000 of them 400-700 ms; a purge's slice is a few thousand, mostly one run). Their
        pending writes are dropped; the container's others are kept (a message dead-lettered into it after
        the purge began keeps its own number, which no run of this slice covers)."""
        seqs = list(sequence_numbers)
        if not seqs:
            return
        pending = self._messages
        if pending:
            for seq in seqs:
                pending.pop((entity, seq), None)
        eid = self._ids.get(entity)
        if eid is None:
            return  # none of its rows was ever written
        base = eid << SEQ_BITS
        self._range_deletes.extend((base | first, base | last) for first, last in _runs(seqs))
        self._range_rows += len(seqs)

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
        self.discard_entity(key)
        prefix = key + "/"
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        self._entity_ops.append(("DELETE FROM entities WHERE key = ? OR key LIKE ? ESCAPE '\\'", (key, like)))
        # The containers' rows stay where they are for now: their ids leave entity_ids (so nothing reads
        # them again: start-up and page-ins find rows through the ids they know) and are recorded as dropped,
        # in this commit; the rows are deleted later, a slice per transaction (drop_slice). A container of
        # the same name created afterwards gets a new id, so none of the old rows can ever become its.
        for name in [name for name in self._ids if name == key or name.startswith(prefix)]:
            eid = self._ids.pop(name)
            self._entity_ops.append(("DELETE FROM entity_ids WHERE id = ?", (eid,)))
            self._entity_ops.append(("INSERT OR IGNORE INTO dropped_ids(id) VALUES (?)", (eid,)))
            self._dropping.append(eid)
        for table in ("sequences", "session_states", "session_state_times", "duplicates"):
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

    # --- a change taken back -------------------------------------------------------------------
    def savepoint(self) -> object:
        self._atomic = True  # until the change's commit is written or taken back (rollback_to)
        return (dict(self._messages), dict(self._sequences), dict(self._sessions), list(self._duplicates),
                list(self._entity_ops), list(self._range_deletes), dict(self._ids), list(self._dropping))

    def rollback_to(self, savepoint: object) -> None:
        assert isinstance(savepoint, tuple)
        messages, sequences, sessions, duplicates, entity_ops, range_deletes, ids, dropping = savepoint
        self._atomic = False
        # A delete taken back: its ids are its own again. Ids allocated since stay (their rows are written
        # with the next commit), unless their name has its old id back.
        self._ids, self._dropping = dict(ids), list(dropping)
        self._new_ids = [(name, eid) for name, eid in self._new_ids if self._ids.setdefault(name, eid) == eid]
        self._messages, self._sequences, self._sessions = dict(messages), dict(sequences), dict(sessions)
        self._duplicates, self._entity_ops = list(duplicates), list(entity_ops)
        self._range_deletes = list(range_deletes)
        if not self._range_deletes:
            self._range_rows = 0

    def discard_entity(self, key: str) -> None:
        prefix = key + "/"
        self._messages = {
            k: v for k, v in self._messages.items() if k[0] != key and not k[0].startswith(prefix)
        }

    # --- durability --------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return bool(
            self._messages or self._sequences or self._sessions or self._duplicates or self._entity_ops
            or self._range_deletes
        )

    def commit(self) -> None:
        """Write what is buffered: deletions and delivery-state updates as one journal record first
        (:meth:`_journal_deliveries`), the rest in one SQLite transaction. If that cannot be written (a
        full disk, an I/O error) it raises :class:`~.base.StoreError` and keeps the rest buffered, to be
        tried again by the next commit (what reached the journal stays written)."""
        try:
            messages = self._messages
            only_messages = self._only_messages()
            if not messages and only_messages:
                return  # most flushes follow a read that changed nothing durable
            if self._closed:
                return
            journal = self._journal
            journal_full = False
            if journal is not None and messages:
                journaled = self._journal_deliveries(journal, messages, only_messages)
                if journaled is None:
                    journal_full = True
                elif journaled and not messages and only_messages:
                    self._atomic = False
                    return
            # The journal is folded into SQLite (and emptied) before the writes below when they could be
            # undone by its replay at start-up (a journaled key written again, an entity deleted and created
            # again) or when it is full. Folding in its own transaction first means a kill at any point
            # leaves nothing in the journal older than what SQLite holds.
            if journal is not None and journal and (
                journal_full or bool(self._entity_ops) or journal.holds_any(messages)
            ):
                self.fold_journal()
            self._write_transaction(*self._message_rows(messages))
            self._written()
        except (sqlite3.Error, OSError) as exc:
            raise store_error(exc) from exc

    def _message_rows(self, messages: dict) -> tuple[list, list, list, list]:
        """The buffered messages as rows: (index puts, data puts, index updates, deletions)."""
        puts, datas, metas, dels = [], [], [], []
        ids, pack = self._ids, _ENTRY.pack
        last, base = None, 0  # the keys of one commit are mostly one container's: its id looked up once
        for (entity, seq), (op, msg) in messages.items():
            if entity != last:
                last = entity
                eid = ids.get(entity)
                if eid is None and op != _DEL:  # a deletion of what was never written needs no id
                    eid = self._key(entity, 0) >> SEQ_BITS
                base = -1 if eid is None else eid << SEQ_BITS
            if op == _DEL:
                if base >= 0:  # else nothing of it was ever written
                    dels.append((base | seq,))
                continue
            if base < 0:
                base = self._key(entity, 0)
            assert msg is not None
            expires = msg.expires_at_ms
            entry = pack(seq, msg.delivery_count, msg.enqueued_time_ms, -1 if expires is None else expires,
                         msg.size)
            k = base | seq
            if op == _PUT:
                puts.append((k, int(msg.state), entry))
                datas.append((k, encode_message(msg)))
            else:
                metas.append((int(msg.state), entry, k))
        return puts, datas, metas, dels

    def _write_transaction(self, puts: list, datas: list, metas: list, dels: list) -> None:
        """Everything buffered in one SQLite transaction, rolled back whole when any of it fails."""
        db = self._db
        db.execute("BEGIN")
        try:
            self._write_ids()
            for sql, args in self._entity_ops:
                db.execute(sql, args)
            if self._range_deletes:
                for sql in _SQL_DEL_RANGE:
                    db.executemany(sql, self._range_deletes)
            if dels:
                for sql in _SQL_DEL:
                    db.executemany(sql, dels)
            if puts:
                db.executemany(_SQL_PUT_INDEX, puts)
                db.executemany(_SQL_PUT_DATA, datas)
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

    def _written(self) -> None:
        """The transaction is committed: the buffers it wrote are emptied."""
        self._atomic = False
        self._new_ids.clear()
        self._messages.clear()
        self._sequences.clear()
        self._sessions.clear()
        self._duplicates.clear()
        self._entity_ops.clear()
        self._range_deletes.clear()
        self._range_rows = 0
        if self._dropping:
            self._dropped.extend(self._dropping)
            self._dropping.clear()

    def _journal_deliveries(self, journal: DeliveryJournal, messages: dict, only_messages: bool) -> bool | None:
        """Write the buffered deletions and delivery-state updates (completions, abandons, deferrals,
        locks) to the delivery journal before anything goes to SQLite, and drop them from the buffer.
        Why first: the journal's file is allocated up front, so a full disk, a read-only database or an
        I/O error in SQLite cannot stop them; a settlement admitted by :meth:`ensure_room` is durable
        once this returns, whatever the rest of the commit meets. Not apart while an entity operation
        is buffered (the journal is folded before those, with them) nor inside a savepoint (a change
        that is taken back whole when its commit fails). True: journaled; False: nothing to journal
        (or not apart); None: the journal has no room (folded, then written to SQLite)."""
        if len(messages) == 1 and only_messages:
            # One completion per request is the SDK's peek-lock path: its record without the general loop.
            ((key, (op, _)),) = messages.items()
            if op == _DEL:
                if not journal.append_delete(key):
                    return None
                self._sync(journal)
                messages.clear()
                return True
        if self._entity_ops or (self._atomic and not (only_messages and self._only_deliveries())):
            return False
        deletes = [key for key, (op, _) in messages.items() if op == _DEL]
        updates = [
            (key, (int(msg.state), msg.delivery_count, msg.enqueued_time_ms, msg.expires_at_ms))
            for key, (op, msg) in messages.items()
            if op == _META and msg is not None
        ]
        if not deletes and not updates:
            return False
        if not journal.append(deletes, updates):
            return None
        self._sync(journal)
        if len(deletes) + len(updates) == len(messages):
            messages.clear()
        else:
            for key in deletes:
                del messages[key]
            for key, _ in updates:
                del messages[key]
        return True

    def _sync(self, journal: DeliveryJournal) -> None:
        """``full``: the journal's new records reach the disk before the commit returns (one msync for
        every operation of the commit, whichever connections they came from)."""
        if self.durability == FULL:
            try:
                journal.sync()
            except OSError as exc:
                failure = store_error(exc)
                failure.unsynced = True
                raise failure from exc

    def ensure_room(self, entity: str) -> None:
        """Make sure a settlement of ``entity`` can be written, with everything buffered, whatever
        SQLite meets: the gateway asks before it applies a settlement it confirms. The bound is the
        journal's room for one more entry per buffered message; when it is short the buffer is
        committed and the journal folded, which empties it. :class:`~.base.StoreError` when that
        cannot be written: the settlement is refused and its message stays as it was."""
        journal = self._journal
        if journal is None:
            return
        if journal.room >= 12 + (len(self._messages) + 1) * self._entry_bound:  # one record of them all
            return
        self._entry_bound = max(self._entry_bound, _entry_bound(len(entity.encode())))
        if self._closed or journal.room >= 12 + (len(self._messages) + 1) * self._entry_bound:
            return
        try:
            self.commit()
            self.fold_journal()
        except (sqlite3.Error, OSError) as exc:
            raise store_error(exc) from exc

    def commit_wanted(self) -> bool:
        return len(self._messages) + self._range_rows >= self._commit_rows

    def fold_due(self) -> bool:
        if self._closed:
            return False
        journal = self._journal
        return bool(self._dropped) or (journal is not None and journal.filled >= FOLD_AT)

    def fold(self) -> None:
        """One piece of deferred work: :meth:`fold_journal` when the journal is due, else a slice of a
        deleted entity's rows (:meth:`drop_slice`); a failure as a :class:`~.base.StoreError` (the journal
        keeps its records, the rows stay: a later commit folds it, or fails as any write to a full disk
        does, and a later fold tries the rows again)."""
        if self._closed:
            return
        try:
            journal = self._journal
            if (journal is not None and journal.filled >= FOLD_AT) or not self._dropped:
                self.fold_journal()
            else:
                self.drop_slice()
        except (sqlite3.Error, OSError) as exc:
            raise store_error(exc) from exc

    def drop_slice(self, rows: int = 0) -> None:
        """Delete at most ``rows`` (Slices.drop_rows when 0) of the rows of the dropped containers, lowest id
        and key first, in one transaction; the id leaves ``dropped_ids`` with its last rows. A kill at any
        point leaves rows that nothing reads (their id is in no ``entity_ids`` row) and that the next
        process deletes the same way."""
        if not self._dropped:
            return
        eid = self._dropped[0]
        lo, hi = eid << SEQ_BITS, eid << SEQ_BITS | MAX_SEQUENCE
        db = self._db
        row = db.execute("SELECT k FROM message_index WHERE k BETWEEN ? AND ? ORDER BY k LIMIT 1 OFFSET ?",
                         (lo, hi, max(1, rows or self._drop_rows) - 1)).fetchone()
        last = hi if row is None else row[0]
        db.execute("BEGIN")
        try:
            for sql in _SQL_DEL_RANGE:
                db.execute(sql, (lo, last))
            if last == hi:
                db.execute("DELETE FROM dropped_ids WHERE id = ?", (eid,))
                db.execute("INSERT INTO meta(key, value) VALUES ('last_id', ?) ON CONFLICT(key) DO UPDATE SET "
                           "value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))", (str(eid),))
            db.execute("COMMIT")
        except BaseException:
            _roll_back(db)
            raise
        if last == hi:
            self._dropped.pop(0)

    def _only_messages(self) -> bool:
        """Whether the pending work touches messages only (no sequences, sessions, duplicates, entities)."""
        return not (self._sequences or self._sessions or self._duplicates or self._entity_ops or self._range_deletes)

    def _only_deliveries(self) -> bool:
        """Whether the pending work is only deletions and delivery-state updates (the journal's)."""
        return self._only_messages() and all(op != _PUT for op, _ in self._messages.values())

    def _apply_journal(self, journal: DeliveryJournal) -> None:
        db, ids = self._db, self._ids
        if journal.updates:
            rows = []
            for (entity, seq), (state, count, enqueued, expires) in journal.updates.items():
                eid = ids.get(entity)
                if eid is not None:
                    rows.append((state, count, enqueued, expires, eid << SEQ_BITS | seq))
            db.executemany(_SQL_JOURNAL_META, rows)
        if journal.deletes:
            runs = _runs([ids[e] << SEQ_BITS | seq for e, seq in journal.deletes if e in ids])
            for sql in _SQL_DEL_RANGE:
                db.executemany(sql, runs)

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
        self._sync(journal)  # full: the new epoch on the disk, or an OS crash would replay the old records

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
                + len(self._entity_ops) + len(self._range_deletes))


def _roll_back(db: sqlite3.Connection) -> None:
    """End a failed transaction. SQLite may have rolled it back itself (it does on SQLITE_FULL and some
    I/O errors), and a ROLLBACK then fails: that must not hide the error that made it fail."""
    if getattr(db, "in_transaction", True):
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass
