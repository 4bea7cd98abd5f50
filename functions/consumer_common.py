"""The shape both priority consumers share: topic subscription in, ``leveling`` queue out."""


import azure.functions as func

from consumers.priority import process_message
from functions import runtime
from shared.topology import QUEUE_LEVELING, SERVICE_BUS_CONNECTION, SUBSCRIPTION_FOR_PRIORITY, TOPIC


def consumer_blueprint(priority: str, function_name: str) -> func.Blueprint:
    bp = func.Blueprint()

    def work_ms() -> int:
        settings = runtime.app_settings()
        return settings.consumer_work_ms_high if priority == "High" else settings.consumer_work_ms_low

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
        processed = process_message(
            message.get_body(),
            consumer=function_name,
            work_ms=work_ms(),
            enqueued_at=message.enqueued_time_utc,
            recorder=runtime.latency_recorder(),
        )
        leveling.set(processed.body)

    return bp
