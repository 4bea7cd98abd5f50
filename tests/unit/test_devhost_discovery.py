"""What devhost reads from the app: functions and bindings, per-role limits from the Bicep, instance scope,
the Functions message built from an SDK message, and the start-up errors that name what is wrong."""

from __future__ import annotations

import functools
import sys
import types
from pathlib import Path

import azure.functions as func
import pytest
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus._pyamqp.message import Message, Properties

from devhost.bindings import Out, functions_message, to_service_bus_messages
from devhost.cli import main as cli_main
from devhost.cli import parse_instances
from devhost.discovery import ArgKind, DiscoveryError, discover
from devhost.host import Host, HostError, HostOptions
from devhost.instances import InstanceId, InstanceScope, enter_instance
from devhost.scale import load_role_scales
from function_app import create_app
from shared.settings import SettingsError

ROOT = Path(__file__).resolve().parents[2]
EMULATOR_STYLE = ("Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=RootManageSharedAccessKey;"
                  "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;")


def _by_name(role: str) -> dict:
    return {spec.name: spec for spec in discover(create_app([role]), role)}


def test_sender_is_a_timer_on_the_schedule_setting() -> None:
    spec = _by_name("sender")["sender"]
    assert spec.trigger_type == "timerTrigger"
    assert spec.trigger["schedule"] == "%SENDER_SCHEDULE%" and spec.trigger["runOnStartup"] is False
    assert spec.outputs == ()


@pytest.mark.parametrize(("role", "name", "subscription"), [
    ("consumer-high", "consumer_high", "highPriority"), ("consumer-low", "consumer_low", "lowPriority")])
def test_consumers_read_their_subscription_and_write_to_leveling(role: str, name: str, subscription: str) -> None:
    spec = _by_name(role)[name]
    assert spec.role == role and spec.trigger_type == "serviceBusTrigger"
    assert (spec.trigger["topicName"], spec.trigger["subscriptionName"]) == ("messages", subscription)
    assert spec.entity == f"messages/Subscriptions/{subscription}"
    assert spec.trigger_kind is ArgKind.FUNCTIONS and spec.actions_arg is None
    (output,) = spec.outputs
    assert (output["type"], output["queueName"], output["name"], output["direction"]) == (
        "serviceBus", "leveling", "leveling", "out")


def test_leveler_binds_sdk_types_and_settles_itself() -> None:
    spec = _by_name("leveler")["leveler"]
    assert spec.trigger["queueName"] == "leveling" and spec.trigger["autoCompleteMessages"] is False
    assert spec.trigger_kind is ArgKind.SDK
    assert spec.actions_arg == "message_actions"


def test_discovery_can_run_twice_on_one_app() -> None:
    app = create_app(["sender", "leveler"])
    assert [s.name for s in discover(app, "x")] == [s.name for s in discover(app, "x")] == ["sender", "leveler"]


