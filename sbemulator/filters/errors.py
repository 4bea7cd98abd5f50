"""Exceptions of the filter engine.

Compile errors and evaluation errors are separate types because Service Bus treats them
differently: a bad expression is rejected when the rule is created (HTTP 400 / AMQP error), while an
evaluation failure happens per message and the broker decides (dead-letter when the subscription has
``DeadLetteringOnFilterEvaluationExceptions``, otherwise the subscription skips the message).
"""

from __future__ import annotations


class FilterError(Exception):
    """A SQL filter or action expression (or correlation filter definition) that cannot be compiled.

    ``position`` is the 0-based character offset of the offending token, ``near`` its source text
    and ``expected`` what the parser would have accepted there (empty for semantic errors).
    """

    def __init__(
        self,
        detail: str,
        position: int = 0,
        near: str = "",
        expected: tuple[str, ...] = (),
        what: str = "SQL filter",
    ) -> None:
        self.detail = detail
        self.position = position
        self.near = near
        self.expected = tuple(expected)
        self.what = what
        near_text = f"near '{near}'" if near else "at end of expression"
        super().__init__(f"Invalid {what} expression at position {position} {near_text}: {detail}")


class FilterEvaluationError(Exception):
    """Evaluating a compiled filter or action against one message failed (e.g. arithmetic on a string)."""
