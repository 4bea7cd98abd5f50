"""Fault injection: rules that make the emulator answer an operation the way Service Bus answers one
that fails (docs/emulator.md, "Fault injection").

A rule names an entity (or ``*``), an operation and an effect, and how often it applies: a number
of times (``count``), a probability per matching operation (``probability``, from a seeded random
generator so a run repeats), or both. The gateway asks :meth:`Faults.check` at each operation, but
only while a rule exists: ``Faults.active`` is the one attribute the hot paths test, so an emulator
without rules pays nothing more.

Operations and where their failure is sent (what the SDKs read it from):

=============  ==========================================================================
connect        the connection is closed after its open, with the effect's condition
put-token      the ``$cbs`` reply carries the effect's status code and description
send           the transfer is settled ``rejected`` with the condition and description; a
               ``$management`` schedule-message (scheduling is sending) gets the error reply
receive        the receiver link is detached with the condition when the client asks for
               messages (a flow that gives credit)
settle         the disposition is answered ``rejected`` with the condition, and a
               ``$management`` update-disposition (settling by lock token) gets the error
               reply; the message stays locked, as after a failed settlement on the service
management     the ``$management`` reply has the status code, ``statusDescription`` and
               ``errorCondition``
=============  ==========================================================================

Effects: the AMQP conditions the SDKs map to their exceptions (azure-servicebus
``_transport/_pyamqp_transport.py``, ``_ERROR_CODE_TO_ERROR_MAPPING``), plus ``drop-connection``
(the socket is closed without a close frame, as a network failure looks) and ``latency`` (the
operation is done at once, but everything the connection sends from then on waits ``seconds``).

Rules may be added, removed and read from any thread: the list is replaced, never changed in place,
so the event loop always reads a complete one. A leaf of the gateway: imports nothing of the emulator.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("sbemulator.faults")

CONNECT = "connect"
PUT_TOKEN = "put-token"
SEND = "send"
RECEIVE = "receive"
SETTLE = "settle"
MANAGEMENT = "management"
OPERATIONS = (CONNECT, PUT_TOKEN, SEND, RECEIVE, SETTLE, MANAGEMENT)


@dataclass(frozen=True)
class Effect:
    """What Service Bus sends back: the AMQP error condition, the status code of a ``$cbs`` or
    ``$management`` reply, and the description (``{entity}`` and ``{namespace}`` are filled in)."""

    name: str
    condition: str | None
    status_code: int
    description: str
    sdk_exception: str  # what azure-servicebus raises for it (documentation only)


_THROTTLED = ("The request was terminated because the namespace {namespace} is being throttled. Error code : 50009. "
              "Please wait 2 seconds and try again. To know more visit https://aka.ms/sbResourceMgrExceptions")
EFFECTS: dict[str, Effect] = {e.name: e for e in (
    Effect("server-busy", "com.microsoft:server-busy", 503, _THROTTLED, "ServiceBusServerBusyError"),
    Effect("quota-exceeded", "amqp:resource-limit-exceeded", 403,
           "The quota of the messaging entity '{entity}' has been exceeded. To know more visit "
           "https://aka.ms/sbResourceMgrExceptions", "ServiceBusQuotaExceededError"),
    Effect("timeout", "com.microsoft:timeout", 408,
           "The operation did not complete within the allocated time 00:01:00 for object '{entity}'.",
           "OperationTimeoutError"),
    Effect("lock-lost", "com.microsoft:message-lock-lost", 410,
           "The lock supplied is invalid. Either the lock expired, or the message has already been removed "
           "from the queue, or was received by a different receiver instance.", "MessageLockLostError"),
    # What a session receiver's operations get for "lock-lost" (check's ``session``), or asked for by name:
    # Service Bus's SessionLockLostException text.
    Effect("session-lock-lost", "com.microsoft:session-lock-lost", 410,
           "The session lock has expired on the MessageSession. Accept a new MessageSession.",
           "SessionLockLostError"),
    Effect("not-found", "amqp:not-found", 404,
           "The messaging entity '{entity}' could not be found. To know more visit "
           "https://aka.ms/sbResourceMgrExceptions", "MessagingEntityNotFoundError"),
    Effect("drop-connection", None, 0, "", "ServiceBusConnectionError (the SDK reconnects and retries)"),
    Effect("latency", None, 0, "", "none: the answer comes late"),
)}
DROP = EFFECTS["drop-connection"]
LATENCY = EFFECTS["latency"]
LOCK_LOST = EFFECTS["lock-lost"]
SESSION_LOCK_LOST = EFFECTS["session-lock-lost"]
_ids = itertools.count(1)


@dataclass
class FaultRule:
    """One rule. ``count``: how many times it takes effect (None: until removed); ``probability``:
    the chance per matching operation (with ``seed``, the same sequence every run); ``seconds``: the
    delay of ``latency``; ``description``: replaces the effect's own. ``matched`` counts the
    operations the rule matched (the attempts the emulator saw), ``applied`` those it failed."""

    operation: str
    effect: str
    entity: str = "*"
    count: int | None = None
    probability: float = 1.0
    seed: int | None = None
    seconds: float = 0.0
    description: str | None = None
    id: str = ""
    matched: int = 0
    applied: int = 0
    _random: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.operation = str(self.operation).lower()
        self.effect = str(self.effect).lower()
        if self.operation not in OPERATIONS:
            raise ValueError(f"Unknown operation {self.operation!r}: use one of {', '.join(OPERATIONS)}.")
        if self.effect not in EFFECTS:
            raise ValueError(f"Unknown effect {self.effect!r}: use one of {', '.join(EFFECTS)}.")
        self.entity = (str(self.entity or "*")).strip("/").lower() or "*"
        if self.operation == CONNECT and self.entity != "*":
            raise ValueError("A connect fault applies to every connection: its entity must be '*'.")
        if self.count is not None and (isinstance(self.count, bool) or not isinstance(self.count, int)
                                       or self.count < 0):
            raise ValueError("count must be a whole number, zero or more (None: every time).")
        if isinstance(self.probability, bool) or not isinstance(self.probability, (int, float)) or not (
                0.0 <= self.probability <= 1.0):
            raise ValueError("probability must be a number from 0 to 1.")
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)) or not (
                0.0 <= self.seconds <= 600.0):
            raise ValueError("seconds must be a number from 0 to 600.")
        if self.effect == "latency" and self.seconds <= 0:
            raise ValueError("A latency fault needs seconds > 0.")
        self.probability = float(self.probability)
        self.seconds = float(self.seconds)
        if not self.id:
            self.id = f"fault-{next(_ids)}"
        self._random = random.Random(self.seed)

    @property
    def spent(self) -> bool:
        return self.count is not None and self.applied >= self.count

    def covers(self, operation: str, entity: str) -> bool:
        """The operation and entity are this rule's: ``*``, the entity itself, or one below it (a
        topic's rule covers its subscriptions, an entity's its dead-letter queue)."""
        if operation != self.operation:
            return False
        mine = self.entity
        return mine == "*" or entity == mine or entity.startswith(mine + "/")

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "entity": self.entity, "operation": self.operation, "effect": self.effect,
                "count": self.count, "probability": self.probability, "seed": self.seed,
                "seconds": self.seconds, "description": self.description,
                "matched": self.matched, "applied": self.applied, "spent": self.spent}


@dataclass(frozen=True)
class Refusal:
    """The answer an operation gets from a rule that applied."""

    rule: FaultRule
    effect: Effect
    condition: str
    status_code: int
    description: str


class Faults:
    """The emulator's fault rules (one registry per emulator, shared by its connections)."""

    def __init__(self, namespace: str = "sbemulatorns") -> None:
        self.namespace = namespace
        self.rules: tuple[FaultRule, ...] = ()
        self.active = False  # the hot paths' one test: any rule at all

    # ------------------------------------------------------------------ the API
    def add(self, operation: str, effect: str, entity: str = "*", *, count: int | None = None,
            probability: float = 1.0, seed: int | None = None, seconds: float = 0.0,
            description: str | None = None) -> FaultRule:
        """Add a rule (see :class:`FaultRule`); returns it, to read its counters and to remove it."""
        rule = FaultRule(operation, effect, entity, count=count, probability=probability, seed=seed,
                         seconds=seconds, description=description)
        self.rules = (*self.rules, rule)
        self.active = True
        return rule

    @contextlib.contextmanager
    def injected(self, operation: str, effect: str, entity: str = "*", **options: Any) -> Iterator[FaultRule]:
        """``with faults.injected("send", "server-busy", "orders", count=2) as rule:`` the rule applies
        inside the block only; ``rule.matched`` / ``rule.applied`` count what it saw."""
        rule = self.add(operation, effect, entity, **options)
        try:
            yield rule
        finally:
            self.remove(rule)

    def add_from(self, spec: dict[str, Any]) -> FaultRule:
        """A rule from its JSON form (the admin API's): ``operation``, ``effect``, optional ``entity``,
        ``count``, ``probability``, ``seed``, ``seconds``, ``description``."""
        known = {"operation", "effect", "entity", "count", "probability", "seed", "seconds", "description"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ValueError(f"Unknown fault field(s): {', '.join(unknown)}.")
        if "operation" not in spec or "effect" not in spec:
            raise ValueError("A fault needs an 'operation' and an 'effect'.")
        return self.add(spec["operation"], spec["effect"], spec.get("entity") or "*",
                        count=spec.get("count"), probability=spec.get("probability", 1.0), seed=spec.get("seed"),
                        seconds=spec.get("seconds", 0.0), description=spec.get("description"))

    def remove(self, rule: FaultRule | str) -> bool:
        """Remove a rule (or its id); False if it was not there."""
        rule_id = rule if isinstance(rule, str) else rule.id
        kept = tuple(r for r in self.rules if r.id != rule_id)
        removed = len(kept) != len(self.rules)
        self.rules = kept
        self.active = bool(kept)
        return removed

    def clear(self) -> int:
        """Remove every rule; returns how many there were."""
        count = len(self.rules)
        self.rules = ()
        self.active = False
        return count

    def get(self, rule_id: str) -> FaultRule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    def list(self) -> builtins.list[dict[str, Any]]:
        """Every rule in its JSON form, with its counters."""
        return [r.as_dict() for r in self.rules]

    def __iter__(self) -> Any:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    # ------------------------------------------------------------------ the gateway's side
    def check(self, operation: str, entity: str = "", entity_uri: str = "", *, session: bool = False) -> Refusal | None:
        """The first rule that applies to this operation now, counted; None when none does. Every
        covering rule counts the operation as matched, whether or not it applies. ``session``: the
        operation is a session receiver's (a receive or settlement on a session link, a ``$management``
        request naming a session), for which ``lock-lost`` is the session's lock, as Service Bus
        answers then (``com.microsoft:session-lock-lost``, SessionLockLostError)."""
        entity = entity.strip("/").lower()
        found: Refusal | None = None
        for rule in self.rules:
            if not rule.covers(operation, entity):
                continue
            rule.matched += 1
            if found is not None or rule.spent:
                continue
            if rule.probability < 1.0 and rule._random.random() >= rule.probability:
                continue
            rule.applied += 1
            effect = EFFECTS[rule.effect]
            if session and effect is LOCK_LOST:
                effect = SESSION_LOCK_LOST
            text = rule.description if rule.description is not None else effect.description
            description = text.replace("{entity}", entity_uri or entity).replace("{namespace}", self.namespace)
            found = Refusal(rule, effect, effect.condition or "", effect.status_code, description)
            log.info("injected fault %s: %s on %s %s", rule.id, rule.effect, operation, entity or "(connection)")
        return found


__all__ = [
    "CONNECT",
    "DROP",
    "EFFECTS",
    "LATENCY",
    "LOCK_LOST",
    "MANAGEMENT",
    "OPERATIONS",
    "PUT_TOKEN",
    "RECEIVE",
    "SEND",
    "SESSION_LOCK_LOST",
    "SETTLE",
    "Effect",
    "FaultRule",
    "Faults",
    "Refusal",
]
