"""The one place the broker gets subscription rules from.

Rules are compiled by :mod:`sbemulator.broker.filters` (SQL and correlation filters, SQL actions).
Until that package provides ``compile_rule``, a minimal fallback understands true/false SQL
filters and plain correlation filters, so the broker can run and be tested on its own.
"""

from __future__ import annotations

from typing import Any

try:  # pragma: no cover - depends on the filters package being present
    from sbemulator.broker.filters import (  # type: ignore[attr-defined]
        FilterError,
        FilterEvaluationError,
        compile_rule,
    )

    HAVE_FILTERS = True
except ImportError:  # pragma: no cover - replaced once the filters package lands
    HAVE_FILTERS = False

    class FilterError(ValueError):  # type: ignore[no-redef]
        """A rule that cannot be compiled."""

    class FilterEvaluationError(Exception):  # type: ignore[no-redef]
        """A rule that fails on a particular message."""

    _SYSTEM = {
        "ContentType": "content_type",
        "CorrelationId": "correlation_id",
        "Label": "subject",
        "MessageId": "message_id",
        "ReplyTo": "reply_to",
        "ReplyToSessionId": "reply_to_session_id",
        "SessionId": "session_id",
        "To": "to",
    }

    class _FallbackRule:
        def __init__(self, name: str, match: Any, action: str | None) -> None:
            self.name = name
            self._match = match
            if action:
                raise FilterError("rule actions need the sbemulator.broker.filters package")

        def matches(self, message: Any) -> bool:
            return self._match(message)

        def apply_action(self, message: Any) -> None:
            return None

    def compile_rule(
        name: str,
        filter_type: str,
        sql_expression: str | None,
        correlation: dict | None,
        action_expression: str | None,
    ) -> Any:  # type: ignore[no-redef]
        if filter_type == "Sql":
            text = " ".join((sql_expression or "").upper().split())
            if text in ("1=1", "1 = 1", "TRUE"):
                return _FallbackRule(name, lambda m: True, action_expression)
            if text in ("1=0", "1 = 0", "FALSE"):
                return _FallbackRule(name, lambda m: False, action_expression)
            raise FilterError(f"SQL filter {sql_expression!r} needs the sbemulator.broker.filters package")
        if filter_type == "Correlation":
            corr = dict(correlation or {})
            user = dict(corr.pop("Properties", {}) or {})
            system = {_SYSTEM[k]: v for k, v in corr.items()}

            def match(m: Any) -> bool:
                props = m.application_properties
                return all(getattr(m, a) == v for a, v in system.items()) and all(
                    k in props and props[k] == v for k, v in user.items()
                )

            return _FallbackRule(name, match, action_expression)
        raise FilterError(f"unknown filter type {filter_type!r}")


def true_rule(name: str = "$Default") -> Any:
    """The rule a subscription gets when it has none (Service Bus: ``$Default`` with TrueFilter)."""
    return compile_rule(name, "Sql", "1=1", None, None)


__all__ = ["HAVE_FILTERS", "FilterError", "FilterEvaluationError", "compile_rule", "true_rule"]
