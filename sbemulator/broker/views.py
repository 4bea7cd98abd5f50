"""Read-only snapshots of entities for the management plane (Atom/ARM APIs, web console).

A view is taken at one moment and never changes afterwards; it holds no reference into the broker's
live state, so a renderer can keep it as long as it likes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sbemulator.config import RuleConfig

# What to append (after a "/") to an entity path to address one of its sub-queues (queues and
# subscriptions have both; topics have none). Keyed by the names the SDKs give them (ServiceBusSubQueue).
DEAD_LETTER_QUEUE = "$DeadLetterQueue"
TRANSFER_DEAD_LETTER_QUEUE = "$Transfer/$DeadLetterQueue"
SUB_QUEUES = {"deadletter": DEAD_LETTER_QUEUE, "transferdeadletter": TRANSFER_DEAD_LETTER_QUEUE}


@dataclass(frozen=True, slots=True)
class MessageCounts:
    """Messages by state, as Service Bus's ``CountDetails`` reports them."""

    active: int = 0
    deferred: int = 0
    scheduled: int = 0
    dead_letter: int = 0
    transfer_dead_letter: int = 0

    @property
    def total(self) -> int:
        """Every message of the entity, its dead-letter sub-queues included (``MessageCount``)."""
        return self.active + self.deferred + self.scheduled + self.dead_letter + self.transfer_dead_letter

    def as_dict(self) -> dict[str, int]:
        return {
            "active": self.active,
            "deferred": self.deferred,
            "scheduled": self.scheduled,
            "dead_letter": self.dead_letter,
            "transfer_dead_letter": self.transfer_dead_letter,
        }


@dataclass(frozen=True, slots=True)
class EntityView:
    """A queue, topic or subscription as the management plane shows it.

    ``path`` is what every broker call takes (``orders``, ``events/Subscriptions/all``); append
    ``/$DeadLetterQueue`` or ``/$Transfer/$DeadLetterQueue`` to address a sub-queue (peek, purge).
    ``name`` is the queue or topic path, or the subscription's own name. ``config`` is the
    QueueConfig / TopicConfig / SubscriptionConfig in force (a subscription's with its current rules).
    """

    kind: str  # "queue", "topic" or "subscription"
    path: str
    name: str
    topic: str | None  # subscriptions: the topic's path
    config: Any
    counts: MessageCounts
    size_in_bytes: int  # every message held, dead-letter sub-queues included
    last_enqueued_ms: int  # 0 when it holds no message
    subscription_count: int  # topics
    rules: tuple[RuleConfig, ...]  # subscriptions
    requires_session: bool
    created_at_runtime: bool  # not declared by the config file


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session of a session-enabled queue or subscription, as a console shows it."""

    id: str
    message_count: int  # its messages in the entity, any state
    locked_until_ms: int | None  # None unless a receiver holds the session lock at this moment
    state: bytes | None


@dataclass(frozen=True, slots=True)
class Resubmission:
    """What ``resubmit_dead_lettered`` did: the new sequence numbers of the messages sent back, and
    the dead-lettered messages left in place because a receiver holds them locked."""

    sequence_numbers: tuple[int, ...]
    skipped_locked: tuple[int, ...]
