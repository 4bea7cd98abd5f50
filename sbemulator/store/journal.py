"""A memory-mapped journal of message deletions and delivery-state updates, folded into SQLite in
batches.

Why: the SDKs complete a peek-locked message one round trip at a time, and the completion must be
durable before it is confirmed. As a SQLite transaction of its own that cost more CPU than the rest
of the round trip. A record written into a shared file mapping costs no system call and is in the
page cache the moment it is written, so it survives a killed process exactly as a WAL commit with
``synchronous=NORMAL`` does (an OS crash may lose the last ones). The deletions are applied to
SQLite when the journal fills, with any transaction that must not be reordered with them, at a clean
shutdown, and at start-up before anything is read. Locking a message changes its delivery count
(and state); those updates go the same way, for the same reason.

Layout: a 16-byte header (magic, version, epoch), then records ``epoch u32, length u32, crc32 u32,
payload`` where the payload is entries ``(kind u8, entity length u16, entity utf-8, sequence number
u64)``, an update followed by ``state i64, delivery count i64, enqueued ms i64, expires ms i64`` (-1
for none). Updates are applied before deletions: a deleted message is never updated afterwards.
A record counts only when its epoch is the header's and its checksum matches, so a record torn by a
kill is ignored (its deletions were never confirmed) and the records of earlier epochs, left behind
after a fold, are never read back. A fold bumps the epoch only after SQLite committed the deletions,
so a kill between the two replays them once more, which is harmless: sequence numbers are never
reused within an entity, and the store folds before any write that could reuse a key.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

MAGIC = b"SBDJ"
VERSION = 2
_HEADER = struct.Struct("<4sII4x")  # magic, version, epoch
_RECORD = struct.Struct("<III")  # epoch, payload length, crc32 of the payload
_SEQ = struct.Struct("<Q")
_ENTRY = struct.Struct("<BH")  # kind, entity length
_VALUES = struct.Struct("<qqqq")  # state, delivery count, enqueued ms, expires ms (-1: none)
_SEQ_VALUES = struct.Struct("<Qqqqq")  # an update's sequence number and values
_DELETE, _UPDATE = 0, 1
Key = tuple[str, int]
Values = tuple[int, int, int, int | None]  # state, delivery count, enqueued ms, expires ms
DEFAULT_SIZE = 64 * 1024  # about 2,400 one-key records; a fold of that many rows takes milliseconds


class DeliveryJournal:
    """Deleted message keys ``(entity, sequence number)`` and updated delivery states waiting to be
    applied to SQLite."""

    def __init__(self, path: str | Path, size: int = DEFAULT_SIZE) -> None:
        self.path = Path(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < size:
                os.ftruncate(fd, size)
            size = os.fstat(fd).st_size
            _allocate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._size = size
        magic, version, epoch = _HEADER.unpack_from(self._map, 0)
        if magic != MAGIC or version != VERSION:
            epoch = 0  # a new file (all zeros) or one this version cannot read: start empty, and clear
            # the old records too, or an epoch-0 record of another layout would be read back as ours
            self._map[_HEADER.size:] = bytes(size - _HEADER.size)
            _HEADER.pack_into(self._map, 0, MAGIC, VERSION, epoch)
        self._epoch = epoch
        self.deletes: set[Key] = set()
        self.updates: dict[Key, Values] = {}
        # entity -> (kind, entity length, entity) of its deletion and update entries, encoded once
        self._delete_heads: dict[str, bytes] = {}
        self._update_heads: dict[str, bytes] = {}
        self._offset = _HEADER.size
        self._read_back()

    def _read_back(self) -> None:
        """Collect the valid records left by the previous process (all of them: each is one commit)."""
        view, offset, epoch = self._map, _HEADER.size, self._epoch
        while offset + _RECORD.size <= self._size:
            rec_epoch, length, crc = _RECORD.unpack_from(view, offset)
            start = offset + _RECORD.size
            end = start + length
            if rec_epoch != epoch or length == 0 or end > self._size:
                break
            payload = view[start:end]
            if zlib.crc32(payload) != crc:
                break
            pos = 0
            while pos < length:
                kind, n = _ENTRY.unpack_from(payload, pos)
                pos += _ENTRY.size
                entity = payload[pos:pos + n].decode("utf-8")
                (seq,) = _SEQ.unpack_from(payload, pos + n)
                pos += n + 8
                if kind == _UPDATE:
                    state, count, enqueued, expires = _VALUES.unpack_from(payload, pos)
                    pos += _VALUES.size
                    self.updates[(entity, seq)] = (state, count, enqueued, None if expires < 0 else expires)
                else:
                    self.deletes.add((entity, seq))
                    self.updates.pop((entity, seq), None)
            offset = end
        self._offset = offset

    @property
    def keys(self) -> set[Key]:
        """Every message the journal holds something for."""
        return self.deletes | self.updates.keys()

    def holds_any(self, keys: Iterable[object]) -> bool:
        """Whether the journal holds something for any of ``keys`` (an iterable of keys)."""
        return not (self.deletes.isdisjoint(keys) and self.updates.keys().isdisjoint(keys))

    def __bool__(self) -> bool:
        return bool(self.deletes or self.updates)

    @property
    def room(self) -> int:
        """Bytes left for records: what an admission check (SqliteStore.ensure_room) compares with."""
        return self._size - self._offset

    def sync(self) -> None:
        """Write the mapping to the disk and wait for it (msync): the ``full`` durability's barrier
        before a record is confirmed. An error is raised (OSError): the record may not be on the disk."""
        self._map.flush()

    @property
    def filled(self) -> float:
        """How much of the journal's room for records is used, 0 to 1."""
        return (self._offset - _HEADER.size) / (self._size - _HEADER.size)

    def append_delete(self, key: Key) -> bool:
        """:meth:`append` of one deletion, the record of every completion, without the general loop."""
        entity, seq = key
        head = self._delete_heads.get(entity) or self._new_head(self._delete_heads, _DELETE, entity)
        if not self._write_record(head + _SEQ.pack(seq)):
            return False
        self.deletes.add(key)
        self.updates.pop(key, None)  # moot: the row goes
        return True

    def append(self, deletes: Sequence[Key], updates: Sequence[tuple[Key, Values]] = ()) -> bool:
        """Write deletions and updates as one record: durable against a process kill once this
        returns True. False when the journal has no room: the caller folds it into SQLite instead."""
        parts = []
        heads = self._delete_heads
        for entity, seq in deletes:
            parts.append(heads.get(entity) or self._new_head(heads, _DELETE, entity))
            parts.append(_SEQ.pack(seq))
        heads, pack = self._update_heads, _SEQ_VALUES.pack
        for (entity, seq), (state, count, enqueued, expires) in updates:
            parts.append(heads.get(entity) or self._new_head(heads, _UPDATE, entity))
            parts.append(pack(seq, state, count, enqueued, -1 if expires is None else expires))
        if not self._write_record(b"".join(parts)):
            return False
        if updates:
            self.updates.update(updates)
        if deletes:
            self.deletes.update(deletes)
            pending = self.updates
            for key in deletes:
                pending.pop(key, None)  # moot: the row goes
        return True

    @staticmethod
    def _new_head(heads: dict[str, bytes], kind: int, entity: str) -> bytes:
        """An entity's entry bytes before the sequence number (kind, length, name), kept in ``heads``."""
        raw = entity.encode("utf-8")
        head = heads[entity] = _ENTRY.pack(kind, len(raw)) + raw
        return head

    def _write_record(self, payload: bytes) -> bool:
        offset = self._offset
        end = offset + _RECORD.size + len(payload)
        if end > self._size:
            return False
        self._map[offset + _RECORD.size:end] = payload
        # The record header last: until it is written the bytes above are not a record.
        _RECORD.pack_into(self._map, offset, self._epoch, len(payload), zlib.crc32(payload))
        self._offset = end
        return True

    def reset(self) -> None:
        """Forget every record: call only after SQLite committed the deletions they hold."""
        self._epoch = (self._epoch + 1) & 0xFFFFFFFF
        _HEADER.pack_into(self._map, 0, MAGIC, VERSION, self._epoch)
        self._offset = _HEADER.size
        self.deletes.clear()
        self.updates.clear()

    def close(self) -> None:
        self._map.close()



def _allocate(fd: int, size: int) -> None:
    """Give the file its blocks now. ``ftruncate`` makes a sparse file, and writing into a hole of a
    mapping needs a block: on a full file system that write is a SIGBUS that kills the process, where a
    full disk must only refuse what cannot be stored. Allocated, every record fits whatever the disk
    holds (file systems without ``fallocate`` keep the sparse file)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
