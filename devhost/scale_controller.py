"""The scale controller: starts and stops instances of each app as target-based scaling decides.

Every ``interval`` seconds it reads each app's trigger backlogs (:mod:`devhost.trigger_backlog`),
asks the pure rule (:func:`devhost.scaling.decide`) for the app's instance count and applies it:
a new instance first pays the cold start (``cold_start`` seconds, then its listeners start with the
app's host.json concurrency), a removed one stops receiving and finishes what it holds. Every
decision is logged with its inputs (logger ``devhost.scale``); the ones that change something are
kept as :class:`ScaleEvent` for the dashboard and the chart. Apps named in ``fixed`` run that many
instances for the whole run (``--instances ROLE=N``), as pools to compare against.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from devhost.config import ServiceBusOptions
from devhost.discovery import SERVICE_BUS_TRIGGER, TIMER_TRIGGER, FunctionSpec
from devhost.instances import InstanceId
from devhost.scaling import MAX_INSTANCES_ADDED_PER_DECISION, Decision, ScaleLimits, ScaleState, decide
from devhost.trigger_backlog import TriggerBacklog

log = logging.getLogger("devhost.scale")

#: Microsoft publishes no cold-start figure for Flex Consumption (its docs say only that always-ready
#: instances reduce it); one second is an assumption for a small Python app, change it with --cold-start.
DEFAULT_COLD_START = 1.0
#: The docs say an idle app scales in "after ... a number of minutes" without a figure; 60 s locally.
DEFAULT_SCALE_IN_DELAY = 60.0


@dataclass(frozen=True)
class ScaleOptions:
    interval: float = 1.0  # seconds between decisions
    cold_start: float = DEFAULT_COLD_START
    scale_in_delay: float = DEFAULT_SCALE_IN_DELAY
    max_added_per_decision: int = MAX_INSTANCES_ADDED_PER_DECISION


@dataclass(frozen=True)
class ScaleEvent:
    at: float  # time.time()
    role: str
    previous: int
    instances: int
    desired: int
    reason: str
    backlogs: Mapping[str, int]


def target_per_instance(spec: FunctionSpec, options: ServiceBusOptions) -> int:
    """Target executions per instance of a Service Bus trigger (Target-based scaling, host.json)."""
    if spec.trigger.get("cardinality") == "many":
        return options.max_message_batch_size
    if spec.trigger.get("isSessionsEnabled"):
        return options.max_concurrent_sessions
    return options.max_concurrent_calls


@dataclass
class AppScale:
    """One app under the controller: its rule, its state, its instances."""

    role: str
    limits: ScaleLimits
    triggers: list[FunctionSpec]
    fixed: int | None = None
    state: ScaleState = field(default_factory=ScaleState)
    starting: dict[InstanceId, threading.Thread] = field(default_factory=dict)
    live: dict[InstanceId, Any] = field(default_factory=dict)
    peak: int = 0

    def all_ids(self) -> set[InstanceId]:
        return set(self.starting) | set(self.live)


class ScaleController:
    """Owns the instances of every app; ``start_instance``/``stop_instance`` come from the host."""

    def __init__(self, plans: Mapping[str, Any], options: ScaleOptions, backlog: TriggerBacklog,
                 start_instance: Callable[[Any, InstanceId], Any], stop_instance: Callable[..., None],
                 fixed: Mapping[str, int] | None = None, always_ready: Mapping[str, int] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 executions: Callable[[list[str]], int] | None = None) -> None:
        """``executions(function names)``: how many executions of those functions have finished so far
        (the host's invocation stats); a change between decisions means the app is not idle."""
        self.plans = plans
        self.options = options
        self.backlog = backlog
        self._start_instance = start_instance
        self._stop_instance = stop_instance
        self.clock = clock
        self._executions = executions
        self._executions_seen: dict[str, int] = {}
        self.events: list[ScaleEvent] = []
        self.apps: dict[str, AppScale] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        fixed = fixed or {}
        always_ready = always_ready or {}
        for role, plan in plans.items():
            triggers = [s for s in plan.specs if s.trigger_type == SERVICE_BUS_TRIGGER]
            has_timer = any(s.trigger_type == TIMER_TRIGGER for s in plan.specs)
            floor = max(always_ready.get(role, 0), 1 if has_timer or not triggers else 0)
            limits = ScaleLimits(
                max_instances=plan.max_instances,
                targets={s.name: target_per_instance(s, plan.options) for s in triggers},
                min_instances=min(floor, plan.max_instances),
                max_added_per_decision=options.max_added_per_decision,
                scale_in_delay=options.scale_in_delay,
            )
            self.apps[role] = AppScale(role, limits, triggers, fixed.get(role))

    # -- queries (dashboard, tests) -----------------------------------------------------------------
    def live(self, role: str) -> int:
        with self._lock:
            return len(self.apps[role].live)

    def starting(self, role: str) -> int:
        with self._lock:
            return len(self.apps[role].starting)

    def limit(self, role: str) -> int:
        app = self.apps[role]
        return app.fixed if app.fixed is not None else app.limits.max_instances

    def peak(self, role: str) -> int:
        with self._lock:
            return self.apps[role].peak

    def events_of(self, role: str) -> list[ScaleEvent]:
        with self._lock:
            return [e for e in self.events if e.role == role]

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        for app in self.apps.values():
            if app.fixed is not None:  # a fixed pool starts whole, warm, as before
                self._apply(app, app.fixed, cold=False)
                app.state = ScaleState(app.fixed)
        self.step()
        self._thread = threading.Thread(target=self._run, name="devhost-scale-controller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.options.interval):
            try:
                self.step()
            except Exception:
                log.exception("scale decision failed; keeping the current instances")

    def step(self) -> list[Decision]:
        decisions = []
        for app in self.apps.values():
            if app.fixed is not None:
                continue
            backlogs = {}
            for spec in app.triggers:
                bound = app.limits.max_instances * app.limits.targets[spec.name]
                backlogs[spec.name] = self.backlog.active(spec, bound)
            decision = decide(app.state, backlogs, self.clock(), app.limits, active=self._ran_since_last(app))
            log.log(logging.INFO if decision.changed else logging.DEBUG, "scale %s: %s", app.role,
                    decision.describe())
            app.state = decision.state
            if decision.changed:
                with self._lock:
                    self.events.append(ScaleEvent(time.time(), app.role, decision.previous, decision.instances,
                                                  decision.desired, decision.reason, decision.backlogs))
                self._apply(app, decision.instances, cold=True)
            decisions.append(decision)
        return decisions

    def _ran_since_last(self, app: AppScale) -> bool:
        if self._executions is None:
            return False
        count = self._executions([spec.name for spec in app.triggers])
        ran = count != self._executions_seen.get(app.role, 0)
        self._executions_seen[app.role] = count
        return ran

    def _apply(self, app: AppScale, count: int, cold: bool) -> None:
        with self._lock:
            current = app.all_ids()
            while len(current) < count:  # lowest free index: instance 0 (the timer's) is the last to go
                index = next(i for i in range(len(current) + 1) if InstanceId(app.role, i) not in current)
                instance = InstanceId(app.role, index)
                current.add(instance)
                thread = threading.Thread(target=self._boot, args=(app, instance, cold),
                                          name=f"devhost-start-{instance}", daemon=True)
                app.starting[instance] = thread
                thread.start()
            for instance in sorted(current, key=lambda i: i.index, reverse=True)[:max(0, len(current) - count)]:
                if instance in app.starting:
                    app.starting.pop(instance)  # its boot thread sees it is no longer wanted
                else:
                    handle = app.live.pop(instance)
                    threading.Thread(target=self._stop_instance, args=(handle,), name=f"devhost-stop-{instance}",
                                     daemon=True).start()

    def _boot(self, app: AppScale, instance: InstanceId, cold: bool) -> None:
        if cold and self.options.cold_start > 0 and self._stop.wait(self.options.cold_start):
            return
        with self._lock:
            if app.starting.get(instance) is not threading.current_thread() or self._stop.is_set():
                return
            app.starting.pop(instance)
            app.live[instance] = self._start_instance(self.plans[app.role], instance)
            app.peak = max(app.peak, len(app.live))

    def remove(self, role: str) -> InstanceId | None:
        """Take the highest-numbered live instance of ``role`` away, as a crash or the platform would (the
        demo's failover). Its invocations in flight finish, its locks are released; a fixed pool then runs
        one short of its size, a scaled app gets a replacement on a later decision if its backlog asks."""
        with self._lock:
            app = self.apps[role]
            if not app.live:
                return None
            instance = max(app.live, key=lambda i: i.index)
            handle = app.live.pop(instance)
            if app.fixed is None:  # the controller counts what runs: the next decision sees one missing
                app.state = replace(app.state, instances=len(app.all_ids()))
        self._stop_instance(handle)
        return instance

    def wait_live(self, timeout: float) -> bool:
        """True once no instance is still starting (fixed pools and floors are then up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not any(app.starting for app in self.apps.values()):
                    return True
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 15.0) -> None:
        """Stop deciding and stop every instance (in-flight invocations finish first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            handles = [h for app in self.apps.values() for h in app.live.values()]
            for app in self.apps.values():
                app.live.clear()
                app.starting.clear()
        for handle in handles:
            handle.signal()  # all stop receiving at once; then each finishes what it holds
        deadline = time.monotonic() + timeout  # one bound for all: each finishes what it holds meanwhile
        for handle in handles:
            self._stop_instance(handle, max(0.0, deadline - time.monotonic()))
        self.backlog.close()
