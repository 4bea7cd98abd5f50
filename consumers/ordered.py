"""Message groups (ActiveMQ ``JMSXGroupID``) as Service Bus sessions on ``ordered-writes``.

Each tenant's writes carry ``session_id = tenant id``. The broker hands a session to one receiver at
a time and delivers its messages in order, so different tenants are processed in parallel while one
tenant's writes are applied strictly in sequence. A redelivered or stale write (sequence <= last
applied) is completed without applying it again.

Two homes for the last applied sequence: the session state (``process_session``, the SDK worker of the
command-line demo: the state moves with the session lock from one receiver to the next), and a
per-tenant Table Storage row (``settle_ordered`` with ``consumers.ordered_table``, the Function: the
Python Functions bindings can write a session's state but not read it).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusMessage

from consumers.settlement import settle_message
from shared.contract import ContractMessage, PoisonMessageError, format_timestamp, parse_message, utc_now

log = logging.getLogger("pipeline.ordered")


@dataclass(frozen=True)
class OrderedWrite:
    tenant_id: str
    sequence: int
    message_id: str
    payload: dict[str, Any] = field(default_factory=dict)


def parse_ordered(body: bytes | str) -> OrderedWrite:
    message = parse_message(body)
    sequence = message.payload.get("sequence")
    if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1:
        raise PoisonMessageError(
            "InvalidField", f"payload 'sequence' must be a positive integer, got {sequence!r}"
        )
    return OrderedWrite(message.tenant_id, sequence, message.message_id, message.payload)


def build_ordered_messages(
    tenant_id: str, values: Sequence[Any], *, start_sequence: int = 1, priority: str = "Low"
) -> list[ServiceBusMessage]:
    """One message per value, ``session_id`` = tenant id, ``sequence`` counting up from ``start_sequence``."""
    messages = []
    for offset, value in enumerate(values):
        sequence = start_sequence + offset
        body = ContractMessage(
            message_id=f"{tenant_id}-{sequence}", tenant_id=tenant_id, priority=priority,
            created_at=utc_now(), payload={"sequence": sequence, "value": value},
        )
        messages.append(ServiceBusMessage(body.to_json(), message_id=body.message_id, session_id=tenant_id,
                                          content_type="application/json"))
    return messages


class SequenceGuard:
    """Per-tenant 'sequence must increase' check; ``last`` can be seeded from the session state."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def should_apply(self, write: OrderedWrite) -> bool:
        last = self.last.get(write.tenant_id, 0)
        if write.sequence <= last:
            log.info("skipping stale/duplicate write %s (sequence %d <= %d)",
                     write.message_id, write.sequence, last)
            return False
        if write.sequence > last + 1:
            log.warning("tenant %s: sequence gap %d -> %d", write.tenant_id, last, write.sequence)
        return True

    def applied(self, write: OrderedWrite) -> None:
        self.last[write.tenant_id] = write.sequence


class InMemoryLedger:
    """Records applied writes per tenant, in the order applied (what the tests check)."""

    def __init__(self) -> None:
        self.applied: dict[str, list[int]] = defaultdict(list)
        self._lock = threading.Lock()

    def apply(self, write: OrderedWrite) -> None:
        with self._lock:
            self.applied[write.tenant_id].append(write.sequence)


def _state_last(state: bytes | None) -> int:
    if not state:
        return 0
    try:
        return int(json.loads(state)["last_sequence"])
    except (ValueError, KeyError, TypeError):
        return 0


def process_session(
    receiver: Any,
    apply: Callable[[OrderedWrite], None],
    *,
    max_message_count: int = 10,
    max_wait_time: float = 1.0,
) -> int:
    """Drain one locked session: apply new writes in order, keep the last sequence in session state.

    ``apply`` must be idempotent for a given (tenant, sequence): a crash after applying and before the
    state update redelivers the write. Returns the number of writes applied.
    """
    session = receiver.session
    guard = SequenceGuard()
    last = _state_last(session.get_state())
    if last:
        guard.last[session.session_id] = last
    applied = 0
    while True:
        batch = receiver.receive_messages(max_message_count=max_message_count, max_wait_time=max_wait_time)
        if not batch:
            return applied
        for message in batch:
            try:
                write = parse_ordered(b"".join(bytes(part) for part in message.body))
            except PoisonMessageError as exc:
                receiver.dead_letter_message(message, reason=exc.reason, error_description=exc.description)
                continue
            if guard.should_apply(write):
                apply(write)
                guard.applied(write)
                session.set_state(json.dumps({"last_sequence": write.sequence,
                                              "updated_at": format_timestamp(utc_now())}))
                applied += 1
            receiver.complete_message(message)