def test_unsupported_trigger_names_the_function() -> None:
    app = func.FunctionApp()

    @app.function_name("web")
    @app.route(route="hello")
    def web(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse("hi")

    with pytest.raises(DiscoveryError, match="function web: trigger type 'httpTrigger'"):
        discover(app, "web")


def test_role_limits_come_from_the_bicep() -> None:
    scales = load_role_scales(ROOT / "infra" / "main.bicep")
    assert set(scales) == {"sender", "consumer-high", "consumer-low", "leveler", "ordered"}
    assert scales["consumer-high"].max_instances > scales["consumer-low"].max_instances
    assert scales["ordered"].max_concurrent_sessions == 2
    assert all(s.max_instances >= 1 and s.max_concurrent_calls >= 1 for s in scales.values())


def test_role_limits_follow_parameter_defaults(tmp_path: Path) -> None:
    bicep = tmp_path / "main.bicep"
    bicep.write_text("""
param aInstances int = 7
param aCalls int = 3
var functionApps = [
  {
    role: 'a'
    maximumInstanceCount: aInstances
    maxConcurrentCalls: aCalls
  }
  {
    role: 'b'
    maximumInstanceCount: 2
    maxConcurrentCalls: 1
  }
]
""")
    scales = load_role_scales(bicep)
    assert (scales["a"].max_instances, scales["a"].max_concurrent_calls) == (7, 3)
    assert (scales["b"].max_instances, scales["b"].max_concurrent_calls) == (2, 1)
    assert scales["a"].max_concurrent_sessions is None  # not declared: host.json decides
    bicep.write_text("param x int\nvar functionApps = [\n  {\n    role: 'a'\n    maximumInstanceCount: x\n"
                     "    maxConcurrentCalls: 1\n  }\n]\n")
    with pytest.raises(SettingsError, match="parameter 'x' has no default"):
        load_role_scales(bicep)
    with pytest.raises(SettingsError, match="does not exist"):
        load_role_scales(tmp_path / "absent.bicep")


def test_instance_scope_gives_each_instance_its_own_cached_resource() -> None:
    module = types.ModuleType("fake_runtime")
    counter = iter(range(100))

    @functools.cache
    def resource() -> int:
        return next(counter)

    resource.__module__ = module.__name__
    module.resource = resource  # type: ignore[attr-defined]
    scope = InstanceScope([module])
    scope.install()
    try:
        enter_instance(InstanceId("r", 0))
        first = module.resource()
        assert module.resource() == first
        enter_instance(InstanceId("r", 1))
        second = module.resource()
        assert second != first and module.resource() == second
        factory = scope.factory("fake_runtime.resource")
        assert factory is not None and set(factory.values()) == {InstanceId("r", 0), InstanceId("r", 1)}
    finally:
        enter_instance(None)
        scope.uninstall()
    assert module.resource is resource


def _sdk_message() -> ServiceBusReceivedMessage:
    return ServiceBusReceivedMessage(Message(
        data=[b'{"a":', b"1}"], application_properties={b"Priority": b"High", b"n": 3},
        properties=Properties(message_id=b"id-1", content_type=b"application/json", subject=b"High"),
    ), receiver=None)


def test_functions_message_from_an_sdk_message() -> None:
    message = functions_message(_sdk_message())
    assert isinstance(message, func.ServiceBusMessage)
    assert message.get_body() == b'{"a":1}'
    assert message.message_id == "id-1" and message.content_type == "application/json"
    assert message.application_properties == {"Priority": "High", "n": 3}  # str keys, as the binding gives
    assert message.label == "High"
    assert (message.metadata or {})["MessageId"] == "id-1"


def test_out_and_service_bus_output_values() -> None:
    out: Out[str] = Out()
    assert out.get() is None and not out.was_set
    out.set("x")
    assert out.get() == "x" and out.was_set
    messages = to_service_bus_messages(["a", b"b", {"c": 1}])
    assert [str(m) for m in messages] == ["a", "b", '{"c": 1}']


def test_instances_argument() -> None:
    assert parse_instances(["consumer-high=2", "leveler=1"]) == {"consumer-high": 2, "leveler": 1}
    with pytest.raises(SettingsError, match="ROLE=N"):
        parse_instances(["consumer-high=0"])


def _options(**kwargs) -> HostOptions:
    return HostOptions(use_local_settings=False, connect_timeout=0.5, **kwargs)


def test_a_missing_app_setting_is_named_before_anything_starts() -> None:
    env = {"ServiceBusConnection": EMULATOR_STYLE.format(port=1)}
    with pytest.raises(SettingsError, match="%SENDER_SCHEDULE% which is not set"):
        Host(_options(roles=("sender",), env=env)).start()


def test_an_invalid_app_setting_is_named() -> None:
    env = {"ServiceBusConnection": EMULATOR_STYLE.format(port=1), "SENDER_SCHEDULE": "*/2 * * * * *",
           "SENDER_BATCH_SIZE": "ten"}
    with pytest.raises(SettingsError, match="SENDER_BATCH_SIZE must be an integer"):
        Host(_options(roles=("sender",), env=env)).start()


def test_an_unreachable_namespace_fails_within_the_connect_timeout() -> None:
    """A namespace that is not a local emulator (no UseDevelopmentEmulator): devhost does not stand one in
    (that it does for the emulator's own loopback address: tests/integration/test_devhost_local_settings.py)."""
    env = {"ServiceBusConnection": "Endpoint=sb://127.0.0.1:1/;SharedAccessKeyName=k;SharedAccessKey=v"}
    # the options' connect timeout (0.5 s) is the wait it gave up after, named in the error (no timed
    # assert: a loaded machine may take longer to get there, the wait itself is what is bounded)
    with pytest.raises(HostError, match=r"cannot reach the Service Bus namespace .*127\.0\.0\.1:1 did not "
                                        r"accept a connection within 0\.5s"):
        Host(_options(roles=("consumer-high",), env=env)).start()


def test_a_connection_no_setting_provides_is_named() -> None:
    from devhost.scale import RoleScale

    app = func.FunctionApp()

    @app.function_name("elsewhere")
    @app.service_bus_queue_trigger(arg_name="m", queue_name="q", connection="OtherNamespace")
    def elsewhere(m: func.ServiceBusMessage) -> None:
        pass

    env = {"ServiceBusConnection": EMULATOR_STYLE.format(port=1)}
    options = _options(roles=(), env=env, extra_apps={"other": (app, RoleScale("other", 1, 1))})
    options.roles = ("sender",)
    options.overrides = {"SENDER_SCHEDULE": "*/2 * * * * *"}
    host = Host(options)
    host._ensure_connections = lambda settings, roles: None  # type: ignore[method-assign]  # no namespace needed to check the names
    with pytest.raises(SettingsError, match="function elsewhere: connection setting 'OtherNamespace' is not set"):
        host.start()


def test_cli_reports_settings_errors_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli_main(["--settings", str(tmp_path / "absent.json"), "--duration", "0"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_function_app_module_is_importable_from_the_root() -> None:
    assert str(ROOT) in sys.path or any(Path(p).resolve() == ROOT for p in sys.path if p)
