"""The message contract: one JSON object per message, shared by every hop of the pipeline.

``{"message_id": str, "tenant_id": str, "priority": "High"|"Low", "created_at": UTC ISO 8601,
"payload": object, "result": object|null}``. ``result`` is filled in by the priority consumers.
Parsing is strict because the leveling worker must tell a poison message (never processable, to be
dead-lettered at once) from a transient failure (worth a retry).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shared.topology import PRIORITIES

REQUIRED_FIELDS = ("message_id", "tenant_id", "priority", "created_at", "payload")


class PoisonMessageError(ValueError):
    """The message can never be processed; ``reason`` is a short code, ``description`` says what."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = description


@dataclass(frozen=True)
class ContractMessage:
    message_id: str
    tenant_id: str
    priority: str
    created_at: datetime
    payload: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "tenant_id": self.tenant_id,
            "priority": self.priority,
            "created_at": format_timestamp(self.created_at),
            "payload": self.payload,
            "result": self.result,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=True)

    def with_result(self, result: dict[str, Any]) -> ContractMessage:
        return replace(self, result=result)


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """UTC ISO 8601 with microseconds, e.g. ``2026-01-01T00:00:00.000000+00:00``."""
    if value.tzinfo is None:
        raise ValueError("timestamps in the contract must be timezone-aware")
    try:
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    except OverflowError:
        raise ValueError(f"timestamp {value.isoformat()} has no UTC equivalent (before year 1)") from None


def _text(body: bytes | bytearray | memoryview | str) -> str:
    if isinstance(body, str):
        return body
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PoisonMessageError("InvalidEncoding", f"body is not UTF-8: {exc}") from None


def _required_str(data: Mapping[str, Any], name: str) -> str:
    value = data[name]
    if not isinstance(value, str) or not value.strip():
        raise PoisonMessageError("InvalidField", f"field '{name}' must be a non-empty string, got {value!r}")
    return value


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, str):
        raise PoisonMessageError(
            "InvalidField", f"field 'created_at' must be an ISO 8601 string, got {value!r}"
        )
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise PoisonMessageError("InvalidField", f"field 'created_at' is not ISO 8601: {value!r}") from None
    if parsed.tzinfo is None:
        raise PoisonMessageError("InvalidField", f"field 'created_at' has no UTC offset: {value!r}")
    return parsed.astimezone(UTC)


def parse_message(
    body: bytes | bytearray | memoryview | str | Mapping[str, Any],
    *,
    allowed_priorities: tuple[str, ...] = PRIORITIES,
) -> ContractMessage:
    """Validate a message body; raise :class:`PoisonMessageError` naming exactly what is wrong."""
    if isinstance(body, Mapping):
        data: Any = body
    else:
        text = _text(body)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PoisonMessageError("InvalidJson", f"body is not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise PoisonMessageError("InvalidJson", f"body must be a JSON object, got {type(data).__name__}")
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        raise PoisonMessageError("MissingField", f"missing field(s): {', '.join(missing)}")
    priority = _required_str(data, "priority")
    if priority not in allowed_priorities:
        raise PoisonMessageError(
            "InvalidField", f"field 'priority' must be one of {list(allowed_priorities)}, got {priority!r}"
        )
    payload = data["payload"]
    if not isinstance(payload, Mapping):
        raise PoisonMessageError("InvalidField", f"field 'payload' must be a JSON object, got {payload!r}")
    result = data.get("result")
    if result is not None and not isinstance(result, Mapping):
        raise PoisonMessageError(
            "InvalidField", f"field 'result' must be a JSON object or null, got {result!r}"
        )
    return ContractMessage(
        message_id=_required_str(data, "message_id"),
        tenant_id=_required_str(data, "tenant_id"),
        priority=priority,
        created_at=_timestamp(data["created_at"]),
        payload=dict(payload),
        result=dict(result) if result is not None else None,
    )
