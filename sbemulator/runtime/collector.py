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
  scan;
- if the broker is never idle, every ``FULL_AFTER`` young (generation 1) collections a collection of
  what is not frozen, then ``gc.freeze()``: what survived joins the frozen objects. Each such
  collection scans only what survived since the previous one (a generation-1 collection passes at
  most ``gen0 x gen1`` = 7,000 objects on, so at most 35,000 objects), never the whole heap: the
  100,000 messages a busy broker holds are scanned once, by the fallback after they arrived, not
  by every later one (before: one fallback of 191 ms of CPU over 300,000 objects, docs/benchmarks.md);
- that fallback runs as a callback of its own on the event loop, scheduled by a ``gc.callbacks`` hook
  as soon as the ``full_after``-th young collection ends (a collection cannot start another from
  inside its own callback): checked only from the timer task, which waits up to 0.25 s between ticks
  when no timer is due, the fallback came after a burst of work had left 100,000 objects to scan
  (37 ms of CPU, run in the same callback as that tick's lock expiries), and the timer task's tick
  now yields after collecting, so a collection and the broker's timers never share a callback;
- a full collection of everything (``gc.unfreeze()`` first) also comes without an idle moment once
  the frozen objects have grown by ``GROWTH_FLOOR`` objects, or by as many as the last full
  collection left if that is more, since that collection.

Why nothing leaks: freezing changes only what the cyclic collector looks at. Objects whose last
reference goes away are freed by reference counting whether frozen or not; the broker's messages,
locks and timers form no reference cycles of their own (a message dies when its entity drops it),
so what waits for a collection are cycles of objects that die together (a closed connection's
gateway and links, a deleted entity). A cycle that dies before the next fallback is collected by it;
one that was frozen alive waits for the next idle moment or for the growth bound, so the garbage
waiting in the frozen objects is at most ``GROWTH_FLOOR`` objects or the live heap's size, whichever
is more (Python's own policy allows a quarter of the heap). ``bench.canary_stall --rss-loop`` shows RSS
over a bounded connect/send/receive loop at idle moments and, with ``--rss-never-idle``, with the
canary keeping the broker busy throughout.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time

# No AMQP input for this long makes an idle moment. Ten seconds, not one: a full collection over
# 100,000 messages takes 200-270 ms of CPU, and a client that holds its locks and works for a second
# between requests (a consumer, a test between steps) found its next request waiting behind it.
IDLE_S = 10.0
FULL_AFTER = 5  # young (generation 1) collections before the busy fallback (a collection of the unfrozen)
GROWTH_FLOOR = 500_000  # frozen objects added since the last full collection that make a busy one
# While busy, at most this often: a young collection, then gc.freeze() of what survived (see tick)
FREEZE_EVERY_S = 0.2
_NEVER = 1 << 30  # a generation-2 threshold no count reaches


class Collector:
    """The process's collector policy while the server runs (``start`` ... ``stop``)."""

    def __init__(self, idle_s: float = IDLE_S, full_after: int = FULL_AFTER,
                 growth_floor: int = GROWTH_FLOOR) -> None:
        self.idle_s = idle_s
        self.full_after = full_after
        self.growth_floor = growth_floor
        self.idle_collections = 0
        self.busy_collections = 0  # busy fallbacks: the unfrozen objects collected, the survivors frozen
        self.busy_full_collections = 0  # without an idle moment, the frozen objects grown past the bound
        self._saved: tuple[int, int, int] | None = None
        self._min_young = 10
        self._young_mark = 0  # generation-1 collections counted at the last busy fallback
        self._frozen_after_full = 0
        # Frozen objects, counted at the last full collection plus what each busy fallback froze since.
        # Not gc.get_freeze_count() at every tick: that walks every frozen object (3.6 ms for 300,000),
        # and the timer task ticks between every slice of work, so it was most of the timer task's CPU
        # while 100,000 locks lapsed or were returned (py-spy over bench.canary_stall).
        self._frozen_estimate = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._fallback_pending = False
        self._last_freeze = float("-inf")
        self.young_freezes = 0  # young collections whose survivors were frozen (tick, while busy)

    def start(self) -> None:
        """After start-up: collect, freeze what exists, turn automatic full collections off. Called on
        the event loop, the busy fallback is also scheduled from the collector's own hook (see above);
        called elsewhere (tests), only :meth:`tick` runs it."""
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gen0, gen1, gen2 = self._saved
        self._min_young = max(1, gen2)
        self._full()
        gc.set_threshold(gen0, gen1, _NEVER)
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        if self._loop is not None:
            self._loop_thread = threading.get_ident()
            gc.callbacks.append(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        """After a young collection: once ``full_after`` of them ran, the fallback is scheduled."""
        if phase != "stop" or info["generation"] != 1 or self._fallback_pending:
            return
        if gc.get_count()[2] - self._young_mark < self.full_after:
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        self._fallback_pending = True
        if threading.get_ident() == self._loop_thread:
            loop.call_soon(self._scheduled_fallback)
        else:  # a collection in another thread (the store's, a test's): the loop runs the fallback
            loop.call_soon_threadsafe(self._scheduled_fallback)

    def _scheduled_fallback(self) -> None:
        self._fallback_pending = False
        if self._saved is None:
            return
        young = gc.get_count()[2]
        if young < self._young_mark:
            self._young_mark = 0
        if young - self._young_mark >= self.full_after:
            self._busy_fallback()

    def _full(self) -> None:
        """Everything collected, the frozen objects included; what survives is frozen."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._young_mark = 0
        self._frozen_after_full = self._frozen_estimate = gc.get_freeze_count()

    def tick(self, last_input: float, now: float | None = None) -> bool:
        """Called by the timer task; ``last_input`` is when AMQP input last arrived (``time.monotonic``).
        True when it collected, so the caller yields before any other work."""
        if self._saved is None:
            return False
        young = gc.get_count()[2]  # generation-1 collections since the last collection of generation 2
        if young < self._young_mark:  # a collection of generation 2 ran meanwhile (someone's gc.collect())
            self._young_mark = 0
        if (young >= self._min_young or self._frozen_estimate > self._frozen_after_full) and (
                (time.monotonic() if now is None else now) - last_input >= self.idle_s):
            self._full()
            self.idle_collections += 1
            return True
        if young - self._young_mark >= self.full_after:
            self._busy_fallback()
            return True
        moment = time.monotonic() if now is None else now
        if moment - self._last_freeze >= FREEZE_EVERY_S:
            self._last_freeze = moment
            self._freeze_young()
            return True
        return False

    def _freeze_young(self) -> None:
        """A young collection, then everything frozen: a container made since the last freeze (a new
        receiver's lock set, a link's unsettled deliveries) is frozen while it is small. Why: a broker
        taking 100,000 locks allocates almost no objects that live (a lock adds none the collector
        tracks), so young collections, and with them the busy fallback, hardly came; the receiver's lock
        set made at its attach stayed young while it grew to 100,000 keys, and every collection that
        finally came visited all of them (32-40 ms in the canary's expire phase). Frozen early, it is
        visited by none, however it grows. What is frozen alive and dies later waits for a full
        collection, as with the busy fallback (and is counted the same way)."""
        gc.collect(1)
        self._frozen_estimate += len(gc.get_objects(generation=2))
        gc.freeze()
        self.young_freezes += 1

    def _busy_fallback(self) -> None:
        gc.collect()  # what is not frozen: what survived since the last fallback
        # After a collection of generation 2 the unfrozen survivors are all in it: what freeze() adds.
        self._frozen_estimate += len(gc.get_objects(generation=2))
        gc.freeze()
        self._young_mark = gc.get_count()[2]
        self.busy_collections += 1
        bound = max(self.growth_floor, self._frozen_after_full)
        if self._frozen_estimate - self._frozen_after_full > bound:
            # The estimate only grows (frozen objects that died are not subtracted), so it is checked
            # against the true count, which costs a walk over every frozen object, only when it crosses.
            self._frozen_estimate = gc.get_freeze_count()
            if self._frozen_estimate - self._frozen_after_full > bound:
                self._full()
                self.busy_full_collections += 1

    def stop(self) -> None:
        """Python's own policy again, nothing frozen."""
        if self._saved is None:
            return
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        self._loop = None
        gc.unfreeze()
        gc.set_threshold(*self._saved)
        self._saved = None
