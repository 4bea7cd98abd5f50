"""The table sink against a real Azurite: the idempotent upsert is a property of the store, not a mock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from azure.data.tables import TableServiceClient

from consumers.table_sink import TableSink
from shared.contract import ContractMessage


def _message(message_id: str, tenant: str = "tenant-1", value: int = 1) -> ContractMessage:
    return ContractMessage(
        message_id=message_id, tenant_id=tenant, priority="High",
        created_at=datetime(2026, 1, 1, tzinfo=UTC), payload={"value": value}, result={"ok": True},
    )



@pytest.fixture
def sink(table_service: TableServiceClient) -> TableSink:
    return TableSink.from_service(table_service, "t" + uuid.uuid4().hex[:20])


def test_writing_the_same_message_twice_leaves_one_row(sink: TableSink) -> None:
    message = _message("m-1")
    sink.upsert(message)
    sink.upsert(message)  # a redelivery
    rows = list(sink.table.list_entities())
    assert len(rows) == 1
    assert (rows[0]["PartitionKey"], rows[0]["RowKey"]) == ("tenant-1", "m-1")
    assert rows[0]["Priority"] == "High"


def test_replace_mode_overwrites_every_column(sink: TableSink) -> None:
    sink.upsert(_message("m-2", value=1))
    entity = sink.table.get_entity("tenant-1", "m-2")
    sink.table.upsert_entity({**entity, "Extra": "stale"})
    sink.upsert(_message("m-2", value=2))
    stored = sink.table.get_entity("tenant-1", "m-2")
    assert "Extra" not in stored  # REPLACE, not MERGE: the row is exactly what the message says
    assert stored["Payload"] == '{"value":2}'


def test_distinct_messages_and_tenants_are_distinct_rows(sink: TableSink) -> None:
    for tenant in ("tenant-1", "tenant-2"):
        for message_id in ("a", "b"):
            sink.upsert(_message(message_id, tenant))
    keys = sorted((row["PartitionKey"], row["RowKey"]) for row in sink.table.list_entities())
    assert keys == [("tenant-1", "a"), ("tenant-1", "b"), ("tenant-2", "a"), ("tenant-2", "b")]


def test_the_table_is_created_on_first_write_and_reused(table_service: TableServiceClient) -> None:
    name = "t" + uuid.uuid4().hex[:20]
    assert name not in [t.name for t in table_service.list_tables()]
    TableSink.from_service(table_service, name).upsert(_message("x"))
    TableSink.from_service(table_service, name).upsert(_message("y"))  # a second process: table exists
    assert name in [t.name for t in table_service.list_tables()]
    assert len(list(table_service.get_table_client(name).list_entities())) == 2
