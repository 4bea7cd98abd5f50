"""AMQP 1.0 part 4 (Transactions): the coordinator terminus and the transaction types on the wire.

Importing this module registers the types with the decoder (``performatives.from_described``), so a
coordinator link's target, a declare or discharge body and a ``transactional-state`` on a transfer or
disposition decode into these classes instead of bare described values.
"""

from __future__ import annotations

from typing import Any

from .performatives import Composite, composite


# 4.5.1 coordinator: the target of a link that declares and discharges transactions.
@composite(0x30, "amqp:coordinator:list")
class Coordinator(Composite):
    capabilities: Any = None


# 4.5.2 declare (the body of a message to the coordinator); global-id is for distributed transactions.
@composite(0x31, "amqp:declare:list")
class Declare(Composite):
    global_id: Any = None


# 4.5.3 discharge: fail=true rolls back, false (the default) commits.
@composite(0x32, "amqp:discharge:list")
class Discharge(Composite):
    txn_id: Any = None
    fail: bool = False


# 4.5.4 declared: the coordinator's outcome for a declare, carrying the new transaction's id.
@composite(0x33, "amqp:declared:list")
class Declared(Composite):
    txn_id: Any = None


# 4.5.5 transactional-state: a transfer or disposition that is part of a transaction, with the
# outcome that applies when it commits.
@composite(0x34, "amqp:transactional-state:list")
class TransactionalState(Composite):
    txn_id: Any = None
    outcome: Any = None


# 4.5.7 txn-capability, offered by a coordinator that supports local transactions.
LOCAL_TRANSACTIONS = "amqp:local-transactions"

__all__ = ["LOCAL_TRANSACTIONS", "Coordinator", "Declare", "Declared", "Discharge", "TransactionalState"]
