"""The message broker (no I/O, no asyncio): see :mod:`sbemulator.broker.core` for the API."""

from .core import Broker, RuleError
from .entity import EntityRef
from .errors import (
    ArgumentError,
    ArgumentOutOfRangeError,
    BrokerError,
    EntityAlreadyExistsError,
    EntityDisabledError,
    EntityNotFoundError,
    InvalidOperationError,
    MessageLockLostError,
    MessageNotFoundError,
    MessageSizeExceededError,
    SessionCannotBeLockedError,
    SessionLockLostError,
    SessionRequiredError,
)
from .model import BrokerMessage, Delivery, IncomingMessage, MessageState, Outcome, ReceiveMode
from .receiver import Receiver

__all__ = [
    "ArgumentError",
    "ArgumentOutOfRangeError",
    "Broker",
    "BrokerError",
    "BrokerMessage",
    "Delivery",
    "EntityAlreadyExistsError",
    "EntityDisabledError",
    "EntityNotFoundError",
    "EntityRef",
    "IncomingMessage",
    "InvalidOperationError",
    "MessageLockLostError",
    "MessageNotFoundError",
    "MessageSizeExceededError",
    "MessageState",
    "Outcome",
    "ReceiveMode",
    "Receiver",
    "RuleError",
    "SessionCannotBeLockedError",
    "SessionLockLostError",
    "SessionRequiredError",
]
