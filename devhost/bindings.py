"""Arguments and output bindings: what the worker would build for each invocation.

- the Functions ``ServiceBusMessage`` (body + the metadata the host passes) from an SDK message;
- ``func.Out`` values, sent after the function returns successfully (as the host flushes outputs);
- Service Bus queue/topic outputs through one ``ServiceBusSender`` per entity per instance, and
  Table outputs through azure-data-tables.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar, cast

import azure.functions as func
from azure.functions.servicebus import ServiceBusMessage as FunctionsServiceBusMessage
from azure.servicebus import ServiceBusMessage

T = TypeVar("T")


class Out(func.Out[T], Generic[T]):
    """The host's side of ``func.Out``: remembers what the function set."""

    def __init__(self) -> None:
        self._value: T | None = None
        self.was_set = False

    def set(self, val: T) -> None:
        self._value = val
        self.was_set = True

    def get(self) -> T:
        """What the function set (None until it sets something, as the Functions worker's ``Out``)."""
        return cast(T, self._value)


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else value


def _body(message: Any) -> bytes:
    body = message.body
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, Iterable):
        return b"".join(bytes(part) for part in body)
    return json.dumps(body).encode("utf-8")  # an AMQP value body


def application_properties(message: Any) -> dict[str, Any]:
    """The SDK returns keys (and string values) as bytes; the Functions binding hands out strings."""
    return {_text(key): _text(value) for key, value in (message.application_properties or {}).items()}


def _datum(value: Any) -> Any:
    from azure.functions.meta import Datum

    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return Datum(json.dumps(value, default=str), "json")
    return Datum(value, "string" if isinstance(value, str) else "int" if isinstance(value, int) else "double")


def delivery_count(message: Any) -> int | None:
    """The deliveries so far, counting this one: 1 on the first receive.

    Service Bus puts the number of *prior* deliveries in the AMQP header (the AMQP meaning of
    delivery-count); the .NET client the Functions host is built on adds one, and the Python SDK
    hands out the raw header value, so a function would otherwise see 0 where Azure shows 1.
    """
    count = message.delivery_count
    return None if count is None else count + 1


def functions_message(message: Any) -> FunctionsServiceBusMessage:
    """``azure.functions.ServiceBusMessage`` with the metadata the Functions host passes."""
    props = application_properties(message)
    enqueued = message.enqueued_time_utc
    deliveries = delivery_count(message)
    metadata = {
        "MessageId": message.message_id,
        "DeliveryCount": deliveries,
        "EnqueuedTimeUtc": enqueued.isoformat() if enqueued else None,
        "SequenceNumber": message.sequence_number,
        "ContentType": message.content_type,
        "CorrelationId": message.correlation_id,
        "Label": message.subject,
        "SessionId": message.session_id,
        "ApplicationProperties": props,
        "UserProperties": props,
    }
    return FunctionsServiceBusMessage(
        body=_body(message),
        trigger_metadata={key: _datum(value) for key, value in metadata.items() if value is not None},
        application_properties=props,
        user_properties=props,
        content_type=message.content_type,
        correlation_id=message.correlation_id,
        dead_letter_error_description=message.dead_letter_error_description,
        dead_letter_reason=message.dead_letter_reason,
        dead_letter_source=message.dead_letter_source,
        delivery_count=deliveries,
        enqueued_sequence_number=message.enqueued_sequence_number,
        enqueued_time_utc=enqueued,
        expires_at_utc=message.expires_at_utc,
        label=message.subject,
        subject=message.subject,
        locked_until=getattr(message, "locked_until_utc", None),
        lock_token=str(message.lock_token) if message.lock_token else None,
        message_id=message.message_id,
        partition_key=message.partition_key,
        reply_to=message.reply_to,
        reply_to_session_id=message.reply_to_session_id,
        scheduled_enqueue_time_utc=message.scheduled_enqueue_time_utc,
        sequence_number=message.sequence_number,
        session_id=message.session_id,
        time_to_live=message.time_to_live,
        to=message.to,
    )


