"""The scale rule of Azure Functions target-based scaling, as a pure function with an injected clock.

Documented behaviour it follows (Azure Functions docs, "Target-based scaling" and "Event-driven
scaling in Azure Functions"; cited with details in docs/devhost.md):

- desired instances = event source length / target executions per instance, rounded up; for a
  Service Bus trigger the length is the entity's active message count and the target is
  ``maxConcurrentCalls`` (single dispatch), ``maxConcurrentSessions`` (session triggers) or
  ``maxMessageBatchSize`` (batch triggers), from host.json;
- at most four instances are added per scaling decision;
- the scale limit (Flex Consumption ``maximumInstanceCount``) still applies;
- when several functions of one app ask for instances, their sum decides; a function asking to
  scale out wins over one asking to scale in;
- an idle app scales in, eventually to zero; always-ready instances (Flex Consumption) are a floor.
  Idle means no work, not an empty queue: an app whose instances keep up with a steady stream sees
  an active count near zero while it executes all the time ("Once your function app has been idle for
  a number of minutes, the platform might scale the number of instances on which your app runs down to
  zero", Event-driven scaling). So an app that ran executions within the scale-in delay keeps one
  instance; only the step to zero waits for idleness.

The docs give no figure for how long the platform waits before removing instances ("after your
function app has been idle for a number of minutes"), so the delay is a parameter
(:attr:`ScaleLimits.scale_in_delay`). Nothing here does I/O or reads a clock: ``now`` is passed in,
so every documented case is a unit test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

#: "target-based scaling allows for scaling up of four instances at a time" (Target-based scaling).
MAX_INSTANCES_ADDED_PER_DECISION = 4
#: Default target executions per instance of the Service Bus extension v5 (Target-based scaling table).
DEFAULT_TARGETS = {"maxConcurrentCalls": 16, "maxConcurrentSessions": 8, "maxMessageBatchSize": 1000}


@dataclass(frozen=True)
class ScaleLimits:
    """What bounds one app: its limit, its floor, the targets of its scaling triggers."""

    max_instances: int  # maximumInstanceCount
    targets: Mapping[str, int] = field(default_factory=dict)  # trigger function -> target executions per instance
    min_instances: int = 0  # always-ready instances, or 1 for an app whose timer needs a host
    max_added_per_decision: int = MAX_INSTANCES_ADDED_PER_DECISION
    scale_in_delay: float = 60.0  # seconds the desired count must stay below the current one

    def __post_init__(self) -> None:
        if self.max_instances < 1:
            raise ValueError(f"maximumInstanceCount must be >= 1, got {self.max_instances}")
        if not 0 <= self.min_instances <= self.max_instances:
            raise ValueError(f"the instance floor {self.min_instances} must be within 0..{self.max_instances}")
        if any(target < 1 for target in self.targets.values()):
            raise ValueError(f"target executions per instance must be >= 1, got {dict(self.targets)}")
        if self.max_added_per_decision < 1 or self.scale_in_delay < 0:
            raise ValueError("max_added_per_decision must be >= 1 and scale_in_delay >= 0")


@dataclass(frozen=True)
class ScaleState:
    """What the controller remembers between decisions."""

    instances: int = 0
    below_since: float | None = None  # when the desired count first fell below ``instances``
    last_active: float | None = None  # when the app last ran a trigger execution


@dataclass(frozen=True)
class Decision:
    """One decision with its inputs, so that it can be logged and checked."""

    at: float
    backlogs: Mapping[str, int]
    desired: int  # target-based desired count, within the floor and the limit
    previous: int
    instances: int  # what to run from now on
    reason: str
    state: ScaleState

    @property
    def changed(self) -> bool:
        return self.instances != self.previous

    def describe(self) -> str:
        backlog = ", ".join(f"{name}={count}" for name, count in sorted(self.backlogs.items())) or "no trigger"
        return f"{self.previous} -> {self.instances} ({self.reason}; backlog {backlog}; desired {self.desired})"


def desired_instances(backlogs: Mapping[str, int], limits: ScaleLimits) -> int:
    """Sum over the app's trigger functions of ceil(backlog / target), within floor and limit."""
    wanted = 0
    for function, backlog in backlogs.items():
        target = limits.targets.get(function)
        if target is None:
            raise KeyError(f"no target executions per instance for function {function!r}")
        wanted += math.ceil(max(0, backlog) / target)
    return max(limits.min_instances, min(limits.max_instances, wanted))


def decide(state: ScaleState, backlogs: Mapping[str, int], now: float, limits: ScaleLimits,
           active: bool = False) -> Decision:
    """The next instance count of one app.

    ``active``: the app ran trigger executions since the previous decision. An app that was active
    within ``scale_in_delay`` is not idle, so it keeps at least one instance even when its backlog
    reads zero (its instances keep up with the stream).

    Scale-out is immediate but adds at most ``max_added_per_decision`` instances per decision;
    scale-in happens once the desired count has stayed below the current one for
    ``scale_in_delay`` seconds, and then goes straight to the desired count (zero when idle and
    no floor). A current count above the limit (the limit was lowered) is brought down at once.
    """
    current = state.instances
    last_active = now if active else state.last_active
    desired = desired_instances(backlogs, limits)
    busy = last_active is not None and now - last_active < limits.scale_in_delay
    if desired == 0 and current > 0 and busy:
        desired = 1  # not idle: executions within the scale-in delay

    def decision(instances: int, reason: str, below_since: float | None) -> Decision:
        return Decision(now, dict(backlogs), desired, current, instances, reason,
                        replace(state, instances=instances, below_since=below_since, last_active=last_active))

    if current > limits.max_instances:
        return decision(limits.max_instances, "above maximumInstanceCount", None)
    if current < limits.min_instances:
        return decision(limits.min_instances, "up to the floor (a timer needs a host; always-ready)", None)
    if desired > current:
        step = min(desired, current + limits.max_added_per_decision)
        reason = "scale out" if step == desired else f"scale out, at most {limits.max_added_per_decision} per decision"
        return decision(step, reason, None)
    if desired == current:
        return decision(current, "steady", None)
    below_since = state.below_since if state.below_since is not None else now
    waited = now - below_since
    if waited >= limits.scale_in_delay:
        return decision(desired, f"scale in after {waited:.1f}s below", None)
    return decision(current, f"scale in pending ({waited:.1f}s of {limits.scale_in_delay:g}s)", below_since)
