"""``aging``: a low-priority consumer claims its message by cancelling the promoted copy first.

The sender scheduled a copy of every low-priority message for ``AGING_AFTER_SECONDS`` later, routed as
High (``sender/routing.py``). Cancelling it before the work decides who does it: the cancel succeeds
while the copy is still scheduled (the low pool got there in time: nothing was promoted), and fails
with Service Bus's "message not found" once the copy has become active, which means the high pool
has it and the original is completed without doing the work twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from azure.servicebus.exceptions import MessageNotFoundError

from shared.operations import CANCEL, OPERATIONS
from shared.topology import AGING_SEQUENCE_PROPERTY

log = logging.getLogger("pipeline.aging")


class SerialCanceller:
    """A topic sender that cancels for the invocations of one instance, one at a time (the SDK's
    senders are not thread-safe: two slots opening its link at once break it)."""

    def __init__(self, sender: Any) -> None:
        self._sender = sender
        self._lock = threading.Lock()

    def cancel_scheduled_messages(self, number: int) -> None:
        with self._lock:
            self._sender.cancel_scheduled_messages(number)

    def close(self) -> None:
        with self._lock:
            self._sender.close()


def _sequence_number(properties: Mapping[Any, Any] | None) -> int | None:
    for key, value in (properties or {}).items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name == AGING_SEQUENCE_PROPERTY:
            text = value.decode() if isinstance(value, bytes) else str(value)
            return int(text) if text.strip().isdigit() else None
    return None


def claim(properties: Mapping[Any, Any] | None, topic_sender: Callable[[], Any]) -> bool:
    """True when this low-priority delivery should be worked on here; False when its promoted copy
    already appeared on the high subscription. Messages without a copy (other strategies) are always
    claimed, and open no sender (``topic_sender`` is a factory)."""
    number = _sequence_number(properties)
    if number is None:
        return True
    OPERATIONS.add(CANCEL)
    try:
        topic_sender().cancel_scheduled_messages(number)
    except MessageNotFoundError:
        log.info("aging: the promoted copy %d is already on the high subscription; completing the original", number)
        return False
    return True
