"""Strategy ``fifo`` (the baseline): one queue, ``priority-fifo``, one pool; no priority at all."""

import azure.functions as func

from functions.consumer_common import fifo_blueprint

FUNCTION_NAME = "consumer_fifo"


def blueprint() -> func.Blueprint:
    return fifo_blueprint(FUNCTION_NAME)
