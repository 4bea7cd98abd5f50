"""Writing leveled results to Azure Table Storage, idempotently.

At-least-once delivery means the same message can arrive twice. The row is keyed by the message
(PartitionKey = tenant id, RowKey = message id) and written with an upsert in REPLACE mode, and its
content depends only on the message, so a redelivery rewrites the identical row instead of adding one.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from azure.data.tables import TableServiceClient, UpdateMode

from shared.contract import ContractMessage, PoisonMessageError, format_timestamp
from shared.tables import TableCreatedOnFirstUse

#: Characters Table Storage forbids in PartitionKey/RowKey.
_FORBIDDEN_KEY_CHARS = set("/\\#?") | {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}
_MAX_KEY_BYTES = 1024


class ResultSink(Protocol):
    def upsert(self, message: ContractMessage) -> None: ...


def validate_key(name: str, value: str) -> None:
    """A key the table will reject can never be written: that is a poison message, not a retry."""
    bad = sorted({c for c in value if c in _FORBIDDEN_KEY_CHARS})
    if bad:
        raise PoisonMessageError(
            "InvalidField", f"field '{name}' has characters Table Storage forbids: {bad!r}"
        )
    if len(value.encode("utf-8")) > _MAX_KEY_BYTES:
        raise PoisonMessageError("InvalidField", f"field '{name}' is longer than {_MAX_KEY_BYTES} bytes")


def to_entity(message: ContractMessage) -> dict[str, Any]:
    validate_key("tenant_id", message.tenant_id)
    validate_key("message_id", message.message_id)
    return {
        "PartitionKey": message.tenant_id,
        "RowKey": message.message_id,
        "Priority": message.priority,
        "CreatedAt": format_timestamp(message.created_at),
        "Payload": json.dumps(message.payload, sort_keys=True, separators=(",", ":")),
        "Result": json.dumps(message.result, sort_keys=True, separators=(",", ":")),
    }


class TableSink(TableCreatedOnFirstUse):
    """Upserts into one table; the table is created on first use if it does not exist."""

    @classmethod
    def from_service(cls, service: TableServiceClient, table_name: str) -> TableSink:
        return cls(service.get_table_client(table_name))

    def upsert(self, message: ContractMessage) -> None:
        entity = to_entity(message)
        self.ensure_table()
        self.table.upsert_entity(entity, mode=UpdateMode.REPLACE)


class InMemorySink:
    """The same keying and REPLACE semantics in a dict, for tests and the demo."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes = 0
        self._lock = threading.Lock()

    def upsert(self, message: ContractMessage) -> None:
        entity = to_entity(message)
        with self._lock:
            self.rows[(entity["PartitionKey"], entity["RowKey"])] = entity
            self.writes += 1
