"""A dict subclass that stays tracked by the cyclic garbage collector (see TrackedDict)."""

from __future__ import annotations

from typing import TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class TrackedDict(dict[_K, _V]):
    """A dict the cyclic collector keeps tracking when it is empty: for the big tables that fill and
    empty with the traffic (an entity's messages and locks, a session's and a link's unsettled
    deliveries).

    Why: CPython stops tracking a plain dict that a full collection finds empty (or holding only
    atoms), and starts again, in the youngest generation, when an object goes in. An entity's lock
    table that was empty at a busy fallback (runtime/collector.py) then filled with 100,000 locks was a
    young object of 100,000 references, visited by every young collection until the next fallback:
    26-38 ms each with the messages spread over the heap (bench.canary_stall, SBEMU_PROBE_COLLECTIONS).
    A subclass is never untracked, so the table made at start-up is frozen with it and stays out of
    the young collections however it fills and empties. (A session's unsettled deliveries, by delivery
    id, were the next such table the same benchmark showed: 100,000 references, 15 ms a collection.)"""

    __slots__ = ()
