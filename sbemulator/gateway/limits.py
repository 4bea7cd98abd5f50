"""The AMQP-level limits a connection is held to, with where Service Bus documents each one.

Service Bus is a shared service: it bounds what one client may hold (connections, links, the size of a
message, the time it may stay unauthenticated) and refuses the excess with a named error instead of
letting one client exhaust memory. The emulator enforces the same bounds at the same points, so a
client that works against the emulator does not first meet them in production, and one broken or
hostile client cannot take the emulator's memory from the others. docs/emulator.md ("Limits and
faults") lists each limit with its value and what the client sees.
"""

from __future__ import annotations

from dataclasses import dataclass

RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"  # the SDKs raise ServiceBusQuotaExceededError
UNAUTHORIZED_ACCESS = "amqp:unauthorized-access"
# The max-message-size of a transaction coordinator's link (AMQP 1.0 4.2). A declare or a discharge is a
# few dozen bytes, and the link is attached without a token (the controller may declare before it puts
# one), so it must not be a way to make the emulator buffer a large delivery before authentication.
COORDINATOR_MAX_MESSAGE_BYTES = 4 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-namespace and per-connection bounds (each configurable for tests and special set-ups)."""

    # "Number of concurrent connections on a namespace ... AMQP: 5,000. Subsequent requests for
    # additional connections are rejected" (Service Bus quotas page).
    max_connections: int = 5000
    # Links on one connection. Not on the quotas page; the service refuses links beyond about 5,000 on
    # one connection with QuotaExceeded (azure-sdk-for-net issue 25954, the answer from Azure support).
    max_links_per_connection: int = 5000
    # "Number of concurrent receive requests on a queue, topic, or subscription entity: 5,000. Subsequent
    # receive requests are rejected ... This quota applies to the combined number of concurrent receive
    # operations across all subscriptions on a topic" (Service Bus quotas page). A receiver link is one
    # receive request; the attach beyond it is refused with QuotaExceeded.
    max_receivers_per_entity: int = 5000
    # Sessions on one connection: the channel-max the emulator announces in its open (4095) plus one.
    # Service Bus itself "currently uses exactly one session for each connection" (AMQP protocol guide).
    channel_max: int = 4095
    # How long a connection may stay without a valid token (or SASL PLAIN credentials). Service Bus
    # does not document its value; a connection that never authenticates is closed with
    # amqp:unauthorized-access instead of holding its resources forever.
    auth_timeout_s: float = 60.0
    # The largest put-token request accepted on $cbs (the max-message-size of the $cbs request link).
    # A SAS token is a few hundred bytes and an Entra ID JWT a few kilobytes.
    max_cbs_message_bytes: int = 64 * 1024
    # Backpressure: receivers stop taking deliveries from the broker while the connection's output
    # (the transport's write buffer, or what is waiting to be written) is above the high-water mark, and
    # start again once the transport has drained below the low-water mark.
    write_high_water: int = 1024 * 1024
    write_low_water: int = 256 * 1024


DEFAULT_LIMITS = Limits()

__all__ = [
    "COORDINATOR_MAX_MESSAGE_BYTES", "DEFAULT_LIMITS", "RESOURCE_LIMIT_EXCEEDED", "UNAUTHORIZED_ACCESS", "Limits",
]
