"""The Function App: registers the blueprints of the roles that ``APP_ROLES`` names.

One package deploys as several Function Apps (sender, high consumers, low consumers, leveler, ordered
writer), each with its own scale-out limit; ``APP_ROLES`` unset or empty registers every role (local runs).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable

import azure.functions as func

from shared.settings import parse_roles

ROLE_MODULES = {
    "sender": "functions.sender_bp",
    "consumer-high": "functions.consumer_high_bp",
    "consumer-low": "functions.consumer_low_bp",
    "leveler": "functions.leveler_bp",
    "ordered": "functions.ordered_bp",
}


def create_app(roles: Iterable[str] | None = None) -> func.FunctionApp:
    """A new app with fresh blueprints; ``roles`` defaults to the ``APP_ROLES`` setting."""
    selected = parse_roles(os.environ.get("APP_ROLES")) if roles is None else parse_roles(",".join(roles))
    app = func.FunctionApp()
    for role in selected:
        app.register_functions(importlib.import_module(ROLE_MODULES[role]).blueprint())
    return app


app = create_app()
