"""The ``sys.`` properties a filter or action can read and write, mapped onto the broker's message.

Names follow the documented SQL grammar (the BrokeredMessage / ServiceBusMessage property names,
case-insensitive). ``Label`` and ``Subject`` are the same property (``Subject`` is the newer SDKs'
name for ``Label``). Times are read as timezone-aware UTC datetimes and TimeToLive as a timedelta,
which is what .NET exposes, so that ``sys.EnqueuedTimeUtc`` compares with other times and
``sys.ExpiresAtUtc - sys.EnqueuedTimeUtc`` is a duration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ms_to_datetime(ms: int | None) -> datetime | None:
    if ms is None:
        return None
    return _EPOCH + timedelta(milliseconds=ms)


def _ms_to_timedelta(ms: int | None) -> timedelta | None:
    if ms is None:
        return None
    return timedelta(milliseconds=ms)


def _attr(name: str) -> Callable[[Any], Any]:
    def get(message: Any) -> Any:
        return getattr(message, name, None)

    get.__name__ = f"get_{name}"
    return get


def _time_attr(name: str) -> Callable[[Any], Any]:
    def get(message: Any) -> Any:
        return _ms_to_datetime(getattr(message, name, None))

    return get


def _expires_at(message: Any) -> datetime | None:
    explicit = getattr(message, "expires_at_ms", None)
    if explicit is not None:
        return _ms_to_datetime(explicit)
    enqueued = getattr(message, "enqueued_time_ms", None)
    ttl = getattr(message, "time_to_live_ms", None)
    if enqueued is None or ttl is None:
        return None
    return _ms_to_datetime(enqueued + ttl)


def _ttl(message: Any) -> timedelta | None:
    return _ms_to_timedelta(getattr(message, "time_to_live_ms", None))


def _enqueued_sequence_number(message: Any) -> int | None:
    value = getattr(message, "enqueue_sequence_number", None)
    return value if value is not None else getattr(message, "sequence_number", None)


@dataclass(frozen=True, slots=True)
class SysProp:
    name: str  # canonical spelling
    attribute: str | None  # message attribute written by SET (None: read-only)
    getter: Callable[[Any], Any]
    kind: str  # "str", "int", "datetime", "timedelta"
    settable: bool


def _str_prop(name: str, attribute: str) -> SysProp:
    return SysProp(name, attribute, _attr(attribute), "str", True)


_ALL = [
    _str_prop("MessageId", "message_id"),
    _str_prop("CorrelationId", "correlation_id"),
    _str_prop("Label", "subject"),
    _str_prop("Subject", "subject"),
    _str_prop("To", "to"),
    _str_prop("ReplyTo", "reply_to"),
    _str_prop("ReplyToSessionId", "reply_to_session_id"),
    _str_prop("ContentType", "content_type"),
    _str_prop("SessionId", "session_id"),
    _str_prop("PartitionKey", "partition_key"),
    SysProp("SequenceNumber", None, _attr("sequence_number"), "int", False),
    SysProp("EnqueuedSequenceNumber", None, _enqueued_sequence_number, "int", False),
    SysProp("DeliveryCount", None, _attr("delivery_count"), "int", False),
    SysProp("Size", None, _attr("size"), "int", False),
    SysProp("EnqueuedTimeUtc", None, _time_attr("enqueued_time_ms"), "datetime", False),
    SysProp("ExpiresAtUtc", None, _expires_at, "datetime", False),
    SysProp("ScheduledEnqueueTimeUtc", "scheduled_enqueue_time_ms", _time_attr("scheduled_enqueue_time_ms"),
            "datetime", True),
    SysProp("TimeToLive", "time_to_live_ms", _ttl, "timedelta", True),
    SysProp("LockedUntilUtc", None, _time_attr("locked_until_ms"), "datetime", False),
    SysProp("DeadLetterSource", None, _attr("dead_letter_source"), "str", False),
]

SYSTEM_PROPERTIES: dict[str, SysProp] = {p.name.lower(): p for p in _ALL}


def lookup(name: str) -> SysProp | None:
    """The system property called ``name`` in any letter case, or None if there is none."""
    return SYSTEM_PROPERTIES.get(name.lower())


def to_ms_datetime(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def to_ms_timedelta(value: timedelta) -> int:
    return value // timedelta(milliseconds=1)
