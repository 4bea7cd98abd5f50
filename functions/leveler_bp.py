"""Role ``leveler``: the ``leveling`` queue into Table Storage, with explicit settlement.

``autoCompleteMessages`` is off for this trigger and the function binds to the SDK types of
``azurefunctions-extensions-bindings-servicebus``: the message arrives as an
``azure.servicebus.ServiceBusReceivedMessage`` and ``ServiceBusMessageActions`` settles it through
the host. That is what lets a poison message be dead-lettered at once with a reason.
"""


import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from consumers.leveling import settle
from functions import runtime
from shared.topology import QUEUE_LEVELING, SERVICE_BUS_CONNECTION

FUNCTION_NAME = "leveler"


def blueprint() -> func.Blueprint:
    bp = func.Blueprint()

    @bp.function_name(FUNCTION_NAME)
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=QUEUE_LEVELING,
        connection=SERVICE_BUS_CONNECTION,
        auto_complete_messages=False,
    )
    def leveler(
        message: servicebus.ServiceBusReceivedMessage,
        message_actions: servicebus.ServiceBusMessageActions,
    ) -> None:
        settle(runtime.leveling_worker(), message, message_actions)

    return bp
