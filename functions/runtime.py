"""Process-wide resources for the Functions, created on first use and then reused.

Clients, the topic sender, the leveler's worker (with its share of the write budget) and the latency
recorder live for the life of the worker process: a client per invocation would open a new AMQP
connection each time.
"""

from __future__ import annotations

import functools

from azure.servicebus import ServiceBusClient, ServiceBusSender

from consumers.aging import SerialCanceller
from consumers.leveling import LevelingWorker
from consumers.ordered import TenantSequence
from consumers.ordered_table import TableSequenceStore
from consumers.strict import HighFirstGate
from consumers.table_sink import TableSink
from shared.clients import service_bus_client, table_service_client
from shared.settings import AppSettings, load_app, load_service_bus, load_table
from shared.telemetry import LatencyRecorder
from shared.topology import QUEUE_ORDERED_WRITES, QUEUE_PRIORITY_FIFO, SUBSCRIPTION_HIGH, TOPIC
from shared.write_budget import BudgetClock, SharedWritePacer

#: the partition of the budget table that holds the leveler app's clock
BUDGET_NAME = "leveler"
DEFAULT_TENANTS = tuple(f"tenant-{i}" for i in range(1, 6))


@functools.cache
def app_settings() -> AppSettings:
    return load_app()


@functools.cache
def latency_recorder() -> LatencyRecorder:
    return LatencyRecorder()


@functools.cache
def service_bus() -> ServiceBusClient:
    return service_bus_client(load_service_bus())


@functools.cache
def topic_sender() -> ServiceBusSender:
    """One sender for the life of the worker: opening a link costs a round trip or two (about half
    a second with the SDK's polling), which every timer tick would otherwise add to every message's
    latency. The SDK re-opens the link by itself after a failure."""
    return service_bus().get_topic_sender(TOPIC)


@functools.cache
def aging_canceller() -> SerialCanceller:
    """``aging``: cancels the promoted copies of the low-priority messages this instance claims."""
    return SerialCanceller(service_bus().get_topic_sender(TOPIC))


@functools.cache
def fifo_sender() -> ServiceBusSender:
    """``fifo``: the sender's one queue for both priorities."""
    return service_bus().get_queue_sender(QUEUE_PRIORITY_FIFO)


@functools.cache
def high_first_gate() -> HighFirstGate:
    """``strict``: one gate per instance; its peeks go over one receiver (receivers are not thread-safe;
    the gate's lock serialises them)."""
    receiver = service_bus().get_subscription_receiver(TOPIC, SUBSCRIPTION_HIGH)

    def high_pending() -> bool:
        # from the first sequence number every time: without one the SDK browses on from the last message it
        # peeked, and a second peek would miss a high message that is still there (locked, being processed)
        return bool(receiver.peek_messages(max_message_count=1, sequence_number=1))

    return HighFirstGate(high_pending, close=receiver.close)


@functools.cache
def ordered_sender() -> ServiceBusSender:
    """The sender's feed of per-tenant ordered writes (one per tenant per tick) into ``ordered-writes``."""
    return service_bus().get_queue_sender(QUEUE_ORDERED_WRITES)


@functools.cache
def tenant_sequence() -> TenantSequence:
    """Per-tenant sequence numbers of the ordered writes this sender instance publishes."""
    return TenantSequence()


@functools.cache
def ordered_store() -> TableSequenceStore:
    """The ordered writer's table: last applied sequence per tenant (ETag-guarded) and the ledger."""
    table = load_table()
    return TableSequenceStore(table_service_client(table).get_table_client(app_settings().ordered_table))


@functools.cache
def leveling_worker() -> LevelingWorker:
    """One worker per instance, pacing its writes by slots leased from the app-wide budget.

    LEVELER_MAX_WRITES_PER_SECOND is the cap of the whole leveler app, however many instances the
    platform runs (0..maximumInstanceCount): the instances lease write slots from one clock entity
    in the LEVELER_BUDGET_TABLE table (``shared.write_budget``), so one instance alone may use the
    whole cap and any number of them together never exceed it. The invocations of an instance
    (maxConcurrentCalls) share its leases.
    """
    settings = app_settings()
    table = load_table()
    service = table_service_client(table)
    sink = TableSink.from_service(service, table.table_name)
    budget = BudgetClock(service.get_table_client(settings.leveler_budget_table), BUDGET_NAME,
                         settings.leveler_max_writes_per_second)
    return LevelingWorker(sink, SharedWritePacer(budget), recorder=latency_recorder())


def reset() -> None:
    """Forget the cached resources (tests, or after settings changed)."""
    for name in ("app_settings", "latency_recorder", "service_bus", "topic_sender", "leveling_worker",
                 "ordered_sender", "tenant_sequence", "ordered_store", "fifo_sender", "high_first_gate",
                 "aging_canceller"):
        clear = getattr(globals()[name], "cache_clear", None)
        if clear is not None:  # a test may have replaced the factory
            clear()
