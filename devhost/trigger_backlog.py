"""The event source length of a Service Bus trigger, read the way the platform's scaler reads it.

The Service Bus extension's target scaler reads the entity's runtime information (its active
message count) through the management surface. Here that is ``ServiceBusAdministrationClient``:
``get_queue_runtime_properties`` / ``get_subscription_runtime_properties``, which work against Azure
and against sbemulator's HTTPS management endpoint. When no management endpoint is reachable (an
external emulator without one), the count falls back to peeking over AMQP, bounded by what the
decision can use (``limit``: the app's limit times its target; more changes nothing). A session
trigger cannot be peeked without locking a session, so without the management surface its count is
``limit`` (the app runs at its limit).

The module-level functions are the one implementation of both counts; the demo's dashboard
(:mod:`devhost.demo.backlog`) uses them too, for active and dead-letter counts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypedDict

from azure.servicebus import ServiceBusSubQueue

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
        self._sessions_warned = False

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
        if trigger.get("isSessionsEnabled"):
            # Service Bus lets no receiver peek a session entity without locking a session ("It is not
            # possible for an entity that requires sessions to create a non-sessionful message
            # receiver"), and locking one would take it from the app. Without runtime properties the
            # app is sized at its limit, as --fixed would run it.
            if not self._sessions_warned:
                self._sessions_warned = True
                log.warning("no management endpoint: session triggers cannot be counted by peeking; "
                            "their apps run at their instance limit")
            return limit
        if self._client is None:
            self._client = self._client_factory()
        with open_receiver(self._client, **_address(trigger)) as receiver:
            count, _ = count_by_peeking(receiver, limit)
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
    return int(runtime_properties(admin, **_address(trigger)).active_message_count)


class Address(TypedDict):
    """The entity a trigger binding names, as the keyword arguments of the functions below."""

    queue: str | None
    topic: str | None
    subscription: str | None


def _address(trigger: dict[str, Any]) -> Address:
    """A trigger binding's entity as the keyword arguments of the functions below."""
    return {"queue": trigger.get("queueName") or None, "topic": trigger.get("topicName"),
            "subscription": trigger.get("subscriptionName")}


def runtime_properties(admin: Any, queue: str | None = None, topic: str | None = None,
                       subscription: str | None = None) -> Any:
    """The queue's (``queue``) or else the subscription's runtime properties from the management API."""
    if queue:
        return admin.get_queue_runtime_properties(queue)
    return admin.get_subscription_runtime_properties(topic, subscription)


def open_receiver(client: Any, queue: str | None = None, topic: str | None = None,
                  subscription: str | None = None, dead_letter: bool = False) -> Any:
    """A receiver on the queue or subscription (or its dead-letter queue), used only to peek."""
    sub_queue = ServiceBusSubQueue.DEAD_LETTER if dead_letter else None
    if queue:
        return client.get_queue_receiver(queue, sub_queue=sub_queue)
    return client.get_subscription_receiver(topic, subscription, sub_queue=sub_queue)


def count_by_peeking(receiver: Any, limit: int) -> tuple[int, bool]:
    """(messages counted, whether ``limit`` was reached first): peeks page by page from the start.

    The sequence number is given on every page: 0 or none would make the SDK continue after its
    previous peek, so a second count on the same receiver would miss what the first one saw.
    """
    count, sequence = 0, 1
    while count < limit:
        page = receiver.peek_messages(max_message_count=PEEK_PAGE, sequence_number=sequence)
        if not page:
            return count, False
        count += len(page)
        sequence = page[-1].sequence_number + 1
    return count, True
