"""One unit of work: a change that is answered only once the store keeps it, and taken back whole when it
cannot.

Why one type: four places wrote the same steps by hand (a settlement that writes a row, a transaction's
commit, a ``$management`` write, a write of the management plane): commit what came before, so a store that
cannot write refuses before anything changes; open the broker's change log and the store's savepoint;
apply; commit; and when that commit fails, take back what the change log does not hold (the messages a
settlement took, locked by their receivers again; a transaction's sends withdrawn), newest first, then
roll the rest back. :func:`apply_stored` is those steps; what a change must undo besides the change log it
registers on the :class:`UnitOfWork` it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from .errors import BrokerError

T = TypeVar("T")


class ChangeLog(Protocol):
    """The broker's change log with the store's savepoint (``api.Changes``)."""

    def begin_change(self) -> None: ...

    def end_change(self, keep: bool) -> None: ...


class UnitOfWork:
    """What one change must undo besides the change log, should its commit fail (see the module docstring)."""

    __slots__ = ("_undo",)

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def on_take_back(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the change is taken back (after the undos registered later: newest first)."""
        self._undo.append(undo)

    @property
    def changed(self) -> bool:
        """Whether anything registered an undo (something was applied)."""
        return bool(self._undo)

    def take_back(self) -> None:
        """Every registered undo, newest first; then none is left."""
        undo, self._undo = self._undo, []
        for step in reversed(undo):
            step()


def _same(failure: BrokerError) -> BaseException:
    return failure


def apply_stored(changes: ChangeLog, commit: Callable[[], BrokerError | None], apply: Callable[[UnitOfWork], T],
                 refuse: Callable[[BrokerError], BaseException] = _same) -> T:
    """``apply`` as one unit of work: what came before committed first, then ``apply`` and its commit; a
    commit that fails raises ``refuse(failure)`` (the failure itself by default) with nothing of the change
    left, in memory or buffered. An error ``apply`` raises ends the change log's change without keeping it
    and goes on up (``apply`` takes back what it half did itself: it knows whether that is anything)."""
    failure = commit()
    if failure is not None:
        raise refuse(failure)
    work = UnitOfWork()
    changes.begin_change()
    try:
        result = apply(work)
    except BaseException:
        changes.end_change(False)
        raise
    failure = commit()
    if failure is not None:
        work.take_back()
        changes.end_change(False)
        raise refuse(failure)
    changes.end_change(True)
    return result


__all__ = ["ChangeLog", "UnitOfWork", "apply_stored"]
