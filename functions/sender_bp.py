"""Role ``sender``: a timer that publishes N high + N low messages to the ``messages`` topic.

The SDK sends, not an output binding: the subscriptions route on the ``Priority`` application
property, which the Python output binding cannot set, and a batch is one AMQP transfer.
"""


import logging

import azure.functions as func

from functions import runtime
from sender.messages import build_messages, publish

FUNCTION_NAME = "sender"


def blueprint() -> func.Blueprint:
    bp = func.Blueprint()

    @bp.function_name(FUNCTION_NAME)
    @bp.timer_trigger(arg_name="timer", schedule="%SENDER_SCHEDULE%", run_on_startup=False)
    def sender(timer: func.TimerRequest) -> None:
        n = runtime.app_settings().sender_batch_size
        messages = build_messages(n, n, runtime.DEFAULT_TENANTS)
        batches = publish(runtime.topic_sender(), messages)
        logging.info("sender: published %d messages in %d batch(es); past_due=%s",
                     len(messages), batches, timer.past_due)

    return bp
