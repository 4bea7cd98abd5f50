"""The shape the priority consumers share: a subscription (or the FIFO queue) in, ``leveling`` out.

Strategy hooks (``PRIORITY_STRATEGY``, docs/functions.md): a low-priority delivery that carries an
aging copy's number is claimed first (``consumers.aging``), and the ``strict`` low function waits for the
high subscription to be empty (``consumers.strict``).
"""


import azure.functions as func

from consumers.aging import claim
from consumers.priority import process_message
from functions import runtime
from shared.topology import (
    HIGH,
    PRIORITY_PROPERTY,
    QUEUE_LEVELING,
    QUEUE_PRIORITY_FIFO,
    SERVICE_BUS_CONNECTION,
    SUBSCRIPTION_FOR_PRIORITY,
    TOPIC,
)


def _work_ms(priority: str) -> int:
    settings = runtime.app_settings()
    return settings.consumer_work_ms_high if priority == HIGH else settings.consumer_work_ms_low


def _consume(message: func.ServiceBusMessage, leveling: func.Out[str], function_name: str, priority: str) -> None:
    processed = process_message(
        message.get_body(),
        consumer=function_name,
        work_ms=_work_ms(priority),
        enqueued_at=message.enqueued_time_utc,
        recorder=runtime.latency_recorder(),
    )
    leveling.set(processed.body)


def consumer_blueprint(priority: str, function_name: str, *, strict: bool = False) -> func.Blueprint:
    """``strict``: the low function of the strict strategy, which lets high go first."""
    bp = func.Blueprint()

    @bp.function_name(function_name)
    @bp.service_bus_topic_trigger(
        arg_name="message",
        topic_name=TOPIC,
        subscription_name=SUBSCRIPTION_FOR_PRIORITY[priority],
        connection=SERVICE_BUS_CONNECTION,
    )
    @bp.service_bus_queue_output(
        arg_name="leveling", queue_name=QUEUE_LEVELING, connection=SERVICE_BUS_CONNECTION
    )
    def consume(message: func.ServiceBusMessage, leveling: func.Out[str]) -> None:
        if priority != HIGH:
            if not claim(message.application_properties, runtime.aging_canceller):
                return  # aging: the promoted copy is the high pool's; nothing to hand on
            if strict:
                runtime.high_first_gate().wait_for_high_idle(runtime.app_settings().strict_max_hold_seconds)
        _consume(message, leveling, function_name, priority)

    return bp


def fifo_blueprint(function_name: str) -> func.Blueprint:
    """The baseline: one queue, both priorities in arrival order, the same work per priority."""
    bp = func.Blueprint()

    @bp.function_name(function_name)
    @bp.service_bus_queue_trigger(arg_name="message", queue_name=QUEUE_PRIORITY_FIFO,
                                  connection=SERVICE_BUS_CONNECTION)
    @bp.service_bus_queue_output(arg_name="leveling", queue_name=QUEUE_LEVELING, connection=SERVICE_BUS_CONNECTION)
    def consume_fifo(message: func.ServiceBusMessage, leveling: func.Out[str]) -> None:
        priority = (message.application_properties or {}).get(PRIORITY_PROPERTY)
        _consume(message, leveling, function_name, HIGH if priority in (HIGH, HIGH.encode()) else "Low")

    return bp
