"""The index of a durable container's messages that wait in the store, not in memory.

A durable queue, subscription or dead-letter queue keeps as full :class:`~.model.BrokerMessage`
objects only the messages in play: those locked, deferred or scheduled, and up to the read-ahead
window of available ones. Every
other available message is a row of a :class:`ColdIndex`: five numbers in parallel arrays (sequence
number, delivery count, enqueued time, expiry, size: 40 bytes a message instead of the ~1.4 KB
of an object with its body and properties). Its body and properties stay in the store and are read in
one range scan by sequence number just ahead of delivery (:meth:`MessageFlow._page_in`), as RabbitMQ's
lazy queues and classic queues v2 do.

Messages enter a queue's or subscription's index only in sequence order (at start-up, read in that
order, and when a send finds the window full, with a number newer than every other). A dead-letter
queue's arrive in the order they are dead-lettered, which is not their sequence order (they keep the
numbers their entity gave them): :meth:`ColdIndex.insert` puts such an entry in its place, and a flood
of poison messages, dead-lettered in about the order they were queued, lands at or near the end. Entries
leave only from the front (paged in for delivery), one at a time by sequence number (a dead-lettered
message resubmitted through the management plane) or all at once (purge): so the arrays stay sorted
without holes, and give memory back by dropping their consumed front (:meth:`ColdIndex.compact`).

``--in-memory`` has nothing to page from: its store keeps nothing, every message is an object, and its
bound is the process's memory (docs/emulator.md).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

NO_EXPIRY = -1
_COMPACT_AT = 4096  # consumed entries before the front is dropped (and only once it is half the arrays)


class ColdIndex:
    """The available messages of one container that only the store holds, oldest first.

    ``bytes`` is the sum of their sizes (``BrokerMessage.size``: what an entity's size counts)."""

    __slots__ = ("bytes", "counts", "enqueued", "expires", "head", "seqs", "sizes")

    def __init__(self) -> None:
        self.seqs = array("q")
        self.counts = array("q")
        self.enqueued = array("q")
        self.expires = array("q")
        self.sizes = array("q")
        self.head = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.seqs) - self.head

    def append(self, seq: int, delivery_count: int, enqueued_ms: int, expires_ms: int | None, size: int) -> None:
        """Add the newest message (its number is larger than every other's in the index)."""
        self.seqs.append(seq)
        self.counts.append(delivery_count)
        self.enqueued.append(enqueued_ms)
        self.expires.append(NO_EXPIRY if expires_ms is None else expires_ms)
        self.sizes.append(size)
        self.bytes += size

    def extend(self, rows: array) -> int:
        """Add many newest messages at once: ``rows`` holds five numbers per message (sequence number,
        delivery count, enqueued ms, expires ms or -1, size), as the store loads them at start-up.
        Slicing the interleaved array is done in C: no Python object per message. Returns their size."""
        self.seqs.extend(rows[0::5])
        self.counts.extend(rows[1::5])
        self.enqueued.extend(rows[2::5])
        self.expires.extend(rows[3::5])
        sizes = rows[4::5]
        self.sizes.extend(sizes)
        added = sum(sizes)
        self.bytes += added
        return added

    def insert(self, seq: int, delivery_count: int, enqueued_ms: int, expires_ms: int | None, size: int) -> None:
        """Add a message whose number may be older than others in the index (a dead-letter queue's), at
        its place in sequence order; at the end (:meth:`append`) when it is the newest."""
        seqs = self.seqs
        if len(seqs) == self.head or seqs[-1] < seq:
            self.append(seq, delivery_count, enqueued_ms, expires_ms, size)
            return
        i = bisect_left(seqs, seq, self.head)
        seqs.insert(i, seq)
        self.counts.insert(i, delivery_count)
        self.enqueued.insert(i, enqueued_ms)
        self.expires.insert(i, NO_EXPIRY if expires_ms is None else expires_ms)
        self.sizes.insert(i, size)
        self.bytes += size

    def pop_seq(self, seq: int) -> tuple[int, int, int, int, int] | None:
        """Remove and return the entry of sequence number ``seq`` (None if the index has none)."""
        seqs = self.seqs
        i = bisect_left(seqs, seq, self.head)
        if i == len(seqs) or seqs[i] != seq:
            return None
        entry = (seqs.pop(i), self.counts.pop(i), self.enqueued.pop(i), self.expires.pop(i), self.sizes.pop(i))
        self.bytes -= entry[4]
        if self.head == len(seqs):
            self.clear()
        return entry

    def first(self) -> int:
        """The oldest sequence number (the index is not empty)."""
        return self.seqs[self.head]

    def last_enqueued_ms(self) -> int:
        return self.enqueued[-1] if len(self) else 0

    def take(self, n: int) -> list[tuple[int, int, int, int, int]]:
        """Remove and return the ``n`` oldest entries: (seq, delivery count, enqueued, expires, size)."""
        lo = self.head
        hi = min(len(self.seqs), lo + n)
        out = list(zip(self.seqs[lo:hi], self.counts[lo:hi], self.enqueued[lo:hi], self.expires[lo:hi],
                       self.sizes[lo:hi], strict=True))
        self.bytes -= sum(self.sizes[lo:hi])
        self.head = hi
        self.compact()
        return out

    def from_seq(self, seq: int, n: int) -> list[tuple[int, int, int, int, int]]:
        """Up to ``n`` entries from sequence number ``seq`` on, left in place (peek)."""
        lo = max(self.head, bisect_left(self.seqs, seq))
        hi = min(len(self.seqs), lo + n)
        return list(zip(self.seqs[lo:hi], self.counts[lo:hi], self.enqueued[lo:hi], self.expires[lo:hi],
                        self.sizes[lo:hi], strict=True))

    def all_seqs(self) -> list[int]:
        return list(self.seqs[self.head:])

    def compact(self) -> None:
        """Drop the consumed front once it is large (and all of it once nothing is left), so that a
        drained index gives its memory back instead of keeping the arrays of its largest backlog."""
        head = self.head
        if head == len(self.seqs):
            self.clear()
        elif head >= _COMPACT_AT and head * 2 >= len(self.seqs):
            for arr in (self.seqs, self.counts, self.enqueued, self.expires, self.sizes):
                del arr[:head]
            self.head = 0

    def clear(self) -> None:
        self.seqs, self.counts, self.enqueued = array("q"), array("q"), array("q")
        self.expires, self.sizes = array("q"), array("q")
        self.head = 0
        self.bytes = 0
