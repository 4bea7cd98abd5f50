"""What Core Tools would write as function.json, read from the azure-functions object model."""

from __future__ import annotations

import inspect

import azure.functions as func
import azurefunctions.extensions.bindings.servicebus as servicebus
import pytest
from azure.functions.decorators.core import BindingDirection

import function_app
from shared.topology import SERVICE_BUS_CONNECTION


def _bindings(app: func.FunctionApp) -> dict[str, list[dict]]:
    app.functions_bindings = None  # get_functions() refuses a second call otherwise
    return {
        str(fn.get_function_name()): [dict(b.get_dict_repr()) for b in fn.get_bindings()]
        for fn in app.get_functions()
    }


def _user_functions(app: func.FunctionApp) -> dict:
    app.functions_bindings = None
    return {fn.get_function_name(): fn.get_user_function() for fn in app.get_functions()}


def _by_direction(bindings: list[dict], direction: BindingDirection) -> list[dict]:
    return [b for b in bindings if b["direction"] == direction]


@pytest.fixture(scope="module")
def all_bindings() -> dict[str, list[dict]]:
    return _bindings(function_app.create_app(["sender", "consumer-high", "consumer-low", "leveler", "ordered"]))


def test_every_role_registers_its_function(all_bindings: dict[str, list[dict]]) -> None:
    assert sorted(all_bindings) == ["consumer_high", "consumer_low", "leveler", "ordered_writer", "sender"]


def test_sender_is_a_timer_on_the_schedule_setting(all_bindings: dict[str, list[dict]]) -> None:
    (trigger,) = all_bindings["sender"]
    assert trigger["type"] == "timerTrigger"
    assert trigger["direction"] == BindingDirection.IN
    assert trigger["schedule"] == "%SENDER_SCHEDULE%"
    assert trigger["runOnStartup"] is False


@pytest.mark.parametrize(("name", "subscription"), [("consumer_high", "highPriority"),
                                                    ("consumer_low", "lowPriority")])
def test_consumers_read_their_subscription_and_write_to_leveling(
    all_bindings: dict[str, list[dict]], name: str, subscription: str
) -> None:
    bindings = all_bindings[name]
    (trigger,) = _by_direction(bindings, BindingDirection.IN)
    (output,) = _by_direction(bindings, BindingDirection.OUT)
    assert trigger["type"] == "serviceBusTrigger"
    assert (trigger["topicName"], trigger["subscriptionName"]) == ("messages", subscription)
    assert trigger["connection"] == SERVICE_BUS_CONNECTION
    assert "queueName" not in trigger
    assert trigger.get("autoCompleteMessages", True) is True
    assert output["type"] == "serviceBus"
    assert output["queueName"] == "leveling"
    assert output["connection"] == SERVICE_BUS_CONNECTION
    assert output["name"] == "leveling"


def test_leveler_reads_leveling_and_settles_itself(all_bindings: dict[str, list[dict]]) -> None:
    (trigger,) = all_bindings["leveler"]
    assert trigger["type"] == "serviceBusTrigger"
    assert trigger["queueName"] == "leveling"
    assert trigger["connection"] == SERVICE_BUS_CONNECTION
    assert trigger["autoCompleteMessages"] is False
    assert "topicName" not in trigger


def test_ordered_writer_is_a_session_trigger_on_ordered_writes(all_bindings: dict[str, list[dict]]) -> None:
    """Functions docs, Service Bus trigger: ``isSessionsEnabled`` makes the host accept sessions, one per
    concurrent slot (``maxConcurrentSessions``), and deliver each session's messages in order."""
    (trigger,) = all_bindings["ordered_writer"]
    assert trigger["type"] == "serviceBusTrigger"
    assert trigger["queueName"] == "ordered-writes"
    assert trigger["connection"] == SERVICE_BUS_CONNECTION
    assert trigger["isSessionsEnabled"] is True
    assert trigger["autoCompleteMessages"] is False


def test_ordered_writer_binds_to_sdk_types_and_the_actions_have_no_way_to_read_session_state() -> None:
    """Why the last applied sequence is a table row: the actions can set a session's state, not get it."""
    user = _user_functions(function_app.create_app(["ordered"]))["ordered_writer"]
    params = inspect.signature(user).parameters
    assert params["message"].annotation is servicebus.ServiceBusReceivedMessage
    assert params["message_actions"].annotation is servicebus.ServiceBusMessageActions
    methods = {name for name in dir(servicebus.ServiceBusMessageActions) if "session" in name}
    assert "set_session_state" in methods
    assert not any("get" in name for name in methods)
    # the plain binding's ``state`` is the message's (Active/Deferred/Scheduled), not the session's
    assert not any("session_state" in name.lower() for name in dir(func.ServiceBusMessage))


def test_leveler_binds_to_sdk_types_so_the_worker_passes_message_actions() -> None:
    """The Python worker injects ServiceBusMessageActions by annotation, not by a binding entry."""
    user = _user_functions(function_app.create_app(["leveler"]))["leveler"]
    params = inspect.signature(user).parameters
    assert params["message"].annotation is servicebus.ServiceBusReceivedMessage
    assert params["message_actions"].annotation is servicebus.ServiceBusMessageActions


def test_app_roles_setting_selects_one_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_ROLES", "consumer-high")
    bindings = _bindings(function_app.create_app())
    assert list(bindings) == ["consumer_high"]
    (trigger,) = _by_direction(bindings["consumer_high"], BindingDirection.IN)
    assert trigger["subscriptionName"] == "highPriority"


def test_app_roles_accepts_several_and_ignores_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_ROLES", " leveler , sender ")
    assert sorted(_bindings(function_app.create_app())) == ["leveler", "sender"]


def test_unset_app_roles_means_every_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APP_ROLES", raising=False)
    assert len(_bindings(function_app.create_app())) == 5


def test_unknown_role_is_rejected_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP_ROLES", "sender,consumer-medium")
    with pytest.raises(ValueError, match="consumer-medium"):
        function_app.create_app()


def test_module_level_app_is_what_the_host_indexes() -> None:
    assert isinstance(function_app.app, func.FunctionApp)


def test_settle_calls_match_the_real_message_actions_signatures() -> None:
    """consumers.leveling.settle calls these by keyword; a rename in the preview package must fail here."""
    actions = servicebus.ServiceBusMessageActions
    assert list(inspect.signature(actions.complete).parameters) == ["self", "message"]
    assert "message" in inspect.signature(actions.abandon).parameters
    deadletter = inspect.signature(actions.deadletter).parameters
    assert {"message", "deadletter_reason", "deadletter_error_description"} <= set(deadletter)
