"""Correlation filters: equality on system properties and user properties, all combined with AND.

Per the topic filters docs, "for string expressions, the comparison is case-sensitive" and every
property given must match. Values compare with their type (a filter value ``"2"`` does not match
the integer 2, which is what Service Bus does, see Azure/azure-service-bus#401), but numbers of
different widths compare by value. User property *names* are looked up like the SQL filter does
(exact case first, then case-insensitive).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sbemulator.amqp.types import Described, Timestamp

from . import values
from .errors import FilterError
from .evaluator import MISSING, find_user_key

# Config.json / ARM key -> message attribute. "Subject" and "SendTo" are the newer SDK spellings.
SYSTEM_FIELDS = {
    "correlationid": "correlation_id",
    "messageid": "message_id",
    "to": "to",
    "sendto": "to",
    "replyto": "reply_to",
    "label": "subject",
    "subject": "subject",
    "sessionid": "session_id",
    "replytosessionid": "reply_to_session_id",
    "contenttype": "content_type",
}
_IGNORED = frozenset({"requirespreprocessing"})


def normalize_correlation(correlation: Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
    """Split a correlation filter definition into (attribute -> value, user property -> value)."""
    system: dict[str, str] = {}
    props: dict[str, Any] = {}
    for key, value in (correlation or {}).items():
        lk = str(key).lower()
        if lk == "properties":
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise FilterError("correlation filter Properties must be an object", 0, str(key),
                                  ("an object",), "correlation filter")
            props.update(value)
        elif lk in SYSTEM_FIELDS:
            if value is None:
                continue
            if not isinstance(value, str):
                raise FilterError(f"correlation filter {key} must be a string", 0, str(key),
                                  ("a string",), "correlation filter")
            system[SYSTEM_FIELDS[lk]] = value
        elif lk in _IGNORED:
            continue
        else:
            raise FilterError(f"unknown correlation filter field '{key}'", 0, str(key),
                              (*sorted(SYSTEM_FIELDS), "properties"), "correlation filter")
    return system, props


def compile_correlation(correlation: Mapping[str, Any] | None) -> Callable[[Any], bool]:
    system, props = normalize_correlation(correlation)
    system_items = tuple(system.items())
    # a date/time given over AMQP arrives as a timestamp: compare it as the date/time it is
    prop_items = tuple((name, None if v is None else values.from_amqp(v)) for name, v in props.items())

    def matches(message: Any) -> bool:
        for attribute, wanted in system_items:
            actual = getattr(message, attribute, None)
            if actual is None or actual != wanted:
                return False
        if prop_items:
            app = message.application_properties
            for name, expected in prop_items:
                actual = app.get(name, MISSING) if app else MISSING
                if actual is MISSING:
                    key = find_user_key(app, name)
                    if key is MISSING:
                        return False
                    actual = app[key]
                if actual.__class__ is Timestamp or actual.__class__ is Described:
                    actual = values.from_amqp(actual)
                if expected is None or actual is None:
                    if expected is not actual:
                        return False
                elif not values.equals(actual, expected):
                    return False
        return True

    return matches
