"""The message broker (no I/O, no asyncio): entities, messages, locks, sessions, timers, rules.

``core.Broker`` is the facade over the components (``topology``, ``flow``, ``sessions``,
``settlement``, ``timers``, ``wakeups``, ``inspection``; see :mod:`sbemulator.broker.core`),
``unit_of_work`` what a change the store must keep is taken back with when it cannot, and
``api`` is what the rest of the emulator may call: each client its own interface (``GatewayBroker``,
``AdminBroker``, ``RuntimeBroker``), ``BrokerAPI`` all of them. The rule language is :mod:`sbemulator.filters`.

May import: ``sbemulator.amqp`` (message values are AMQP's), ``sbemulator.filters``, ``sbemulator.scheduling``
(a purge, a deleted entity's cleanup and a timer run are its jobs), ``sbemulator.config``,
``sbemulator.descriptions``, and ``sbemulator.store.base`` for the Store Protocol's type. Must not
import the gateway, the runtime or the admin plane (tests/unit/test_import_structure.py).
"""

from ..model import BrokerMessage, Delivery, IncomingMessage, MessageState, Outcome, ReceiveMode
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
