from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.contract import ContractMessage, PoisonMessageError, parse_message


def _valid(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "message_id": "m-1", "tenant_id": "tenant-1", "priority": "High",
        "created_at": "2026-01-02T03:04:05.000006+00:00", "payload": {"k": 1},
    }
    body.update(overrides)
    return body


def test_round_trip() -> None:
    created = datetime(2026, 1, 1, 12, tzinfo=UTC)
    message = ContractMessage("m", "t", "Low", created, {"a": [1, 2]}, {"r": "x"})
    assert parse_message(message.to_json()) == message
    assert parse_message(message.to_json().encode()) == message


def test_created_at_is_normalised_to_utc() -> None:
    parsed = parse_message(json.dumps(_valid(created_at="2026-01-01T02:00:00+02:00")))
    assert parsed.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert parsed.created_at.utcoffset() == timedelta(0)
    assert parse_message(json.dumps(_valid(created_at="2026-01-01T00:00:00Z"))).created_at.tzinfo is not None


@pytest.mark.parametrize(
    ("body", "reason", "fragment"),
    [
        (b"not json", "InvalidJson", "not JSON"),
        (b"\xff\xfe", "InvalidEncoding", "UTF-8"),
        (b"[1, 2]", "InvalidJson", "JSON object"),
        (json.dumps({"message_id": "x"}), "MissingField", "tenant_id, priority, created_at, payload"),
        (json.dumps(_valid(priority="Medium")), "InvalidField", "'priority'"),
        (json.dumps(_valid(tenant_id="")), "InvalidField", "'tenant_id'"),
        (json.dumps(_valid(message_id=7)), "InvalidField", "'message_id'"),
        (json.dumps(_valid(created_at="yesterday")), "InvalidField", "'created_at' is not ISO 8601"),
        (json.dumps(_valid(created_at="2026-01-01T00:00:00")), "InvalidField", "no UTC offset"),
        (json.dumps(_valid(payload=[1])), "InvalidField", "'payload'"),
        (json.dumps(_valid(result="done")), "InvalidField", "'result'"),
    ],
)
def test_poison_names_what_is_wrong(body: bytes | str, reason: str, fragment: str) -> None:
    with pytest.raises(PoisonMessageError) as info:
        parse_message(body)
    assert info.value.reason == reason
    assert fragment in info.value.description


def test_allowed_priorities_can_be_widened_for_the_unrouted_path() -> None:
    body = json.dumps(_valid(priority="Medium"))
    parsed = parse_message(body, allowed_priorities=("High", "Low", "Medium"))
    assert parsed.priority == "Medium"


def test_naive_timestamps_cannot_be_serialised() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ContractMessage("m", "t", "High", datetime(2026, 1, 1), {}).to_json()


@given(
    st.text(min_size=1).filter(str.strip), st.text(min_size=1).filter(str.strip),
    st.sampled_from(["High", "Low"]),
    st.datetimes(min_value=datetime(1, 1, 2), timezones=st.just(timezone(timedelta(hours=5)))),
    st.dictionaries(st.text(), st.integers() | st.text() | st.none(), max_size=5),
)
def test_any_valid_message_round_trips(
    mid: str, tenant: str, priority: str, created: datetime, payload: dict
) -> None:
    message = ContractMessage(mid, tenant, priority, created, payload)
    parsed = parse_message(message.to_json())
    assert parsed.to_dict() == message.to_dict()
    assert parsed.created_at == created


@given(st.binary(max_size=64))
def test_arbitrary_bytes_parse_or_raise_poison_never_anything_else(body: bytes) -> None:
    try:
        parse_message(body)
    except PoisonMessageError:
        pass


def test_a_timestamp_with_no_utc_equivalent_is_a_clear_error() -> None:
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    with pytest.raises(ValueError, match="no UTC equivalent"):
        ContractMessage("m", "t", "High", early, {}).to_json()
