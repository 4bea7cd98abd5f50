"""Service Bus subscription rule engine: SQL filters, SQL rule actions, correlation filters.

Rules are compiled once into closures (see ``evaluator``); evaluating a rule against a message never
re-parses. Language reference: "Subscription Rule SQL Filter Syntax" and "Subscription Rule SQL
Action Syntax" in the Service Bus docs.

A layer of its own below the broker: it may import only ``sbemulator.amqp`` (message values are AMQP's),
so the broker, the gateway's rule codec and Config.json parsing (which reports a rule's SQL syntax
errors with their JSON path) all use it without pointing back up (tests/unit/test_import_structure.py).
"""

from .errors import FilterError, FilterEvaluationError
from .rule import Rule, compile_rule, compile_sql_action, compile_sql_filter, compile_sql_predicate

__all__ = [
    "FilterError",
    "FilterEvaluationError",
    "Rule",
    "compile_rule",
    "compile_sql_action",
    "compile_sql_filter",
    "compile_sql_predicate",
]
