"""The server's own jobs for the scheduler (sbemulator/scheduling/, driven by ``runtime.jobs``): the broker's
due timers, a deleted entity's messages freed, the store's deferred folds.

The cleanup and the folds are two jobs, so the driver's turns alternate them (before, the server
alternated them by hand); neither buffers a write, so no commit follows their slices. The timer run
commits after each slice, and its budget adapts to what that commit costs (a durable commit of 100,000
lapsed locks' rows).
"""

from __future__ import annotations

from collections.abc import Callable

from ..broker.api import RuntimeBroker
from ..scheduling import Budget
from ..store.base import Store, StoreError


class TimerRun:
    """The broker's timers that are due, a slice at a time; ``between`` runs before every slice after the
    first (the cyclic collector's turn: when it collected, that is the slice, and the timers come next)."""

    def __init__(self, broker: RuntimeBroker, between: Callable[[], bool]) -> None:
        self._broker = broker
        self._between = between
        self._sliced = False

    def step(self, budget: Budget) -> bool:
        if self._sliced and self._between():
            return False  # a collection is a callback of its own, never with the timers
        self._sliced = True
        more = self._broker.tick(budget)  # receivers with new work are told through on_available
        if not more:
            self._sliced = False
        return not more


class EntityCleanup:
    """Deleted entities' messages freed (``RuntimeBroker.drop_step``) until none is left. ``scheduled`` is True
    from the server's start of it to its last slice: the server asks nothing more of the broker meanwhile
    (an attribute, read after every commit)."""

    def __init__(self, broker: RuntimeBroker) -> None:
        self._broker = broker
        self.scheduled = False

    def step(self, budget: Budget) -> bool:
        done = True
        try:
            self._broker.drop_step(budget)  # writes nothing: a deleted container's rows are the store's own work
            done = not self._broker.drops
            return done
        finally:
            if done:
                self.scheduled = False


class StoreFolds:
    """The store's deferred work (a durable store's delivery journal folded into SQLite, a deleted entity's
    rows deleted), one fold a slice: up to ~8 ms of CPU each, and up to ~20 ms of wall time when its commit
    checkpoints the WAL. A fold that fails ends the job: the journal keeps its records, and the next
    commit starts it again (or is refused and says why)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # True from the server's start of it to its last slice: the server does not ask fold_due after
        # every commit meanwhile (that call, per commit, was 2.4% of a durable peek-locked message).
        self.scheduled = False

    def step(self, budget: Budget) -> bool:
        done = True
        try:
            store = self._store
            if store.fold_due():
                try:
                    store.fold()
                except StoreError:
                    return True
            done = not store.fold_due()
            return done
        finally:
            if done:
                self.scheduled = False


__all__ = ["EntityCleanup", "StoreFolds", "TimerRun"]
