"""The ordered writer's per-tenant state against a real Azurite: ETag-guarded transactions, not a mock.

What is checked is what the store guarantees whatever the caller does: a sequence is applied at most
once, never below one already applied, and a writer working from an old read (a paused instance that
lost its session) cannot apply on top of a newer state.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from azure.core import MatchConditions
from azure.data.tables import TableServiceClient, UpdateMode

from consumers.ordered import OrderedWrite
from consumers.ordered_table import STATE_ROW, ApplyOutcome, TableSequenceStore, audit_rows, audit_table


def _write(sequence: int, tenant: str = "tenant-1") -> OrderedWrite:
    return OrderedWrite(tenant, sequence, f"{tenant}-{sequence}", {"sequence": sequence, "value": sequence * 10})



@pytest.fixture
def table_name() -> str:
    return "o" + uuid.uuid4().hex[:20]


def _store(table_service: TableServiceClient, table_name: str, writer: str = "w1") -> TableSequenceStore:
    return TableSequenceStore(table_service.get_table_client(table_name), writer_id=writer)


def test_writes_apply_once_in_increasing_order(table_service: TableServiceClient, table_name: str) -> None:
    store = _store(table_service, table_name)
    outcomes = [store.apply(_write(s)) for s in (1, 2, 2, 5, 3, 5, 6)]
    assert outcomes == [ApplyOutcome.APPLIED, ApplyOutcome.APPLIED, ApplyOutcome.DUPLICATE, ApplyOutcome.APPLIED,
                        ApplyOutcome.STALE, ApplyOutcome.DUPLICATE, ApplyOutcome.APPLIED]
    assert store.last_applied("tenant-1") == 6
    audit = audit_table(store.table)["tenant-1"]
    assert (audit.applied, audit.out_of_order, audit.double_applied, audit.last_sequence) == (4, 0, 0, 6)
    state = store.table.get_entity("tenant-1", STATE_ROW)
    assert (state["LastSequence"].value, state["Applied"]) == (6, 4)  # Int64: see the next test
    ledger = [row["Sequence"].value for row in store.table.list_entities() if row["RowKey"] != STATE_ROW]
    assert ledger == [1, 2, 5, 6]  # RowKeys sort in the order applied


def test_sequences_beyond_32_bits(table_service: TableServiceClient, table_name: str) -> None:
    """The sender numbers writes by milliseconds since 1970 (about 1.8e12): they must be stored as Int64."""
    store = _store(table_service, table_name)
    base = 1_764_000_000_000
    outcomes = [store.apply(_write(s)).value for s in (base, base + 1, base + 1, base)]
    assert outcomes == ["applied", "applied", "duplicate", "stale"]
    assert store.last_applied("tenant-1") == base + 1
    audit = audit_table(store.table)["tenant-1"]
    assert (audit.applied, audit.last_sequence, audit.double_applied) == (2, base + 1, 0)


def test_tenants_are_independent(table_service: TableServiceClient, table_name: str) -> None:
    store = _store(table_service, table_name)
    assert store.apply(_write(7, "a")) is ApplyOutcome.APPLIED
    assert store.apply(_write(1, "b")) is ApplyOutcome.APPLIED
    assert {t: a.applied for t, a in audit_table(store.table).items()} == {"a": 1, "b": 1}


def test_a_writer_with_an_old_read_cannot_apply_over_a_newer_state(
    table_service: TableServiceClient, table_name: str
) -> None:
    """The zombie case: B applied sequence 2 after A read the state; A's conditional update must fail."""
    a, b = _store(table_service, table_name, "a"), _store(table_service, table_name, "b")
    a.apply(_write(1))
    stale_state = a.table.get_entity("tenant-1", STATE_ROW)
    assert b.apply(_write(2)) is ApplyOutcome.APPLIED
    from azure.data.tables import TableTransactionError

    with pytest.raises(TableTransactionError) as failed:
        a.table.submit_transaction(a._operations(_write(2), stale_state, 2))
    assert failed.value.status_code in (409, 412)
    # Through the public API A re-reads and sees the write is already there.
    assert a.apply(_write(2)) is ApplyOutcome.DUPLICATE
    audit = audit_table(a.table)["tenant-1"]
    assert (audit.applied, audit.double_applied, audit.writers) == (2, 0, {"a", "b"})


def test_the_etag_condition_is_what_rejects_the_old_read(table_service: TableServiceClient, table_name: str) -> None:
    """Guards the test above: an unconditional update with the same old read would have gone through."""
    store = _store(table_service, table_name)
    store.apply(_write(1))
    old = store.table.get_entity("tenant-1", STATE_ROW)
    store.apply(_write(2))
    from azure.core.exceptions import ResourceModifiedError

    with pytest.raises(ResourceModifiedError):
        store.table.update_entity(old, mode=UpdateMode.REPLACE, etag=old.metadata["etag"],
                                  match_condition=MatchConditions.IfNotModified)
    store.table.update_entity(old, mode=UpdateMode.REPLACE)  # no condition: silently goes back to 1
    assert store.last_applied("tenant-1") == 1


def test_racing_writers_apply_each_sequence_once(table_service: TableServiceClient, table_name: str) -> None:
    """Four writers push the same 1..15 concurrently (what two instances holding one session would do)."""
    stores = [_store(table_service, table_name, f"w{i}") for i in range(4)]
    stores[0].ensure_table()
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def run(store: TableSequenceStore) -> None:
        try:
            barrier.wait(timeout=10)
            for sequence in range(1, 16):
                store.apply(_write(sequence))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    audit = audit_table(stores[0].table)["tenant-1"]
    assert audit.double_applied == 0 and audit.out_of_order == 0
    assert audit.last_sequence == 15


def test_the_audit_sees_double_and_out_of_order_rows() -> None:
    """The audit reads the ledger as stored, so a broken writer would show up in the demo summary."""
    rows = [{"PartitionKey": "t", "RowKey": str(i).zfill(19), "Sequence": s, "AppliedBy": "x"}
            for i, s in enumerate([1, 2, 2, 4, 3], start=1)]
    rows.append({"PartitionKey": "t", "RowKey": STATE_ROW, "LastSequence": 4, "Applied": 5})
    audit = audit_rows(reversed(rows))["t"]
    assert (audit.applied, audit.double_applied, audit.out_of_order, audit.last_sequence) == (5, 1, 2, 4)
