"""The available index of a queue or subscription and its paging, in one place: which messages a
receiver can take next (a heap of sequence numbers over the entity's messages), and, for a durable
store with a page window, the ones that wait in the store only (broker/paging.py's ColdIndex) read back
into it as room frees ("Memory and a large backlog" in docs/emulator.md). ``MessageFlow`` takes these
methods from ``AvailableIndex``.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..model import (
    BrokerMessage,
    MessageState,
)
from .entity import Entity
from .paging import NO_EXPIRY, ColdIndex
from .timers import EXPIRY, Timers
from .wakeups import Wakeups

if TYPE_CHECKING:
    from sbemulator.store.base import Store

log = logging.getLogger("sbemulator.broker.flow")
# Paged-out messages read back per range scan: Slices.page_in_rows (about 20 us each to read and decode),
# whatever the read-ahead window (store page_window) keeps in memory.


class AvailableIndex:
    """The available index and paging part of ``MessageFlow`` (a base class of it: one object)."""

    if TYPE_CHECKING:  # what this part uses of the rest of the flow (flow.py)
        store: Store
        _wakeups: Wakeups
        _timers: Timers
        _window: int
        _page_in_rows: int

    # --- container primitives ----------------------------------------------------------------
    def insert(self, ent: Entity, msg: BrokerMessage) -> None:
        ent.messages[msg.sequence_number] = msg
        ent.quota.held_bytes += msg.size
        if ent.requires_session and msg.session_id is not None:
            ent.session(msg.session_id).count += 1

    def queue(self, ent: Entity, msg: BrokerMessage) -> None:
        """Make an active, unlocked message available to receivers."""
        msg.queued = True
        if ent.requires_session and msg.session_id is not None:
            s = ent.session(msg.session_id)
            heapq.heappush(s.heap, msg.sequence_number)
            self._wakeups.notify(ent, s)
        else:
            heapq.heappush(ent.available, msg.sequence_number)
            self._wakeups.notify(ent)

    def remove(self, ent: Entity, msg: BrokerMessage) -> None:
        if ent.messages.pop(msg.sequence_number, None) is None:
            return
        ent.quota.held_bytes -= msg.size
        msg.queued = False
        self.unlock(ent, msg)
        if ent.requires_session and msg.session_id is not None:
            s = ent.sessions.get(msg.session_id)
            if s is not None:
                s.count -= 1
                ent.forget_session_if_idle(s)
        self.store.delete_message(ent.key, msg.sequence_number)

    def unlock(self, ent: Entity, msg: BrokerMessage) -> None:
        key = msg.lock_key
        if key is not None:
            ent.locks.pop(key, None)
            if msg.lock_owner is not None:
                msg.lock_owner.locks.pop(key, None)
        msg.lock_key = None
        msg.lock_owner = None
        msg.locked_until_ms = None

    def _pop(self, ent: Entity, heap: list[int]) -> BrokerMessage | None:
        messages = ent.messages
        while True:
            cold = ent.cold
            if cold is not None and (not heap or cold.seqs[cold.head] < heap[0]):
                self._page_in(ent, cold)
            if not heap:
                return None
            seq = heapq.heappop(heap)
            msg = messages.get(seq)
            if msg is not None and msg.queued:
                msg.queued = False
                return msg

    def _page_in(self, ent: Entity, cold: ColdIndex) -> None:
        """Read the next of ``ent``'s paged-out messages from the store (one range scan of at most
        Slices.page_in_rows, however large the window, so one read holds the event loop for milliseconds) and
        make them available in memory, in front of any newer ones (broker/paging.py). ``_pop`` asks
        again once they are taken, as long as paged-out messages are older than the oldest in memory."""
        entries = cold.take(max(1, min(self._window, self._page_in_rows)))
        if not len(cold):
            ent.cold = None
        self._make_available(ent, entries)

    def _make_available(self, ent: Entity, entries: list[tuple[int, int, int, int, int]]) -> None:
        """The paged-out messages of ``entries`` (in sequence order, out of the index already), read
        from the store in one range scan and available in memory."""
        stored = self.store.read_messages(ent.key, entries[0][0], entries[-1][0])
        messages = ent.messages
        heap = ent.available
        for seq, count, enqueued, expires, _size in entries:
            msg = stored.get(seq)
            if msg is None:  # cannot happen: a paged-out message's row is written before it is indexed
                log.error("%s: paged-out message %d is not in the store", ent.path, seq)
                continue
            msg.sequence_number = seq
            msg.state = MessageState.ACTIVE
            msg.delivery_count = count
            msg.enqueued_time_ms = enqueued
            msg.expires_at_ms = None if expires == NO_EXPIRY else expires
            msg.queued = True
            messages[seq] = msg
            heapq.heappush(heap, seq)
            if msg.expires_at_ms is not None:
                self._timers.add_message(EXPIRY, msg.expires_at_ms, ent, msg.sequence_number)

    def page_in_next(self, ent: Entity) -> bool:
        """Page in the next read of ``ent``'s paged-out messages (False when it has none)."""
        cold = ent.cold
        if cold is None:
            return False
        self._page_in(ent, cold)
        return True

    def unpage(self, ent: Entity, sequence_numbers: Iterable[int]) -> None:
        """Bring the named paged-out messages of ``ent`` into memory, available there as if paged in
        (a resubmission of dead-lettered messages picks them by number); numbers not paged out are left
        alone."""
        cold = ent.cold
        if cold is None:
            return
        entries = [e for e in (cold.pop_seq(seq) for seq in sequence_numbers) if e is not None]
        if not len(cold):
            ent.cold = None
        if entries:
            entries.sort()
            self._make_available(ent, entries)
