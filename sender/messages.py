"""Prioritized messages and batched publishing.

The ``Priority`` application property is what the subscription filters route on; the body repeats it
so a consumer never has to trust the envelope. Invalid priorities (for the ``unroutedPriority``
catch-all) are produced on purpose by the load generator to show where unroutable work lands.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from azure.servicebus import ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from shared.contract import ContractMessage, utc_now
from shared.topology import HIGH, LOW, PRIORITY_PROPERTY

PayloadFactory = Callable[[str, str, int], dict[str, Any]]


def _default_payload(tenant_id: str, priority: str, index: int) -> dict[str, Any]:
    return {"index": index, "work": f"{priority.lower()}-{index}"}


def to_service_bus_message(message: ContractMessage) -> ServiceBusMessage:
    return ServiceBusMessage(
        message.to_json(),
        message_id=message.message_id,
        content_type="application/json",
        application_properties={PRIORITY_PROPERTY: message.priority},
        subject=message.priority,
    )


def build_contract_messages(
    n_high: int,
    n_low: int,
    tenant_ids: Sequence[str],
    *,
    n_invalid: int = 0,
    invalid_priority: str = "Medium",
    payload_factory: PayloadFactory = _default_payload,
    now: Callable[[], datetime] = utc_now,
    new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> list[ContractMessage]:
    """High first, then low, then invalid; tenants are assigned round-robin."""
    if not tenant_ids:
        raise ValueError("need at least one tenant id")
    if min(n_high, n_low, n_invalid) < 0:
        raise ValueError("message counts must be >= 0")
    tenants = itertools.cycle(tenant_ids)
    plan = [HIGH] * n_high + [LOW] * n_low + [invalid_priority] * n_invalid
    return [
        ContractMessage(
            message_id=new_id(),
            tenant_id=(tenant := next(tenants)),
            priority=priority,
            created_at=now(),
            payload=payload_factory(tenant, priority, index),
        )
        for index, priority in enumerate(plan)
    ]


def build_messages(
    n_high: int,
    n_low: int,
    tenant_ids: Sequence[str],
    **kwargs: Any,
) -> list[ServiceBusMessage]:
    """``n_high`` + ``n_low`` (+ ``n_invalid``) messages ready to send to the topic."""
    return [to_service_bus_message(m) for m in build_contract_messages(n_high, n_low, tenant_ids, **kwargs)]


def publish(sender: Any, messages: Iterable[ServiceBusMessage]) -> int:
    """Send ``messages`` in as few ``ServiceBusMessageBatch``es as fit; return the number of batches.

    A batch is sized by the link's max message size, so it is created from the sender; when the next
    message does not fit, the full batch is sent and a new one started. A message too large for an
    empty batch is a caller error and raises ``MessageSizeExceededError``.
    """
    batches = 0
    batch = sender.create_message_batch()
    for message in messages:
        try:
            batch.add_message(message)
        except MessageSizeExceededError:  # the batch is full
            if len(batch) == 0:
                raise
            sender.send_messages(batch)
            batches += 1
            batch = sender.create_message_batch()
            batch.add_message(message)
    if len(batch):
        sender.send_messages(batch)
        batches += 1
    return batches
