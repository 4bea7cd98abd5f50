"""The gateway: AMQP 1.0 on one side, the broker's API on the other.

One ``Gateway`` per client connection turns protocol events (from ``sbemulator.amqp``, which knows no
Service Bus) into broker calls and broker results into frames: the ``$cbs`` token exchange
(``cbs``), the ``<entity>/$management`` request/response operations (``management``, with the rule
descriptions of ``rules_codec``), and the translation between transfers and broker messages
(``deliveries``). No socket lives here; ``sbemulator.runtime`` feeds it bytes.

May import: ``sbemulator.amqp``, ``sbemulator.broker``, ``sbemulator.auth``, ``sbemulator.config``.
Must not import: ``sbemulator.runtime``, ``sbemulator.admin``.
"""

from .core import Gateway

__all__ = ["Gateway"]
