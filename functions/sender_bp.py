"""Role ``sender``: a timer that publishes N high + N low messages to the ``messages`` topic, and one
ordered write per tenant to ``ordered-writes`` (the feed of the ``ordered`` role).

The SDK sends, not an output binding: the subscriptions route on the ``Priority`` application
property, and the ordered writes need a session id, neither of which the Python output binding can
set; and a batch is one AMQP transfer. The sender is a timer, so it runs on one instance at a time:
that is what lets it number each tenant's writes in the order it sends them.
"""


import logging

import azure.functions as func

from consumers.ordered import build_tick_writes
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
        ordered = build_tick_writes(runtime.DEFAULT_TENANTS, runtime.tenant_sequence(), value=len(messages))
        runtime.ordered_sender().send_messages(ordered)
        logging.info("sender: published %d messages in %d batch(es) and %d ordered writes; past_due=%s",
                     len(messages), batches, len(ordered), timer.past_due)

    return bp
