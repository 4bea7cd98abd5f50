"""Broker errors carry the AMQP error condition the server puts on the wire.

The condition strings are the ones the azure-servicebus SDK maps to its exception classes
(``_common/constants.py`` ERROR_CODE_* and ``_pyamqp/error.py`` ErrorCondition), so a broker error
surfaces in client code as the matching SDK exception.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base class: ``condition`` is the AMQP error symbol, ``description`` the human text."""

    condition = "amqp:internal-error"
    status_code = 500  # for $management replies

    def __init__(self, description: str = "", condition: str | None = None) -> None:
        super().__init__(description)
        self.description = description
        if condition is not None:
            self.condition = condition


class EntityNotFoundError(BrokerError):
    condition = "amqp:not-found"
    status_code = 404


class MessageLockLostError(BrokerError):
    condition = "com.microsoft:message-lock-lost"
    status_code = 410


class SessionLockLostError(BrokerError):
    condition = "com.microsoft:session-lock-lost"
    status_code = 410


class SessionCannotBeLockedError(BrokerError):
    condition = "com.microsoft:session-cannot-be-locked"
    status_code = 409


class MessageSizeExceededError(BrokerError):
    condition = "amqp:link:message-size-exceeded"
    status_code = 413


class EntityDisabledError(BrokerError):
    """A send to, or a receive from, a suspended entity (the SDK raises MessagingEntityDisabledError)."""

    condition = "com.microsoft:entity-disabled"
    status_code = 400


class QuotaExceededError(BrokerError):
    """A quota of the entity or namespace is used up ("Service Bus messaging exceptions",
    QuotaExceededException: the SDKs raise ServiceBusQuotaExceededError / QuotaExceeded)."""

    condition = "amqp:resource-limit-exceeded"
    status_code = 403


class ServerBusyError(BrokerError):
    """The service cannot take the request now ("Service Bus messaging exceptions", ServerBusyException:
    the SDKs raise ServiceBusServerBusyError and retry after a pause)."""

    condition = "com.microsoft:server-busy"
    status_code = 503


class MessageNotFoundError(BrokerError):
    condition = "com.microsoft:message-not-found"
    status_code = 404


class InvalidOperationError(BrokerError):
    """.NET's InvalidOperationException (``amqp:not-allowed``; the Python SDK raises ServiceBusError)."""

    condition = "amqp:not-allowed"
    status_code = 400


class SessionRequiredError(InvalidOperationError):
    """A message without SessionId sent to a session-enabled entity (Service Bus answers not-allowed)."""


class ArgumentError(BrokerError):
    condition = "com.microsoft:argument-error"
    status_code = 400


class ArgumentOutOfRangeError(BrokerError):
    """.NET's ArgumentOutOfRangeException, e.g. an id longer than its quota."""

    condition = "com.microsoft:argument-out-of-range"
    status_code = 400


class EntityAlreadyExistsError(BrokerError):
    condition = "com.microsoft:entity-already-exists"
    status_code = 409


class RuleError(BrokerError):
    """A subscription rule that does not compile."""

    condition = "com.microsoft:argument-error"
    status_code = 400