def run_ordered_worker(
    client: Any,
    queue: str,
    apply: Callable[[OrderedWrite], None],
    *,
    stop: threading.Event,
    session_wait: float = 2.0,
    max_wait_time: float = 1.0,
) -> int:
    """Take whichever session has messages next, drain it, release it, repeat until ``stop``."""
    total = 0
    while not stop.is_set():
        try:
            with client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION,
                                           max_wait_time=session_wait) as receiver:
                total += process_session(receiver, apply, max_wait_time=max_wait_time)
        except Exception as exc:  # OperationTimeoutError when no session has messages
            log.debug("no session taken: %s", exc)
            stop.wait(0.1)
    return total


def applied_in_order(ledger: InMemoryLedger, expected: Iterable[tuple[str, int]]) -> bool:
    """True when each tenant's applied sequences are exactly 1..n for its expected count."""
    return all(ledger.applied.get(tenant, []) == list(range(1, n + 1)) for tenant, n in expected)


class SequenceStore(Protocol):
    """Where the last applied sequence per tenant lives (``consumers.ordered_table.TableSequenceStore``)."""

    def apply(self, write: OrderedWrite) -> Any: ...


def settle_ordered(
    store: SequenceStore,
    message: Any,
    actions: Any,
    *,
    work: Callable[[OrderedWrite], None] | None = None,
) -> str:
    """One message of a session-enabled trigger: apply it once, in order, then settle it.

    The broker delivers a session's messages one at a time and in order to whoever holds the session,
    so all this has to decide is whether the write is new. ``store.apply`` answers that against the
    tenant's last applied sequence (applied / duplicate / stale); duplicates and stale writes are
    completed without being applied. A message that can never be applied (not the contract, no
    positive ``sequence``, or a tenant that is not its session) is dead-lettered at once with the reason;
    any other failure abandons it, so it comes back first in its session and, after MaxDeliveryCount
    deliveries, is dead-lettered by the broker (``consumers.settlement.settle_message``: the leveler's
    rule). ``actions`` is ``ServiceBusMessageActions`` in Azure or ``consumers.settlement.ReceiverActions``
    elsewhere. Returns the outcome's name.
    """
    def apply(body: bytes) -> str:
        write = parse_ordered(body)
        session_id = getattr(message, "session_id", None)
        if session_id is not None and session_id != write.tenant_id:
            raise PoisonMessageError("InvalidField", f"tenant_id {write.tenant_id!r} is not the message's "
                                                     f"session id {session_id!r}: its order is not kept")
        if work is not None:
            work(write)
        name = getattr(outcome := store.apply(write), "value", str(outcome))
        if name != "applied":
            log.info("ordered write %s (tenant %s, sequence %d) is %s: completed without applying",
                     getattr(message, "message_id", "?"), write.tenant_id, write.sequence, name)
        return name

    name = settle_message(message, actions, apply, log=log, kind="ordered write")
    return "dead-lettered" if name is None else name


class TenantSequence:
    """Sequence numbers for one producer's ordered writes: increasing per tenant, even across restarts.

    A number is the current time in milliseconds, or one more than the last number this object gave
    the tenant if the clock has not moved on. A restarted producer (or one that moved to another
    instance) therefore continues above what it sent before, without storing a counter, as long as the
    clocks do not step back; if one did, the writer would see stale writes and complete them without
    applying them (never applying anything out of order). Gaps are expected: the writer needs the numbers
    to increase, not to be contiguous.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        import time

        self._clock = clock or time.time
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def next(self, tenant_id: str) -> int:
        with self._lock:
            value = max(int(self._clock() * 1000), self._last.get(tenant_id, 0) + 1)
            self._last[tenant_id] = value
            return value


def build_tick_writes(tenants: Iterable[str], sequences: TenantSequence, value: Any) -> list[ServiceBusMessage]:
    """One ordered write per tenant (the sender's feed of ``ordered-writes``)."""
    return [message for tenant in tenants
            for message in build_ordered_messages(tenant, [value], start_sequence=sequences.next(tenant))]
