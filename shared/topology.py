"""Entity and setting names the code binds to.

infra/servicebus.json is the source of truth for the topology; these constants exist because
Functions decorators need literal names at import time. A unit test checks that both agree.
"""

TOPIC = "messages"
SUBSCRIPTION_HIGH = "highPriority"
SUBSCRIPTION_LOW = "lowPriority"
SUBSCRIPTION_UNROUTED = "unroutedPriority"
QUEUE_LEVELING = "leveling"
QUEUE_LEADER_ELECTION = "leader-election"
QUEUE_ORDERED_WRITES = "ordered-writes"
#: The baseline of the ``fifo`` strategy: both priorities in one queue, processed in arrival order.
QUEUE_PRIORITY_FIFO = "priority-fifo"

#: The app setting (or setting prefix, for identity-based connections) every Service Bus binding uses.
SERVICE_BUS_CONNECTION = "ServiceBusConnection"
#: Same idea for Table Storage: a connection string, or ``TableStorageConnection__tableServiceUri``.
TABLE_CONNECTION = "TableStorageConnection"

#: The application property the subscription filters route on.
PRIORITY_PROPERTY = "Priority"
HIGH = "High"
LOW = "Low"
PRIORITIES = (HIGH, LOW)

#: Subscription that each routed priority is read from.
SUBSCRIPTION_FOR_PRIORITY = {HIGH: SUBSCRIPTION_HIGH, LOW: SUBSCRIPTION_LOW}

#: ``aging``: the sequence number of the promoted copy the sender scheduled for a low-priority message
#: (a string: the SDK sends Python ints as 32-bit, and Service Bus sequence numbers are 64-bit).
AGING_SEQUENCE_PROPERTY = "AgingSequenceNumber"
#: ``aging``: set on the promoted copy, whose ``Priority`` is High: the priority it had when sent.
AGED_FROM_PROPERTY = "AgedFrom"
