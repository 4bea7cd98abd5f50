"""How Service Bus names things on the wire: an entity's path in a link address, the scope a token must
cover, the resource an authorization error names, and .NET ticks (the SDKs' lock expiry property)."""

from __future__ import annotations

from typing import Any

DOTNET_EPOCH_TICKS = 621355968000000000


def entity_path(address: str | None) -> str:
    """'amqps://host:5671/Queue/' -> 'Queue' (case kept; the broker compares case-insensitively)."""
    text = (address or "").strip()
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("/", 1)[1] if "/" in text else ""
    return text.strip("/")


def auth_scope(path: str) -> str:
    """The path a token must cover: the entity itself, without sub-queues or $management."""
    parts = path.split("/")
    lowered = [p.lower() for p in parts]
    for marker in ("$management", "$deadletterqueue", "$transfer"):
        if marker in lowered:
            parts = parts[: lowered.index(marker)]
            lowered = lowered[: len(parts)]
    return "/".join(parts)


def resource_uri(address: str | None, hostname: str, path: str) -> str:
    """'sb://<host>/<path>': how Service Bus names the resource in an authorization error (the host
    from the link's address, else the one the client's open named)."""
    text = (address or "").strip()
    host = text.split("://", 1)[1].split("/", 1)[0] if "://" in text else hostname
    return f"sb://{host}/{path}"


def dotnet_ticks(unix_ms: int) -> int:
    return DOTNET_EPOCH_TICKS + unix_ms * 10_000


def text_or_none(value: Any) -> str | None:
    """An AMQP string or binary property as text (None stays None)."""
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
