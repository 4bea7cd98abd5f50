"""Settling a received message: dead-letter poison at once, abandon on failure, complete on success.

The leveler and the ordered writer settle explicitly (``autoCompleteMessages: false``) by the same
rule, so the rule lives here once: a message that can never be processed (``PoisonMessageError``)
goes to the dead-letter queue on its first delivery with a reason saying what is wrong, since
retrying cannot fix it and must not burn MaxDeliveryCount deliveries; any other failure abandons it,
so it is retried and, after MaxDeliveryCount deliveries, dead-lettered by the broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from shared.contract import PoisonMessageError

Result = TypeVar("Result")

#: Service Bus limits the dead-letter headers; keep the description well inside it.
MAX_DESCRIPTION = 1024


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


def settle_message(
    message: Any, actions: MessageActions, process: Callable[[bytes], Result], *, log: logging.Logger,
    kind: str = "message",
) -> Result | None:
    """Run ``process`` on the message's body and settle the message by the outcome.

    Returns what ``process`` returned (the message was completed), or None when the message was
    dead-lettered as poison. Any other exception abandons the message and is raised again, so the
    host sees the invocation fail. ``kind`` names the message in the log lines.
    """
    message_id = getattr(message, "message_id", "?")
    try:
        result = process(body_bytes(message))
    except PoisonMessageError as exc:
        log.error("dead-lettering poison %s %s: %s", kind, message_id, exc)
        actions.deadletter(
            message,
            deadletter_reason=exc.reason,
            deadletter_error_description=exc.description[:MAX_DESCRIPTION],
        )
        return None
    except Exception:
        log.exception("%s %s failed; abandoning it for a retry", kind, message_id)
        actions.abandon(message)
        raise
    actions.complete(message)
    return result
