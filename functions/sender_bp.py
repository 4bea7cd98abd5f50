"""Role ``sender``: a timer that publishes N high + N low messages to the ``messages`` topic (or, as
``PRIORITY_STRATEGY`` says, to the FIFO queue, or with aging copies: ``sender/routing.py``), and one
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
from sender.messages import build_messages
from sender.routing import route

FUNCTION_NAME = "sender"


def blueprint() -> func.Blueprint:
    bp = func.Blueprint()

    @bp.function_name(FUNCTION_NAME)
    @bp.timer_trigger(arg_name="timer", schedule="%SENDER_SCHEDULE%", run_on_startup=False)
    def sender(timer: func.TimerRequest) -> None:
        settings = runtime.app_settings()
        n = settings.sender_batch_size
        messages = build_messages(n, n, runtime.DEFAULT_TENANTS)
        batches = route(settings.priority_strategy, messages, topic_sender=runtime.topic_sender,
                        fifo_sender=runtime.fifo_sender, aging_after=settings.aging_after_seconds)
        ordered = build_tick_writes(runtime.DEFAULT_TENANTS, runtime.tenant_sequence(), value=len(messages))
        runtime.ordered_sender().send_messages(ordered)
        logging.info("sender: published %d messages in %d batch(es) and %d ordered writes; past_due=%s",
                     len(messages), batches, len(ordered), timer.past_due)

    return bp
