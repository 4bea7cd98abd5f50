"""The one place the broker gets subscription rules from: :mod:`sbemulator.filters` compiles
SQL and correlation filters and SQL actions; a compiled rule has ``matches``, ``has_action`` and
``apply_action``."""

from __future__ import annotations

from typing import Any

from sbemulator.filters import FilterError, FilterEvaluationError, compile_rule


def true_rule(name: str = "$Default") -> Any:
    """The rule a subscription gets when it has none (Service Bus: ``$Default`` with TrueFilter)."""
    return compile_rule(name, "Sql", "1=1", None, None)


__all__ = ["FilterError", "FilterEvaluationError", "compile_rule", "true_rule"]
