"""Functions, triggers and bindings as the azure-functions object model declares them (no second registry).

``app.get_functions()`` gives each function's name, trigger and bindings (``get_dict_repr()``: the same
JSON the worker sends to the Functions host) and the user function. How an argument is bound depends on
its annotation, as in the Python worker: an SDK type from ``azurefunctions-extensions-bindings-*``
gets the SDK object, ``ServiceBusMessageActions`` gets a settlement object, anything else the
``azure.functions`` type.
"""

from __future__ import annotations

import enum
import inspect
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import azure.functions as func

from devhost.retry import RetryPolicy, RetryPolicyError, retry_policy

SERVICE_BUS_TRIGGER = "serviceBusTrigger"
TIMER_TRIGGER = "timerTrigger"
SUPPORTED_TRIGGERS = (SERVICE_BUS_TRIGGER, TIMER_TRIGGER)
SUPPORTED_OUTPUTS = ("serviceBus", "table")


class ArgKind(enum.Enum):
    FUNCTIONS = "azure.functions type"
    SDK = "SDK type"
    MESSAGE_ACTIONS = "message actions"


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    role: str
    trigger: dict[str, Any]
    outputs: tuple[dict[str, Any], ...]
    function: Callable[..., Any]
    trigger_kind: ArgKind = ArgKind.FUNCTIONS
    actions_arg: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    retry: RetryPolicy | None = None  # @app.retry on a timer; Service Bus triggers retry by redelivery

    @property
    def trigger_type(self) -> str:
        return self.trigger["type"]

    @property
    def entity(self) -> str:
        """``queue`` or ``topic/Subscriptions/subscription`` for Service Bus triggers."""
        if self.trigger.get("queueName"):
            return self.trigger["queueName"]
        return f"{self.trigger.get('topicName')}/Subscriptions/{self.trigger.get('subscriptionName')}"


class DiscoveryError(ValueError):
    """The app declares something this host cannot run; the message names the function."""


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name.lower()
    return value


def _repr(binding: Any) -> dict[str, Any]:
    return {key: _plain(value) for key, value in binding.get_dict_repr().items()}


def _is_sdk_type(annotation: Any) -> bool:
    module = getattr(annotation, "__module__", "") or ""
    return isinstance(annotation, type) and module.startswith("azurefunctions.extensions.bindings.")


def _is_message_actions(annotation: Any) -> bool:
    return _is_sdk_type(annotation) and annotation.__name__ == "ServiceBusMessageActions"


def _annotations(function: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception:  # unresolved forward references: fall back to what the signature holds
        return {name: p.annotation for name, p in inspect.signature(function).parameters.items()}


def _retry(function: Any, name: str, trigger_type: str) -> RetryPolicy | None:
    setting = function.get_setting("retry_policy")
    if setting is None:
        return None
    try:
        policy = retry_policy(setting.get_dict_repr())
    except RetryPolicyError as exc:
        raise DiscoveryError(f"function {name}: {exc}") from None
    if trigger_type == SERVICE_BUS_TRIGGER:
        logging.getLogger("devhost").warning(
            "function %s: a retry policy does not apply to Service Bus triggers (they retry by redelivery, "
            "up to the entity's MaxDeliveryCount); ignored", name)
        return None
    return policy


def discover(app: func.FunctionApp, role: str) -> list[FunctionSpec]:
    """Every function of ``app``, labelled with the ``role`` (Function App) it belongs to."""
    app.functions_bindings = None  # get_functions() raises "not unique" when called twice otherwise
    specs = []
    for function in app.get_functions():
        name = function.get_function_name()
        if not name:  # the decorators always name a function; this is a host that cannot route it
            raise DiscoveryError(f"a function of {role} has no name")
        trigger = _repr(function.get_trigger())
        if trigger["type"] not in SUPPORTED_TRIGGERS:
            raise DiscoveryError(f"function {name}: trigger type {trigger['type']!r} is not supported by "
                                 f"devhost (supported: {', '.join(SUPPORTED_TRIGGERS)})")
        outputs = []
        for binding in function.get_bindings():
            data = _repr(binding)
            if data["direction"] != "out":
                continue
            if data["type"] not in SUPPORTED_OUTPUTS:
                raise DiscoveryError(f"function {name}: output binding {data['name']!r} of type "
                                     f"{data['type']!r} is not supported (supported: {SUPPORTED_OUTPUTS})")
            outputs.append(data)
        user = function.get_user_function()
        hints = _annotations(user)
        trigger_kind = ArgKind.SDK if _is_sdk_type(hints.get(trigger["name"])) else ArgKind.FUNCTIONS
        actions = [arg for arg, hint in hints.items() if _is_message_actions(hint)]
        if actions and trigger["type"] != SERVICE_BUS_TRIGGER:
            raise DiscoveryError(f"function {name}: ServiceBusMessageActions needs a Service Bus trigger")
        specs.append(FunctionSpec(
            name=name, role=role, trigger=trigger, outputs=tuple(outputs), function=user,
            trigger_kind=trigger_kind, actions_arg=actions[0] if actions else None,
            retry=_retry(function, name, trigger["type"]),
        ))
    return specs
