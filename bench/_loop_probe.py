"""Inside the emulator process of a benchmark: the CPU time of every long event-loop callback and of
every full garbage collection, written to a file when the process exits.

Why: on a shared machine a canary's round trip also holds the moments the emulator was not scheduled,
which no code of the emulator's can shorten. The thread CPU time one callback takes is the stall the
emulator itself causes, whatever the load. Loaded by a ``sitecustomize`` that
``bench.canary_stall`` puts on the emulator's ``PYTHONPATH`` when ``SBEMU_LOOP_PROBE`` names the
output file; nothing of it is part of the emulator.
"""

from __future__ import annotations

import asyncio.events
import atexit
import gc
import json
import os
import time

THRESHOLD_S = 0.002  # callbacks shorter than this are not recorded (only counted)
# callbacks at least this long are recorded with what ran (the handle's repr)
NAMED_S = float(os.environ.get("SBEMU_PROBE_NAMED_MS", "20")) / 1000

SLOW_YOUNG_S = 0.005  # young collections at least this long are recorded too (a full one always is)

_path = os.environ.get("SBEMU_LOOP_PROBE")
_census = bool(os.environ.get("SBEMU_PROBE_COLLECTIONS"))  # also count the objects at each full collection
# (monotonic end, CPU ms, of it collecting, what ran, wall ms): the wall time also holds what the callback
# waited for without using CPU (a SQLite checkpoint's fsync), which a client waits for as well
_callbacks: list[tuple[float, float, float, str, float]] = []
_gc_spent = [0.0]  # CPU seconds of collections so far
_collections: list[tuple[float, ...]] = []  # (end, CPU ms, generation, frozen, scanned)
_count = [0]
_gc_started = [0.0]
_garbage = bool(os.environ.get("SBEMU_PROBE_GARBAGE"))  # keep what collections find, to say what it was
_garbage_found: list = []  # (generation, objects, ms to free them, their kinds) of each collection
_young_types: list = []  # diagnosis: the kinds of objects in young collections of over 20,000
_biggest = [""]  # diagnosis: the largest container a young collection visits
_gc_census = [0, 0]  # at a full collection's start: objects frozen, objects in the oldest generation


def _sample(container: object) -> str:
    """What a container holds, for the diagnosis: its first element's (or key's and value's) types."""
    try:
        if isinstance(container, dict):
            key, value = next(iter(container.items()))
            return f"{type(key).__name__} -> {type(value).__name__}"
        first = next(iter(container))  # type: ignore[call-overload]
        return type(first).__name__
    except StopIteration:
        return "empty"


def _what(handle: asyncio.events.Handle) -> str:
    """What a long callback ran: the handle, and for a task's step the coroutine and where it paused."""
    text = repr(handle)[:160]
    task = getattr(getattr(handle, "_callback", None), "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno}" if frame is not None else "done"
        text += f" task {getattr(coro, '__qualname__', coro)} paused at {where}"
    return text


def _install() -> None:
    original = asyncio.events.Handle._run

    def _run(self: asyncio.events.Handle) -> None:
        start, collecting, began = time.thread_time(), _gc_spent[0], time.monotonic()
        original(self)
        spent = time.thread_time() - start
        ended = time.monotonic()
        _count[0] += 1
        if spent >= THRESHOLD_S or ended - began >= THRESHOLD_S:
            _callbacks.append((ended, spent * 1000, (_gc_spent[0] - collecting) * 1000,
                               _what(self) if max(spent, ended - began) >= NAMED_S else "",
                               (ended - began) * 1000))

    asyncio.events.Handle._run = _run  # type: ignore[method-assign]

    def _on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            if _census:  # diagnosis only: the listing costs a callback's CPU too
                generation = info.get("generation", 2)
                if generation == 2:
                    oldest = gc.get_objects(generation=2)
                    _gc_census[:] = [gc.get_freeze_count(), len(oldest)]
                    sized = [o for o in oldest if isinstance(o, (list, dict, set, tuple, bytearray))]
                    biggest = max(sized, key=len, default=None)
                    _biggest[0] = (f"{type(biggest).__name__} of {len(biggest):,}: {_sample(biggest)}"
                                   if biggest is not None else "")
                else:  # a young collection: how many objects it is about to visit (and of what, if many)
                    young = [o for g in range(generation + 1) for o in gc.get_objects(generation=g)]
                    _gc_census[:] = [0, len(young)]
                    sized = [o for o in young if isinstance(o, (list, dict, set, tuple, bytearray))]
                    biggest = max(sized, key=len, default=None)
                    _biggest[0] = (f"{type(biggest).__name__} of {len(biggest):,}: {_sample(biggest)}"
                                   if biggest is not None else "")
                    if len(young) > 20_000:
                        import collections
                        _young_types.append((len(young), collections.Counter(
                            type(o).__name__ for o in young).most_common(6)))
            _gc_started[0] = time.thread_time()
        else:
            if _garbage and gc.garbage:  # diagnosis: what each collection found, and what freeing it costs
                import collections
                kinds = collections.Counter(type(o).__name__ for o in gc.garbage).most_common(5)
                found = len(gc.garbage)
                freeing = time.thread_time()
                del gc.garbage[:]
                _garbage_found.append((info.get("generation", 2), found, (time.thread_time() - freeing) * 1000,
                                       kinds))
            spent = time.thread_time() - _gc_started[0]
            _gc_spent[0] += spent
            generation = info.get("generation", 2)
            if _census and spent >= SLOW_YOUNG_S:
                _young_types.append((_gc_census[1], _biggest[0]))
            if generation == 2 or spent >= SLOW_YOUNG_S:
                _collections.append((time.monotonic(), spent * 1000, generation, *_gc_census,
                                     info.get("collected", 0)))

    gc.callbacks.append(_on_gc)
    if _garbage:
        gc.set_debug(gc.DEBUG_SAVEALL)

    def _dump() -> None:
        with open(_path, "w") as handle:  # type: ignore[arg-type]
            json.dump({"callbacks": _callbacks, "collections": _collections, "count": _count[0],
                       "young_types": _young_types, "garbage": _garbage_found}, handle)

    atexit.register(_dump)


if _path:
    _install()
