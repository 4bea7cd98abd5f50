"""The Function App: registers the blueprints of the roles that ``APP_ROLES`` names.

One package deploys as several Function Apps (sender, high consumers, low consumers, leveler, ordered
writer), each with its own scale-out limit; ``APP_ROLES`` unset or empty registers every role (local runs).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable

import azure.functions as func

from shared.settings import parse_roles, parse_strategy

ROLE_MODULES = {
    "sender": "functions.sender_bp",
    "consumer-high": "functions.consumer_high_bp",
    "consumer-low": "functions.consumer_low_bp",
    "leveler": "functions.leveler_bp",
    "ordered": "functions.ordered_bp",
}
#: What the two consumer apps run under each PRIORITY_STRATEGY (docs/functions.md, "Strategies"). The
#: deployment keeps five apps whatever the strategy (one azd service each); an app whose role a strategy
#: does not use registers no function and scales to zero.
STRATEGY_MODULES = {
    "separate": {"consumer-high": ["functions.consumer_high_bp"], "consumer-low": ["functions.consumer_low_bp"]},
    "aging": {"consumer-high": ["functions.consumer_high_bp"], "consumer-low": ["functions.consumer_low_bp"]},
    "shared": {"consumer-high": ["functions.consumer_high_bp", "functions.consumer_low_bp"], "consumer-low": []},
    "strict": {"consumer-high": ["functions.consumer_high_bp", "functions.consumer_low_strict_bp"],
               "consumer-low": []},
    "fifo": {"consumer-high": ["functions.consumer_fifo_bp"], "consumer-low": []},
}


def role_modules(role: str, strategy: str) -> list[str]:
    return STRATEGY_MODULES[strategy].get(role, [ROLE_MODULES[role]])


def create_app(roles: Iterable[str] | None = None, strategy: str | None = None) -> func.FunctionApp:
    """A new app with fresh blueprints; ``roles`` defaults to the ``APP_ROLES`` setting, ``strategy`` to
    ``PRIORITY_STRATEGY``."""
    selected = parse_roles(os.environ.get("APP_ROLES")) if roles is None else parse_roles(",".join(roles))
    chosen = parse_strategy(os.environ.get("PRIORITY_STRATEGY") if strategy is None else strategy)
    app = func.FunctionApp()
    for role in selected:
        for module in role_modules(role, chosen):
            app.register_functions(importlib.import_module(module).blueprint())
    return app


app = create_app()
