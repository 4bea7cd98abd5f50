"""The event source length of a Service Bus trigger, read the way the platform's scaler reads it.

The Service Bus extension's target scaler reads the entity's runtime information (its active
message count) through the management surface. Here that is ``ServiceBusAdministrationClient``:
``get_queue_runtime_properties`` / ``get_subscription_runtime_properties``, which work against Azure
and against sbemulator's HTTPS management endpoint. When no management endpoint is reachable (an
external emulator without one), the count falls back to peeking over AMQP, bounded by what the
decision can use (``limit``: the app's limit times its target; more changes nothing).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from devhost.discovery import FunctionSpec

log = logging.getLogger("devhost.scale")
PEEK_PAGE = 250


class TriggerBacklog:
    """``active(spec, limit)``: active messages of the trigger's queue or subscription."""

    def __init__(self, admin_factory: Callable[[], Any], client_factory: Callable[[], Any]) -> None:
        self._admin_factory = admin_factory
        self._client_factory = client_factory
        self._admin: Any = None
        self._admin_tried = False
        self._client: Any = None
        self._lock = threading.Lock()
        self.source = "runtime properties"

    def _admin_client(self) -> Any:
        if not self._admin_tried:
            self._admin_tried = True
            try:
                self._admin = self._admin_factory()
            except Exception as exc:
                log.warning("no management client (%s); counting backlogs by peeking", exc)
            if self._admin is None:
                self.source = "peek"
        return self._admin

    def active(self, spec: FunctionSpec, limit: int) -> int:
        with self._lock:
            admin = self._admin_client()
            if admin is not None:
                try:
                    return _runtime_active(admin, spec.trigger)
                except Exception as exc:
                    log.warning("runtime properties of %s failed (%s); counting by peeking from now on",
                                spec.entity, exc)
                    self._admin = None
                    self.source = "peek"
            return self._peek(spec.trigger, limit)

    def _peek(self, trigger: dict[str, Any], limit: int) -> int:
        if self._client is None:
            self._client = self._client_factory()
        if trigger.get("queueName"):
            receiver = self._client.get_queue_receiver(trigger["queueName"])
        else:
            receiver = self._client.get_subscription_receiver(trigger["topicName"], trigger["subscriptionName"])
        count, sequence = 0, 1
        with receiver:
            while count < limit:
                page = receiver.peek_messages(max_message_count=PEEK_PAGE, sequence_number=sequence)
                if not page:
                    break
                count += len(page)
                sequence = page[-1].sequence_number + 1
        return count

    def close(self) -> None:
        for closable in (self._admin, self._client):
            if closable is not None:
                try:
                    closable.close()
                except Exception:
                    pass
        self._admin = self._client = None


def _runtime_active(admin: Any, trigger: dict[str, Any]) -> int:
    if trigger.get("queueName"):
        props = admin.get_queue_runtime_properties(trigger["queueName"])
    else:
        props = admin.get_subscription_runtime_properties(trigger["topicName"], trigger["subscriptionName"])
    return int(props.active_message_count)
