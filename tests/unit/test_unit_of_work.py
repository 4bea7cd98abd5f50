"""One unit of work (sbemulator/broker/unit_of_work.py): a change answered only once the store keeps it,
taken back whole when it cannot - what a settlement that writes a row, a transaction's commit, a
$management write and a management-plane write share. The store and the change log are stand-ins here
(their own tests drive the real ones: tests/integration/test_store_faults_*.py end to end)."""

from __future__ import annotations

import pytest

from sbemulator.broker.errors import QuotaExceededError, ServerBusyError
from sbemulator.broker.unit_of_work import UnitOfWork, apply_stored


class ChangeLog:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def begin_change(self) -> None:
        self.log.append("begin")

    def end_change(self, keep: bool) -> None:
        self.log.append(f"end keep={keep}")


def _commits(log: list[str], *outcomes: Exception | None):
    results = list(outcomes)

    def commit():
        log.append("commit")
        return results.pop(0)
    return commit


def test_a_kept_change_commits_what_came_before_then_itself_and_takes_nothing_back() -> None:
    log: list[str] = []

    def apply(work: UnitOfWork) -> str:
        work.on_take_back(lambda: log.append("undo"))
        log.append("apply")
        return "result"

    assert apply_stored(ChangeLog(log), _commits(log, None, None), apply) == "result"
    assert log == ["commit", "begin", "apply", "commit", "end keep=True"]


def test_a_change_whose_commit_fails_is_taken_back_newest_first_and_refused_with_the_mapped_error() -> None:
    log: list[str] = []
    full = QuotaExceededError("disk full")

    def apply(work: UnitOfWork) -> None:
        work.on_take_back(lambda: log.append("undo first"))
        work.on_take_back(lambda: log.append("undo second"))
        log.append("apply")

    with pytest.raises(ServerBusyError):
        apply_stored(ChangeLog(log), _commits(log, None, full), apply, lambda failure: ServerBusyError(str(failure)))
    assert log == ["commit", "begin", "apply", "commit", "undo second", "undo first", "end keep=False"]


def test_a_store_that_cannot_write_what_came_before_refuses_before_anything_changes() -> None:
    log: list[str] = []
    busy = ServerBusyError("busy")
    with pytest.raises(ServerBusyError) as raised:
        apply_stored(ChangeLog(log), _commits(log, busy), lambda work: log.append("apply"))
    assert raised.value is busy and log == ["commit"]


def test_an_error_of_the_change_itself_ends_the_change_unkept_and_goes_on_up() -> None:
    log: list[str] = []

    def apply(work: UnitOfWork) -> None:
        work.on_take_back(lambda: log.append("undo"))
        raise ValueError("refused by the broker")

    with pytest.raises(ValueError):
        apply_stored(ChangeLog(log), _commits(log, None), apply)
    assert log == ["commit", "begin", "end keep=False"]  # the change takes back what it half did itself


def test_take_back_runs_each_undo_once() -> None:
    log: list[str] = []
    work = UnitOfWork()
    work.on_take_back(lambda: log.append("undo"))
    assert work.changed
    work.take_back()
    work.take_back()
    assert log == ["undo"] and not work.changed
