"""Where a tick's messages go under each priority strategy (``PRIORITY_STRATEGY``).

- ``separate``, ``shared``, ``strict``: to the topic; its filters route each to its subscription.
- ``fifo``: to the one queue ``priority-fifo``, in order; nothing routes on priority.
- ``aging``: to the topic, and for each low-priority message a *promoted copy* is scheduled on the
  topic first, for ``AGING_AFTER_SECONDS`` later, with ``Priority = 'High'`` (so the highPriority
  subscription takes it when it appears) and ``AgedFrom = 'Low'``. The original carries the copy's
  sequence number. Whoever gets there first wins: the low consumer cancels the copy before it works
  (cancelled: the message is its own); if the copy has already appeared, the cancel finds nothing
  ("Messages not found") and the low consumer completes the original without working, because the
  high pool has it. Service Bus has no "raise the priority of a waiting message" operation, and a
  scheduled message is the only way to make one appear later on its own; the cost is two operations
  per low-priority message (the schedule, the cancel), and no polling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from azure.servicebus import ServiceBusMessage

from sender.messages import publish
from shared.contract import utc_now
from shared.operations import OPERATIONS, SCHEDULE, SEND
from shared.topology import AGED_FROM_PROPERTY, AGING_SEQUENCE_PROPERTY, HIGH, LOW, PRIORITY_PROPERTY


def _priority(message: ServiceBusMessage) -> Any:
    return (message.application_properties or {}).get(PRIORITY_PROPERTY)


def promoted_copy(message: ServiceBusMessage) -> ServiceBusMessage:
    """The same body and message id, routed as High; ``AgedFrom`` keeps what it was."""
    properties = dict(message.application_properties or {})
    properties.update({PRIORITY_PROPERTY: HIGH, AGED_FROM_PROPERTY: LOW})
    return ServiceBusMessage(b"".join(message.body), message_id=message.message_id, content_type=message.content_type,
                             application_properties=properties, subject=HIGH)


def schedule_promotions(topic_sender: Any, messages: Sequence[ServiceBusMessage], after: float,
                        now: Callable[[], datetime] = utc_now) -> int:
    """Schedule a promoted copy of each low-priority message and tag the original with its number."""
    low = [m for m in messages if _priority(m) == LOW]
    if not low:
        return 0
    numbers = topic_sender.schedule_messages([promoted_copy(m) for m in low], now() + timedelta(seconds=after))
    OPERATIONS.add(SCHEDULE, len(low))
    for message, number in zip(low, numbers, strict=True):
        message.application_properties = {**(message.application_properties or {}),
                                          AGING_SEQUENCE_PROPERTY: str(number)}
    return len(low)


def route(strategy: str, messages: Sequence[ServiceBusMessage], *, topic_sender: Callable[[], Any],
          fifo_sender: Callable[[], Any], aging_after: float) -> int:
    """Publish ``messages`` the way ``strategy`` wants; returns the batches sent. Senders are factories,
    so a strategy opens only the links it uses."""
    if not messages:
        return 0
    if strategy == "fifo":
        sender = fifo_sender()
    else:
        sender = topic_sender()
        if strategy == "aging":
            schedule_promotions(sender, messages, aging_after)
    batches = publish(sender, messages)
    OPERATIONS.add(SEND, len(messages))
    return batches
