"""Strategy ``strict``: the low-priority function of the one app that serves both, high first."""

import azure.functions as func

from functions.consumer_common import consumer_blueprint
from shared.topology import LOW

FUNCTION_NAME = "consumer_low"


def blueprint() -> func.Blueprint:
    return consumer_blueprint(LOW, FUNCTION_NAME, strict=True)
