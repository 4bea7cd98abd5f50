"""Role ``consumer-low``: the ``lowPriority`` subscription; deploy with a low instance limit."""

import azure.functions as func

from functions.consumer_common import consumer_blueprint
from shared.topology import LOW

FUNCTION_NAME = "consumer_low"


def blueprint() -> func.Blueprint:
    return consumer_blueprint(LOW, FUNCTION_NAME)
