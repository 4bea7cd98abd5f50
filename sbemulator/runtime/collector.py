"""When the cyclic garbage collector makes a full collection: at idle moments, not in the middle of work.

Why: Python's full (generation 2) collection visits every container object the process holds, and a
broker holds several per message (the message, its timers, its lock). With 100,000 messages that is
half a million objects, and one full collection held the event loop, so every connection, for
60-660 ms (docs/benchmarks.md, "A canary during 100,000 locks"). Python starts one whenever
the objects that survived young collections since the last one exceed a quarter of the long-lived
heap, that is, while the heap grows: exactly when the broker is busiest.

What this does instead (the CLI turns it on; an embedded ``Emulator`` leaves its host process alone):

- at start-up, after the store is loaded and before the first connection, a full collection and
  ``gc.freeze()``: the imports, the topology and the messages read from the store are moved out of
  the collector's sight (they stay freeable by reference counting, as every frozen object is);
- automatic full collections are off (``gc.set_threshold(gen0, gen1, never)``); the young collections
  (generations 0 and 1, a few thousand objects each) run as before;
- the runtime calls :meth:`Collector.tick` from its timer task: when no AMQP input came for
  ``IDLE_S`` and young collections happened since the last full one, ``gc.unfreeze()``, a full
  collection of everything, ``gc.freeze()`` again, so the next busy period starts with nothing to
  scan; and if the broker is never idle, a full collection of what is not frozen (what was allocated
  since the last idle moment) after ``FULL_AFTER`` young collections, ten times Python's own count,
  so memory stays bounded without idle moments too.

Why it is safe: freezing changes only what the cyclic collector looks at. Objects whose last
reference goes away are freed by reference counting whether frozen or not; the broker's messages,
locks and timers form no reference cycles of their own (a message dies when its entity drops it),
so what waits for a collection are cycles of objects that die together (a closed connection's
gateway and links, a deleted entity). Frozen ones wait for the next idle moment, and at most what
was frozen there can wait (nothing frozen later); unfrozen ones wait at most ``FULL_AFTER`` young
collections. ``bench.canary_stall --rss-loop`` shows RSS flat over a bounded connect/send/receive
loop.
"""

from __future__ import annotations

import gc
import time

IDLE_S = 1.0  # no AMQP input for this long makes an idle moment
FULL_AFTER = 100  # young (generation 1) collections before a full one even without an idle moment
_NEVER = 1 << 30  # a generation-2 threshold no count reaches


class Collector:
    """The process's collector policy while the server runs (``start`` ... ``stop``)."""

    def __init__(self, idle_s: float = IDLE_S, full_after: int = FULL_AFTER) -> None:
        self.idle_s = idle_s
        self.full_after = full_after
        self.idle_collections = 0
        self.busy_collections = 0
        self._saved: tuple[int, int, int] | None = None
        self._min_young = 10

    def start(self) -> None:
        """After start-up: collect, freeze what exists, turn automatic full collections off."""
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gen0, gen1, gen2 = self._saved
        self._min_young = max(1, gen2)
        gc.collect()
        gc.freeze()
        gc.set_threshold(gen0, gen1, _NEVER)

    def tick(self, last_input: float, now: float | None = None) -> None:
        """Called by the timer task; ``last_input`` is when AMQP input last arrived (``time.monotonic``)."""
        if self._saved is None:
            return
        young = gc.get_count()[2]  # generation-1 collections since the last full collection
        if young < self._min_young:
            return
        if (time.monotonic() if now is None else now) - last_input >= self.idle_s:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.idle_collections += 1
        elif young >= self.full_after:
            gc.collect()  # what is not frozen: allocated since the last idle moment
            self.busy_collections += 1

    def stop(self) -> None:
        """Python's own policy again, nothing frozen."""
        if self._saved is None:
            return
        gc.unfreeze()
        gc.set_threshold(*self._saved)
        self._saved = None
