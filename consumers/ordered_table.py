"""The last applied sequence per tenant, kept in Table Storage and moved under optimistic concurrency.

A Python Function cannot read a session's state (see docs/functions.md), so the ordered writer keeps
what the session state would hold in the table it writes to. Each tenant is one partition:

* ``RowKey = "state"``: ``LastSequence`` (the highest sequence applied) and ``Applied`` (how many
  writes were applied);
* ``RowKey = <ordinal, zero-padded>``: one ledger row per applied write, in the order applied, with its
  ``Sequence``, ``Value``, ``AppliedBy`` and ``AppliedAt``.

Applying a write is one entity-group transaction in the tenant's partition: update the state row *if
its ETag is still the one read* (insert it if there was none) and insert the next ledger row. Either
both happen or neither, so a crash between applying and settling leaves a state that says the write
was applied, and the redelivery is recognised. If the ETag no longer matches, another writer (say an
instance whose session lock ran out while it was paused) got there first; the write is evaluated again
against the new state instead of being applied on top of an old one. The ledger is also what the demo
and the tests audit: a write applied twice or out of order would show there, whatever the code meant
to do.
"""

from __future__ import annotations

import enum
import os
import socket
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, TableClient, TableTransactionError, UpdateMode

from consumers.ordered import OrderedWrite
from shared.contract import format_timestamp, utc_now
from shared.tables import TableCreatedOnFirstUse

STATE_ROW = "state"
ORDINAL_WIDTH = 19  # Table Storage sorts RowKeys as strings; zero-padding keeps ordinals in order
MAX_ATTEMPTS = 5


def _int64(value: int) -> EntityProperty:
    """Sequences are Int64 in the table: the sender's are milliseconds since 1970, beyond 32 bits."""
    return EntityProperty(value, EdmType.INT64)


def _value(stored: Any) -> int:
    """An Int64 property reads back as ``EntityProperty`` or ``int`` depending on its size."""
    return int(stored.value if isinstance(stored, EntityProperty) else stored)


class ApplyOutcome(enum.Enum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # sequence == last applied: the same write again (a redelivery or a resend)
    STALE = "stale"  # sequence < last applied: an older write arriving after a newer one was applied


class ConcurrencyError(RuntimeError):
    """The tenant's state kept changing under us; the caller abandons and the write is retried."""


def default_writer_id() -> str:
    """Who applied a write: the platform's instance id in Azure, else host/pid plus a per-store tag."""
    instance = os.environ.get("WEBSITE_INSTANCE_ID")
    base = instance[:12] if instance else f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}:{uuid.uuid4().hex[:6]}"


class TableSequenceStore(TableCreatedOnFirstUse):
    """Applies ordered writes to one table, exactly once per (tenant, sequence), in increasing order."""

    def __init__(self, table: TableClient, writer_id: str | None = None) -> None:
        super().__init__(table)
        self.writer_id = writer_id or default_writer_id()

    def last_applied(self, tenant_id: str) -> int:
        state = self._state(tenant_id)
        return 0 if state is None else _value(state["LastSequence"])

    def _state(self, tenant_id: str) -> Any:
        try:
            return self.table.get_entity(tenant_id, STATE_ROW)
        except ResourceNotFoundError:
            return None

    def apply(self, write: OrderedWrite) -> ApplyOutcome:
        """Apply ``write`` unless its sequence is not above the tenant's last applied one."""
        self.ensure_table()
        for _ in range(MAX_ATTEMPTS):
            state = self._state(write.tenant_id)
            last = 0 if state is None else _value(state["LastSequence"])
            if write.sequence == last:
                return ApplyOutcome.DUPLICATE
            if write.sequence < last:
                return ApplyOutcome.STALE
            applied = 0 if state is None else int(state["Applied"])
            try:
                self.table.submit_transaction(self._operations(write, state, applied + 1))
            except TableTransactionError as exc:
                # 412: the state row changed since we read it; 409: someone inserted it or the ledger row
                if exc.status_code in (409, 412):
                    continue
                raise
            return ApplyOutcome.APPLIED
        raise ConcurrencyError(f"tenant {write.tenant_id}: state changed {MAX_ATTEMPTS} times while applying "
                               f"sequence {write.sequence}")

    def _operations(self, write: OrderedWrite, state: Any, ordinal: int) -> list[tuple[Any, ...]]:
        now = format_timestamp(utc_now())
        sequence = _int64(write.sequence)
        new_state = {"PartitionKey": write.tenant_id, "RowKey": STATE_ROW, "LastSequence": sequence,
                     "Applied": ordinal, "UpdatedBy": self.writer_id, "UpdatedAt": now}
        ledger = {"PartitionKey": write.tenant_id, "RowKey": str(ordinal).zfill(ORDINAL_WIDTH),
                  "Sequence": sequence, "MessageId": write.message_id,
                  "Value": str(write.payload.get("value", "")), "AppliedBy": self.writer_id, "AppliedAt": now}
        if state is None:
            state_op: tuple[Any, ...] = ("create", new_state)
        else:
            state_op = ("update", new_state, {"mode": UpdateMode.REPLACE, "etag": state.metadata["etag"],
                                              "match_condition": MatchConditions.IfNotModified})
        return [state_op, ("create", ledger)]


@dataclass
class TenantAudit:
    """What the ledger of one tenant shows."""

    applied: int = 0
    out_of_order: int = 0  # ledger rows whose sequence is not above the previous row's
    double_applied: int = 0  # sequences that appear in more than one ledger row
    last_sequence: int = 0
    writers: set[str] = field(default_factory=set)


def audit_rows(rows: Iterable[dict[str, Any]]) -> dict[str, TenantAudit]:
    """Check the ledger rows (any order) of any number of tenants; the state rows are ignored."""
    by_tenant: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for row in rows:
        if row["RowKey"] == STATE_ROW:
            continue
        entry = (row["RowKey"], _value(row["Sequence"]), str(row.get("AppliedBy", "")))
        by_tenant[row["PartitionKey"]].append(entry)
    result = {}
    for tenant, entries in by_tenant.items():
        audit = TenantAudit()
        seen: set[int] = set()
        previous = 0
        for _, sequence, writer in sorted(entries):
            audit.applied += 1
            audit.writers.add(writer)
            if sequence in seen:
                audit.double_applied += 1
            seen.add(sequence)
            if sequence <= previous:
                audit.out_of_order += 1
            previous = max(previous, sequence)
        audit.last_sequence = previous
        result[tenant] = audit
    return result


def audit_table(table: TableClient) -> dict[str, TenantAudit]:
    """``audit_rows`` over a whole ordered-writes table."""
    return audit_rows(table.list_entities(select=["PartitionKey", "RowKey", "Sequence", "AppliedBy"]))