def to_service_bus_messages(value: Any) -> list[ServiceBusMessage]:
    """What the Service Bus output binding accepts: a string, bytes, a JSON-able object, or a list of those."""
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, ServiceBusMessage):
            messages.append(item)
        elif isinstance(item, str | bytes | bytearray):
            messages.append(ServiceBusMessage(bytes(item) if isinstance(item, bytearray) else item))
        else:
            messages.append(ServiceBusMessage(json.dumps(item), content_type="application/json"))
    return messages


class ServiceBusOutputs:
    """One sender per entity for one instance; slots share it under a lock (senders are not thread-safe).

    ``client_factory(connection)`` makes a client for the binding's connection setting name.
    """

    def __init__(self, client_factory: Callable[[str], Any], default_connection: str = "ServiceBusConnection") -> None:
        self._client_factory = client_factory
        self._default_connection = default_connection
        self._clients: dict[str, Any] = {}
        self._senders: dict[tuple[str, str], tuple[Any, threading.Lock]] = {}
        self._lock = threading.Lock()

    def _sender(self, binding: dict[str, Any]) -> tuple[Any, threading.Lock]:
        connection = binding.get("connection") or self._default_connection
        key = (connection, binding.get("queueName") or f"topic:{binding.get('topicName')}")
        with self._lock:
            if key not in self._senders:
                if connection not in self._clients:
                    self._clients[connection] = self._client_factory(connection)
                client = self._clients[connection]
                sender = (client.get_queue_sender(binding["queueName"]) if binding.get("queueName")
                          else client.get_topic_sender(binding["topicName"]))
                self._senders[key] = (sender, threading.Lock())
            return self._senders[key]

    def send(self, binding: dict[str, Any], value: Any) -> None:
        sender, lock = self._sender(binding)
        with lock:
            sender.send_messages(to_service_bus_messages(value))

    def close(self) -> None:
        with self._lock:
            for sender, lock in self._senders.values():
                with lock:
                    try:
                        sender.close()
                    except Exception:
                        pass
            self._senders.clear()
            for client in self._clients.values():
                try:
                    client.close()
                except Exception:
                    pass
            self._clients.clear()


class TableOutputs:
    """The Table output binding: entities (dicts with PartitionKey/RowKey) created in ``tableName``.

    ``service_factory(connection)`` makes a TableServiceClient for the binding's connection setting.
    """

    def __init__(self, service_factory: Callable[[str], Any], default_connection: str = "AzureWebJobsStorage") -> None:
        self._service_factory = service_factory
        self._default_connection = default_connection
        self._services: dict[str, Any] = {}
        self._lock = threading.Lock()

    def send(self, binding: dict[str, Any], value: Any) -> None:
        connection = binding.get("connection") or self._default_connection
        with self._lock:
            if connection not in self._services:
                self._services[connection] = self._service_factory(connection)
            service = self._services[connection]
        table = service.create_table_if_not_exists(binding["tableName"])
        entities = value if isinstance(value, list) else [value]
        for entity in entities:
            if isinstance(entity, str | bytes):
                entity = json.loads(entity)
            for key, field in (("partitionKey", "PartitionKey"), ("rowKey", "RowKey")):
                if binding.get(key) and field not in entity:
                    entity = {**entity, field: binding[key]}
            table.create_entity(entity)

    def close(self) -> None:
        with self._lock:
            for service in self._services.values():
                service.close()
            self._services.clear()


def timer_request(past_due: bool, scheduled: datetime, next_run: datetime | None) -> func.TimerRequest:
    from azure.functions.timer import TimerRequest

    def iso(moment: datetime | None) -> str | None:
        return moment.astimezone(UTC).isoformat() if moment else None

    return TimerRequest(
        past_due=past_due,
        schedule_status={"Last": iso(scheduled), "Next": iso(next_run), "LastUpdated": iso(datetime.now(UTC))},
        schedule={"AdjustForDST": False},
    )
