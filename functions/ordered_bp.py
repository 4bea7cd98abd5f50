"""Role ``ordered``: per-tenant ordered writes from the session-enabled queue ``ordered-writes``.

ActiveMQ's message groups (``JMSXGroupID``) and exclusive consumers, the Service Bus way: every write
carries ``session_id = tenant id``; the trigger is session-enabled, so the host locks one session (one
tenant) per receiver and hands its messages over one at a time, in order. Each instance holds up to
``maxConcurrentSessions`` tenants at once; the app's ``maximumInstanceCount`` bounds the instances. When
an instance dies, its session locks run out and another instance takes the tenants over.

The message arrives as the SDK type and settles through ``ServiceBusMessageActions`` (as the leveler),
so a poison write is dead-lettered at once with its reason and a duplicate is completed without being
applied. The last applied sequence per tenant is a Table Storage row (``consumers.ordered_table``):
``ServiceBusMessageActions`` can set a session's state but offers no way to read it.
"""

import time

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus

from consumers.ordered import OrderedWrite, settle_ordered
from functions import runtime
from shared.topology import QUEUE_ORDERED_WRITES, SERVICE_BUS_CONNECTION

FUNCTION_NAME = "ordered_writer"


def _simulated_work(write: OrderedWrite) -> None:
    work_ms = runtime.app_settings().ordered_work_ms
    if work_ms:
        time.sleep(work_ms / 1000)


def blueprint() -> func.Blueprint:
    bp = func.Blueprint()

    @bp.function_name(FUNCTION_NAME)
    @bp.service_bus_queue_trigger(
        arg_name="message",
        queue_name=QUEUE_ORDERED_WRITES,
        connection=SERVICE_BUS_CONNECTION,
        is_sessions_enabled=True,
        auto_complete_messages=False,
    )
    def ordered_writer(
        message: servicebus.ServiceBusReceivedMessage,
        message_actions: servicebus.ServiceBusMessageActions,
    ) -> None:
        settle_ordered(runtime.ordered_store(), message, message_actions, work=_simulated_work)

    return bp
