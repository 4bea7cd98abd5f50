"""The leveling worker: drain the ``leveling`` queue into Table Storage at a controlled rate.

Settlement is explicit (``autoCompleteMessages: false``): a poison message is dead-lettered at once
with a reason saying what is wrong (retrying cannot fix it, so it must not burn MaxDeliveryCount
deliveries and store writes), a failed write is abandoned so it is retried and, after MaxDeliveryCount
attempts, dead-lettered by the broker, and a stored message is completed.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol

from consumers.table_sink import ResultSink, to_entity
from shared.contract import ContractMessage, PoisonMessageError, parse_message, utc_now
from shared.rate_limit import TokenBucket, WritePacer
from shared.telemetry import LatencyRecorder, end_to_end_latency_ms
from shared.write_budget import SharedWritePacer

log = logging.getLogger("pipeline.leveler")

#: Service Bus limits the dead-letter headers; keep the description well inside it.
MAX_DESCRIPTION = 1024


class Outcome(enum.Enum):
    COMPLETED = "completed"
    DEAD_LETTERED = "dead-lettered"
    ABANDONED = "abandoned"


class MessageActions(Protocol):
    """The settlement calls of ``azurefunctions.extensions.bindings.servicebus.ServiceBusMessageActions``."""

    def complete(self, message: Any) -> None: ...

    def abandon(self, message: Any) -> None: ...

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None: ...


class ReceiverActions:
    """:class:`MessageActions` over an ``azure.servicebus`` receiver (local host, tests, scripts)."""

    def __init__(self, receiver: Any) -> None:
        self.receiver = receiver

    def complete(self, message: Any) -> None:
        self.receiver.complete_message(message)

    def abandon(self, message: Any) -> None:
        self.receiver.abandon_message(message)

    def deadletter(
        self,
        message: Any,
        deadletter_reason: str | None = None,
        deadletter_error_description: str | None = None,
    ) -> None:
        self.receiver.dead_letter_message(
            message, reason=deadletter_reason, error_description=deadletter_error_description
        )


def body_bytes(message: Any) -> bytes:
    """The body of an SDK ``ServiceBusReceivedMessage`` (data sections), a Functions message, or raw."""
    if isinstance(message, bytes | bytearray | memoryview):
        return bytes(message)
    if isinstance(message, str):
        return message.encode("utf-8")
    if hasattr(message, "get_body"):  # azure.functions.ServiceBusMessage
        return bytes(message.get_body())
    body = message.body
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, Iterable):
        return b"".join(bytes(part) for part in body)
    raise PoisonMessageError("InvalidBody", f"unsupported body type {type(body).__name__}")


class LevelingWorker:
    """Parse, wait for the rate limiter, upsert. Raises :class:`PoisonMessageError` for poison."""

    def __init__(
        self,
        sink: ResultSink,
        limiter: TokenBucket | WritePacer | SharedWritePacer | None = None,
        *,
        recorder: LatencyRecorder | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.sink = sink
        self.limiter = limiter
        self.recorder = recorder
        self._now = now

    def parse(self, body: bytes | str) -> ContractMessage:
        message = parse_message(body)
        if message.result is None:
            raise PoisonMessageError(
                "MissingField", "field 'result' is null: the message skipped the consumers"
            )
        return message

    def handle(self, body: bytes | str) -> ContractMessage:
        message = self.parse(body)
        to_entity(message)  # validates the keys before spending a token
        if isinstance(self.limiter, WritePacer | SharedWritePacer):
            with self.limiter.slot():
                self.sink.upsert(message)
        else:
            if self.limiter is not None:
                self.limiter.acquire()
            self.sink.upsert(message)
        if self.recorder is not None:
            latency = end_to_end_latency_ms(message.created_at, None, self._now())
            self.recorder.record(message.priority, latency, stage="stored", message_id=message.message_id)
        return message


def settle(worker: LevelingWorker, message: Any, actions: MessageActions) -> Outcome:
    """Process one received message and settle it; re-raises transient errors after abandoning."""
    try:
        body = body_bytes(message)
        worker.handle(body)
    except PoisonMessageError as exc:
        log.error("dead-lettering poison message %s: %s", getattr(message, "message_id", "?"), exc)
        actions.deadletter(
            message,
            deadletter_reason=exc.reason,
            deadletter_error_description=exc.description[:MAX_DESCRIPTION],
        )
        return Outcome.DEAD_LETTERED
    except Exception:
        log.exception(
            "write failed for message %s; abandoning for a retry", getattr(message, "message_id", "?")
        )
        actions.abandon(message)
        raise
    actions.complete(message)
    return Outcome.COMPLETED
