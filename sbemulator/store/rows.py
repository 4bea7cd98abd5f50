"""Reading a durable store's rows over any SQLite connection to its database: what tests and a person
inspecting a data directory want to see of the packed ``message_index`` rows."""

from __future__ import annotations

import sqlite3
import struct

SEQ_BITS = 40  # as sqlite.SEQ_BITS: a message's key is its container's id << SEQ_BITS | its sequence number
MAX_SEQUENCE = (1 << SEQ_BITS) - 1
_ENTRY = struct.Struct("<5q")  # as sqlite._ENTRY


def stored_rows(db: sqlite3.Connection) -> list[tuple[str, int, int, int, int, int | None, int]]:
    """Every stored message's index as ``(entity, seq, state, delivery count, enqueued ms, expires ms or
    None, size)`` in (entity, seq) order, read over any connection to a store's database: what tests and
    a person inspecting a data directory want to see of the packed ``message_index`` rows."""
    names = dict((eid, entity) for entity, eid in db.execute("SELECT entity, id FROM entity_ids"))
    rows = []
    for k, state, entry in db.execute("SELECT k, state, entry FROM message_index"):
        if k >> SEQ_BITS not in names:
            continue  # a deleted container's row, not deleted yet (dropped_rows)
        seq, count, enqueued, expires, size = _ENTRY.unpack(entry)
        rows.append((names[k >> SEQ_BITS], seq, state, count, enqueued, None if expires < 0 else expires, size))
    rows.sort()
    return rows


def dropped_rows(db: sqlite3.Connection) -> int:
    """How many rows (``message_index`` and ``message_data``) of deleted containers are still stored,
    read over any connection to a store's database: what the cleanup after a delete has left to do."""
    total = 0
    for (eid,) in list(db.execute("SELECT id FROM dropped_ids")):
        lo, hi = eid << SEQ_BITS, eid << SEQ_BITS | MAX_SEQUENCE
        for table in ("message_index", "message_data"):
            total += db.execute(f"SELECT count(*) FROM {table} WHERE k BETWEEN ? AND ?", (lo, hi)).fetchone()[0]
    return total
