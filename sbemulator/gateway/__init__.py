"""The gateway: AMQP 1.0 on one side, the broker's API on the other.

One ``Gateway`` (``core``) per client connection turns protocol events (from ``sbemulator.amqp``, which
knows no Service Bus) into broker calls and broker results into frames. Each kind of link is a room
behind the typed ``GatewayContext`` seam (``context``): the ``$cbs`` and ``<entity>/$management``
request/reply pairs (``request_links``, with ``cbs``, ``management`` and the rule descriptions of
``rules_codec``), entity senders (``sender_link``), entity receivers (``receiver_link``) and the
transaction coordinator (``coordinator_link``); ``attach`` routes a new link to its room by a table,
``deliveries`` translates between transfers and broker messages; ``backlog`` handles input that stands
for much work (a range disposition, a large batch) as a job of the namespace's scheduler. No socket lives here;
``sbemulator.runtime`` feeds it bytes.

May import: ``sbemulator.amqp``, ``sbemulator.broker``, ``sbemulator.scheduling``, ``sbemulator.auth``,
``sbemulator.config``.
Must not import: ``sbemulator.runtime``, ``sbemulator.admin``.
"""

from .core import Gateway

__all__ = ["Gateway"]
