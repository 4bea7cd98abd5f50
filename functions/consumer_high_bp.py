"""Role ``consumer-high``: the ``highPriority`` subscription; deploy with a high instance limit."""

import azure.functions as func

from functions.consumer_common import consumer_blueprint
from shared.topology import HIGH

FUNCTION_NAME = "consumer_high"


def blueprint() -> func.Blueprint:
    return consumer_blueprint(HIGH, FUNCTION_NAME)
