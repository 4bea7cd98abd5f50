"""Triggers: a timer listener and Service Bus listeners with host.json semantics.

A Service Bus listener of one instance runs ``maxConcurrentCalls`` slots (``maxConcurrentSessions`` for
session triggers); each slot is a thread with its own receiver, because the SDK's receivers are not
thread-safe. Slots open their receivers on demand: one more than are busy, so an idle instance holds
two links rather than sixteen (hundreds of idle receivers would eat the CPU of a laptop), and a busy
one grows to its full concurrency.

A batch trigger (``cardinality="many"``) runs one slot per instance (the extension's batch receive
loop; ``maxConcurrentCalls`` applies to single-message functions only): it receives up to
``maxMessageBatchSize`` messages, waits up to ``maxBatchWaitTime`` for ``minMessageBatchSize`` of them,
and calls the function with the list.

Settlement follows ``autoCompleteMessages``: complete after success and after the output bindings were
sent, abandon when the function raises (every message of a batch). With it off, the function settles through the
message actions (``consumers.settlement.ReceiverActions``). Locks are renewed by the SDK's
``AutoLockRenewer`` up to ``maxAutoLockRenewalDuration``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, AutoLockRenewer
from azure.servicebus.exceptions import MessageAlreadySettled, OperationTimeoutError, SessionLockLostError

from devhost.bindings import Out, ServiceBusOutputs, TableOutputs, functions_message, timer_request
from devhost.config import ServiceBusOptions
from devhost.discovery import ArgKind, FunctionSpec
from devhost.instances import InstanceId, enter_instance
from devhost.schedule import Schedule
from devhost.stats import Invocation, InvocationStats

log = logging.getLogger("devhost")

POLL_SECONDS = 1.0  # how long a receive waits; bounds how long stop() takes
MAX_BACKOFF = 10.0
PAST_DUE_SLACK = timedelta(seconds=1)


class Outputs:
    """Output bindings of one instance."""

    def __init__(self, service_bus: ServiceBusOutputs, tables: TableOutputs) -> None:
        self.service_bus = service_bus
        self.tables = tables

    def send(self, binding: dict[str, Any], value: Any) -> None:
        if binding["type"] == "serviceBus":
            self.service_bus.send(binding, value)
        else:
            self.tables.send(binding, value)

    def close(self) -> None:
        self.service_bus.close()
        self.tables.close()


RETURN = "$return"  # an output binding fed by the function's return value (Python developer guide)


def call_function(spec: FunctionSpec, kwargs: dict[str, Any], outputs: Outputs) -> None:
    """Call the user function with fresh ``Out`` objects, then flush what they (and ``$return``) hold."""
    outs: dict[str, Out[Any]] = {binding["name"]: Out() for binding in spec.outputs if binding["name"] != RETURN}
    returned = spec.function(**kwargs, **outs)
    for binding in spec.outputs:
        if binding["name"] == RETURN:
            value = returned
        else:
            out = outs[binding["name"]]
            value = out.get() if out.was_set else None
        if value is not None:
            outputs.send(binding, value)


class Listener:
    """Base: threads that belong to one instance, stopped together."""

    def __init__(self, spec: FunctionSpec, instance: InstanceId, stats: InvocationStats) -> None:
        self.spec = spec
        self.instance = instance
        self.stats = stats
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        def run() -> None:
            enter_instance(self.instance)
            target()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _record(self, started: float, succeeded: bool) -> None:
        self.stats.record(Invocation(self.spec.name, self.instance, started, time.time() - started, succeeded))


class TimerListener(Listener):
    """Fires on the schedule; a timer runs on one instance only (the host's singleton lock)."""

    def __init__(self, spec: FunctionSpec, instance: InstanceId, stats: InvocationStats, schedule: Schedule,
                 outputs: Outputs, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        super().__init__(spec, instance, stats)
        self.schedule = schedule
        self.outputs = outputs
        self.clock = clock

    def start(self) -> None:
        self._spawn(self._run, f"{self.spec.name}@{self.instance}")

    def _run(self) -> None:
        if self.spec.trigger.get("runOnStartup"):
            self._fire(self.clock(), past_due=False)
        scheduled = self.schedule.next_after(self.clock())
        while not self.stop_event.is_set():
            wait = (scheduled - self.clock()).total_seconds()
            if wait > 0 and self.stop_event.wait(wait):
                return
            now = self.clock()
            self._fire(scheduled, past_due=now - scheduled > PAST_DUE_SLACK)
            scheduled = self.schedule.following(scheduled, self.clock())

    def _fire(self, scheduled: datetime, past_due: bool) -> None:
        """One execution: the run, then the retries its retry policy allows while it keeps failing."""
        delays = self.spec.retry.delays() if self.spec.retry else iter(())
        while True:
            started = time.time()
            request = timer_request(past_due, scheduled, self.schedule.next_after(scheduled))
            try:
                call_function(self.spec, {self.spec.trigger["name"]: request}, self.outputs)
            except Exception:
                log.exception("function %s (instance %s) failed", self.spec.name, self.instance)
                self._record(started, False)
                delay = next(delays, None)
                if delay is None or self.stop_event.wait(delay.total_seconds()):
                    return  # no retry left (a timer is not retried without a policy), or stopping
                continue
            self._record(started, True)
            return


class SlotGate:
    """How many slots are busy; slot ``i`` is wanted while at least ``i - spare`` others are busy."""

    def __init__(self, spare: int = 1) -> None:
        self.busy = 0
        self.spare = spare
        self._cond = threading.Condition()

    def wanted(self, index: int) -> bool:
        return index <= self.busy + self.spare

    def wait_until_wanted(self, index: int, stop: threading.Event) -> bool:
        with self._cond:
            while not self.wanted(index):
                if stop.is_set():
                    return False
                self._cond.wait(0.5)
        return not stop.is_set()

    def enter(self) -> None:
        with self._cond:
            self.busy += 1
            self._cond.notify_all()

    def leave(self) -> None:
        with self._cond:
            self.busy -= 1


class ServiceBusListener(Listener):
    """``slots`` receivers of one instance on the trigger's queue or subscription."""

    def __init__(self, spec: FunctionSpec, instance: InstanceId, stats: InvocationStats,
                 options: ServiceBusOptions, client_factory: Callable[[], Any], outputs: Outputs) -> None:
        super().__init__(spec, instance, stats)
        self.options = options
        self.client_factory = client_factory
        self.outputs = outputs
        self.sessions = bool(spec.trigger.get("isSessionsEnabled"))
        auto = spec.trigger.get("autoCompleteMessages")
        self.auto_complete = options.auto_complete_messages if auto is None else bool(auto)
        self.batch = spec.trigger.get("cardinality") == "many"
        if self.batch:
            self.slots = 1
        else:
            self.slots = options.max_concurrent_sessions if self.sessions else options.max_concurrent_calls
        self.connected = threading.Event()
        # a session slot holds a session even while idle, so every session slot stays open
        self.gate = SlotGate(spare=self.slots if self.sessions else 1)
        self.open_receivers = 0

    def start(self) -> None:
        for slot in range(self.slots):
            self._spawn(functools.partial(self._run_slot, slot), f"{self.spec.name}@{self.instance}/{slot}")

    def _receiver(self, client: Any, renewer: AutoLockRenewer | None) -> Any:
        trigger = self.spec.trigger
        kwargs: dict[str, Any] = {"prefetch_count": self.options.prefetch_count, "auto_lock_renewer": renewer}
        if self.sessions:
            kwargs.update(session_id=NEXT_AVAILABLE_SESSION, max_wait_time=POLL_SECONDS)
        if trigger.get("queueName"):
            return client.get_queue_receiver(trigger["queueName"], **kwargs)
        return client.get_subscription_receiver(trigger["topicName"], trigger["subscriptionName"], **kwargs)

    def _run_slot(self, index: int) -> None:
        backoff = 0.5
        # "maxAutoLockRenewalDuration ... doesn't apply to functions receiving a batch of messages"
        # (host.json settings, Service Bus bindings page): a batch lives on its messages' lock duration
        renewal = 0.0 if self.batch else self.options.max_auto_lock_renewal_duration.total_seconds()
        while self.gate.wait_until_wanted(index, self.stop_event):
            renewer = AutoLockRenewer(max_lock_renewal_duration=renewal) if renewal > 0 else None
            try:
                with self.client_factory() as client, self._receiver(client, renewer) as receiver:
                    self.open_receivers += 1
                    try:
                        if index == 0:
                            self.connected.set()
                        self._receive_loop(receiver, index)
                    finally:
                        self.open_receivers -= 1
                    backoff = 0.5
            except (OperationTimeoutError, SessionLockLostError):
                # No session has messages (the broker answered, so the listener is up and waiting), or
                # the session was lost: ask for the next one.
                if index == 0:
                    self.connected.set()
                continue
            except Exception as exc:
                if self.stop_event.is_set():
                    return
                log.error("function %s (instance %s): receiver on %s failed: %s; retrying in %.1fs",
                          self.spec.name, self.instance, self.spec.entity, exc, backoff)
                self.stop_event.wait(backoff)
                backoff = min(MAX_BACKOFF, backoff * 2)
            finally:
                if renewer is not None:
                    renewer.close()

    def _receive_loop(self, receiver: Any, index: int) -> None:
        idle_limit = self.options.session_idle_timeout or timedelta(seconds=POLL_SECONDS)
        idle_since = time.monotonic()
        while not self.stop_event.is_set():
            batch = self._receive(receiver)
            if not batch:
                if self.sessions and time.monotonic() - idle_since >= idle_limit.total_seconds():
                    return  # release this session and take whichever has messages next
                if not self.gate.wanted(index):
                    return  # demand fell: close this receiver until it is wanted again
                continue
            self.gate.enter()
            try:
                if self.batch:
                    self.invoke_batch(receiver, batch)
                else:
                    for message in batch:
                        self.invoke(receiver, message)
            finally:
                self.gate.leave()
            idle_since = time.monotonic()

    def _receive(self, receiver: Any) -> list[Any]:
        """One message, or for a batch trigger up to maxMessageBatchSize, filled towards the minimum."""
        if not self.batch:
            return receiver.receive_messages(max_message_count=1, max_wait_time=POLL_SECONDS)
        limit, wanted = self.options.max_message_batch_size, self.options.min_message_batch_size
        batch = receiver.receive_messages(max_message_count=limit, max_wait_time=POLL_SECONDS)
        if not batch or len(batch) >= wanted:
            return batch
        deadline = time.monotonic() + self.options.max_batch_wait_time.total_seconds()
        while len(batch) < wanted and not self.stop_event.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break  # a partial batch once maxBatchWaitTime has passed
            batch += receiver.receive_messages(max_message_count=limit - len(batch),
                                               max_wait_time=min(POLL_SECONDS, remaining))
        return batch

    def invoke(self, receiver: Any, message: Any) -> bool:
        """One message for a single-message function."""
        trigger_arg = message if self.spec.trigger_kind is ArgKind.SDK else functions_message(message)
        return self._call(receiver, [message], trigger_arg)

    def invoke_batch(self, receiver: Any, messages: list[Any]) -> bool:
        """A list of messages for a ``cardinality="many"`` function; settled together."""
        sdk = self.spec.trigger_kind is ArgKind.SDK
        return self._call(receiver, messages, [m if sdk else functions_message(m) for m in messages])

    def _call(self, receiver: Any, messages: list[Any], trigger_arg: Any) -> bool:
        from consumers.settlement import ReceiverActions

        started = time.time()
        kwargs = {self.spec.trigger["name"]: trigger_arg}
        if self.spec.actions_arg:
            kwargs[self.spec.actions_arg] = ReceiverActions(receiver)
        try:
            call_function(self.spec, kwargs, self.outputs)
        except Exception:
            ids = ", ".join(str(m.message_id) for m in messages)
            log.exception("function %s (instance %s) failed on message%s %s%s", self.spec.name, self.instance,
                          "s" if len(messages) > 1 else "", ids, "; abandoning it" if self.auto_complete else "")
            if self.auto_complete:
                self._settle(receiver.abandon_message, messages, "abandon")
            self._record(started, False)
            return False
        if self.auto_complete:
            self._settle(receiver.complete_message, messages, "complete")
        self._record(started, True)
        return True

    def _settle(self, settle: Callable[[Any], None], messages: list[Any], what: str) -> None:
        """Settle what the function left unsettled (it may have settled some through message actions)."""
        for message in messages:
            try:
                settle(message)
            except MessageAlreadySettled:
                continue
            except Exception as exc:
                if what == "complete" and not self.batch:
                    raise  # as before: a failed complete is the slot's error (the receiver is reopened)
                log.warning("function %s: %s of message %s failed: %s", self.spec.name, what, message.message_id, exc)
