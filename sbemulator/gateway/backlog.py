"""A connection's input that stands for much work, handled as a job of the namespace's scheduler.

One frame can stand for 100,000 settlements (a disposition over a range of delivery ids) and one
transfer for 1,500 messages (an SDK batch of 256 KB); handled in one go, either would hold the event
loop, and every other connection, for 50-150 ms. The connection says when a read's events are such
(``Connection.wants_slices``); the gateway then queues them here, and this job handles them a slice at
a time: ``Slices.dispatch_events`` events, a range's next ``dispatch_events`` deliveries or a batch's
next ``batch_decode_items`` messages between two looks at the slice's time. The scheduler's driver
(runtime/jobs.py) pauses the connection's reading while the job waits for its next slice, so later
input queues behind it in order, and the job ends by telling the connection its events are handled
(flow-control violations in the same input are answered then, after the deliveries before them).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Protocol

from ..amqp import events as ev
from ..amqp.connection import Connection
from ..scheduling import Budget, Slices
from .deliveries import BATCH_MESSAGE_FORMAT, BatchDecoder
from .sender_link import EntitySenderLink

log = logging.getLogger("sbemulator")


class BacklogOwner(Protocol):
    """What the backlog needs of its gateway (gateway/core.py ``Gateway``)."""

    connection: Connection
    slices: Slices
    closed: bool

    def handle_events(self, events: list[Any]) -> None:
        """Hand each event to the room it is for (a failing handler closes the connection, nothing more)."""

    def after_events(self) -> None:
        """Settle the sends handled so far and pump the receivers they woke."""

    def backlog_handled(self) -> None:
        """Every queued event is handled: the connection is told, its violations answered."""

    def flush_soon(self) -> None:
        """Commit and write what this connection produced, at the end of this turn."""


class EventBacklog:
    """The events of one connection waiting to be handled in slices (a Job: see the module docstring)."""

    __slots__ = ("_decoding", "events", "owner")

    def __init__(self, owner: BacklogOwner) -> None:
        self.owner = owner
        self.events: deque[Any] = deque()
        self._decoding: BatchDecoder | None = None  # the batch at the front, decoded in slices

    def clear(self) -> None:
        self.events.clear()
        self._decoding = None

    def step(self, budget: Budget) -> bool:
        """Handle the events in front until the slice's time (``Slices.dispatch_s``, or less when the
        scheduler's budget is smaller) is up or the store wants a commit; True once none is left."""
        owner = self.owner
        events = self.events
        connection = owner.connection
        slices = owner.slices
        stop = time.perf_counter() + slices.dispatch_s
        while events or connection.held_input:  # held_input is False once the connection is closed
            if not events:  # the frames that came after a range, now that it is expanded to its end
                events.extend(connection.receive_data(b""))
                continue
            owner.handle_events(self._next_chunk(slices))
            if self._decoding is not None and self._decoding.done:
                stop = 0.0  # decoded: its send (~15 ms for 1,500 messages) starts a slice of its own
            if owner.closed:
                self.clear()
            elif events and (time.perf_counter() >= stop or budget.spent()):
                owner.after_events()
                owner.flush_soon()  # commit, then write what the slice produced
                return False
        owner.after_events()
        if not owner.closed:
            owner.backlog_handled()
        owner.flush_soon()
        return True

    def _next_chunk(self, slices: Slices) -> list[Any]:
        """The events to handle next: a range's next slice of deliveries, nothing while a batch's next
        messages are decoded (the batch is handed to its link when all are), or the plain events up
        to the next range or batch."""
        events = self.events
        first = events[0]
        kind = type(first)
        connection = self.owner.connection
        if kind is ev.DeliveryRangeStateChanged:
            chunk: list[Any] = connection.expand_range(first, slices.dispatch_events)
            if connection.range_done(first):
                events.popleft()
            return chunk
        if kind is ev.MessageReceived and self._decoded_in_slices(first):
            try:
                self._decode_slice(first)
            except Exception:  # a bug of ours must not take the whole server down
                log.exception("error decoding a batch")
                connection.close("amqp:internal-error", "the emulator failed to handle a frame")
            return []
        chunk = []
        while events and len(chunk) < slices.dispatch_events:
            event = events[0]
            kind = type(event)
            if kind is ev.DeliveryRangeStateChanged or (kind is ev.MessageReceived
                                                         and self._decoded_in_slices(event)):
                break  # next, in a slice of its own
            chunk.append(events.popleft())
        return chunk

    def _decoded_in_slices(self, event: ev.MessageReceived) -> bool:
        """Whether a transfer is a batch large enough to be decoded in slices (Slices.batch_slice_bytes)
        sent on an entity sender link (the only links that take batches)."""
        return (event.message_format == BATCH_MESSAGE_FORMAT
                and len(event.payload) > self.owner.slices.batch_slice_bytes
                and type(event.link.context) is EntitySenderLink)

    def _decode_slice(self, event: ev.MessageReceived) -> None:
        """Decode the next slice of the batch in front, or, when it is decoded, hand it to its sender
        link whole (and take it off the backlog)."""
        decoder = self._decoding
        if decoder is None or decoder.payload is not event.payload:
            decoder = self._decoding = BatchDecoder(event.payload)
        if not decoder.done:
            decoder.step(self.owner.slices.batch_decode_items)
            return
        self.events.popleft()
        self._decoding = None
        handler = event.link.context
        if type(handler) is EntitySenderLink:  # still attached: the detach would come after it
            handler.on_message(event, None if decoder.failed else decoder.messages)


__all__ = ["BacklogOwner", "EventBacklog"]
