"""AMQP error conditions (spec 2.8.15 - 2.8.18) and the two ways a peer's mistake ends something.

A :class:`ProtocolError` closes the connection, a :class:`SessionError` ends one session; either carries
the condition the specification names for the mistake. Anything else raised while handling input is a
bug of the emulator's, answered with ``amqp:internal-error`` (and logged), never blamed on the peer.
"""

from __future__ import annotations

from typing import Any

DECODE_ERROR = "amqp:decode-error"
FRAMING_ERROR = "amqp:connection:framing-error"
CONNECTION_FORCED = "amqp:connection:forced"
FRAME_SIZE_TOO_SMALL = "amqp:frame-size-too-small"
INTERNAL_ERROR = "amqp:internal-error"
NOT_ALLOWED = "amqp:not-allowed"
ILLEGAL_STATE = "amqp:illegal-state"
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
UNATTACHED_HANDLE = "amqp:session:unattached-handle"
HANDLE_IN_USE = "amqp:session:handle-in-use"
WINDOW_VIOLATION = "amqp:session:window-violation"
ERRANT_LINK = "amqp:session:errant-link"
LINK_DETACH_FORCED = "amqp:link:detach-forced"
TRANSFER_LIMIT_EXCEEDED = "amqp:link:transfer-limit-exceeded"
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"


class ProtocolError(Exception):
    """A peer broke the protocol; the connection is closed with ``condition``."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


class SessionError(Exception):
    """A peer broke a session rule; only that session is ended with ``condition``."""

    def __init__(self, session: Any, condition: str, description: str) -> None:
        super().__init__(description)
        self.session = session
        self.condition = condition
        self.description = description
