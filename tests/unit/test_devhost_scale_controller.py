"""The controller around the rule: which instances it starts and stops, targets per trigger kind,
floors for timer apps and always-ready counts, fixed pools. The backlog and the instances are
stand-ins (recorded calls), so this runs without a broker; the real thing is
tests/integration/test_devhost_scaling.py."""

from __future__ import annotations

from typing import Any

from devhost.config import ServiceBusOptions
from devhost.discovery import FunctionSpec
from devhost.host import RolePlan
from devhost.instances import InstanceId
from devhost.scale_controller import ScaleController, ScaleOptions, target_per_instance
from tests.fixtures.waiting import wait_until

OPTIONS = ServiceBusOptions(max_concurrent_calls=2, max_concurrent_sessions=3, max_message_batch_size=50)


def spec(name: str, **trigger: Any) -> FunctionSpec:
    kind = trigger.pop("type", "serviceBusTrigger")
    return FunctionSpec(name, "r", {"type": kind, "name": "m", **trigger}, (), lambda **_: None)


class Backlog:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.source = "test"

    def active(self, function: FunctionSpec, limit: int) -> int:
        return min(limit, self.counts.get(function.name, 0))

    def close(self) -> None:
        pass


def controller(plans: dict[str, RolePlan], backlog: Backlog, clock: list[float], **kwargs: Any) -> tuple[
        ScaleController, list[InstanceId], list[InstanceId]]:
    started: list[InstanceId] = []
    stopped: list[InstanceId] = []

    class Handle:
        def __init__(self, instance: InstanceId) -> None:
            self.instance = instance

        def signal(self) -> None:
            pass

    def start(plan: RolePlan, instance: InstanceId) -> Handle:
        started.append(instance)
        return Handle(instance)

    def stop(handle: Handle, timeout: float | None = None) -> None:
        stopped.append(handle.instance)

    options = ScaleOptions(interval=3600, cold_start=0.0, scale_in_delay=5.0)
    scaler = ScaleController(plans, options, backlog, start, stop, clock=lambda: clock[0], **kwargs)  # type: ignore[arg-type]
    return scaler, started, stopped


def test_targets_follow_the_trigger_kind() -> None:
    assert target_per_instance(spec("q", queueName="a"), OPTIONS) == 2
    assert target_per_instance(spec("s", queueName="a", isSessionsEnabled=True), OPTIONS) == 3
    assert target_per_instance(spec("b", queueName="a", cardinality="many"), OPTIONS) == 50


def test_instances_start_at_the_lowest_free_index_and_the_highest_stops_first() -> None:
    plans = {"w": RolePlan("w", 4, OPTIONS, [spec("f", queueName="q")], max_instances=4)}
    backlog, clock = Backlog(), [0.0]
    scaler, started, stopped = controller(plans, backlog, clock)
    scaler.start()
    assert scaler.wait_live(5) and started == []  # no backlog, no instance
    backlog.counts["f"] = 5
    scaler.step()  # ceil(5 / 2) = 3
    assert scaler.wait_live(5) and sorted(i.index for i in started) == [0, 1, 2]
    backlog.counts["f"] = 1
    scaler.step()
    clock[0] = 5.0
    scaler.step()  # after the delay: down to 1, the highest indexes first (stopped in the background)
    assert wait_until(lambda: sorted(i.index for i in stopped) == [1, 2], 5.0, 0.01) and scaler.live("w") == 1
    backlog.counts["f"] = 8
    scaler.step()
    assert scaler.wait_live(5) and scaler.live("w") == 4 and scaler.peak("w") == 4
    assert sorted(i.index for i in started) == [0, 1, 1, 2, 2, 3]  # freed indexes are reused
    scaler.stop()


def test_timer_apps_keep_one_instance_and_always_ready_is_a_floor() -> None:
    plans = {"timer": RolePlan("timer", 1, OPTIONS, [spec("t", type="timerTrigger", schedule="* * * * * *")],
                               max_instances=1),
             "ready": RolePlan("ready", 5, OPTIONS, [spec("f", queueName="q")], max_instances=5)}
    scaler, started, _ = controller(plans, Backlog(), [0.0], always_ready={"ready": 2})
    scaler.start()
    assert scaler.wait_live(5)
    assert scaler.live("timer") == 1 and scaler.live("ready") == 2
    assert InstanceId("timer", 0) in started  # instance 0 runs the singleton timer
    scaler.stop()


def test_fixed_pools_start_whole_and_never_change() -> None:
    plans = {"w": RolePlan("w", 3, OPTIONS, [spec("f", queueName="q")], max_instances=3)}
    backlog, clock = Backlog(), [0.0]
    scaler, _, stopped = controller(plans, backlog, clock, fixed={"w": 3})
    scaler.start()
    assert scaler.wait_live(5) and scaler.live("w") == 3
    clock[0] = 100.0
    scaler.step()
    assert scaler.live("w") == 3 and not stopped and not scaler.events
    scaler.stop()
    assert len(stopped) == 3


def test_command_line_scale_options() -> None:
    import pytest

    from devhost.cli import parse_args, scale_options
    from devhost.scale_controller import DEFAULT_COLD_START, DEFAULT_SCALE_IN_DELAY
    from shared.settings import SettingsError

    default = scale_options(parse_args([]))
    assert default == ScaleOptions(cold_start=DEFAULT_COLD_START, scale_in_delay=DEFAULT_SCALE_IN_DELAY)
    assert scale_options(parse_args(["--fixed"])) is None
    assert scale_options(parse_args(["--cold-start", "0", "--scale-in-delay", "2"])) == ScaleOptions(
        cold_start=0.0, scale_in_delay=2.0)
    with pytest.raises(SettingsError, match="--cold-start"):
        scale_options(parse_args(["--cold-start", "-1"]))


def test_always_ready_is_read_from_the_bicep_when_set(tmp_path: Any) -> None:
    """Flex Consumption always-ready instances ("Flex Consumption plan hosting"): a floor for the app."""
    import pytest

    from devhost.scale import load_role_scales
    from shared.settings import SettingsError

    def bicep(ready: int) -> Any:
        path = tmp_path / f"main{ready}.bicep"
        path.write_text(f"""param workerMax int = 5
var functionApps = [
  {{
    role: 'worker'
    maximumInstanceCount: workerMax
    maxConcurrentCalls: 2
    alwaysReadyInstanceCount: {ready}
  }}
]
""")
        return path

    assert load_role_scales(bicep(2))["worker"].always_ready == 2
    with pytest.raises(SettingsError, match="alwaysReadyInstanceCount"):
        load_role_scales(bicep(6))


def test_an_app_that_executes_is_not_scaled_to_zero_until_it_has_been_idle() -> None:
    """Executions between decisions (the host's invocation stats) keep one instance although the
    backlog reads zero; once they stop for the scale-in delay the app goes to zero."""
    plans = {"w": RolePlan("w", 4, OPTIONS, [spec("f", queueName="q"), spec("other", queueName="q2")],
                          max_instances=4)}
    backlog, clock, done = Backlog(), [0.0], {"f": 0}
    scaler, _, stopped = controller(plans, backlog, clock,
                                    executions=lambda names: sum(done.get(n, 0) for n in names))
    backlog.counts["f"] = 3
    scaler.start()  # ceil(3 / 2) = 2 instances
    assert scaler.wait_live(5) and scaler.live("w") == 2
    backlog.counts["f"] = 0
    for second in range(1, 12):  # the instances keep up: the queue reads empty while they execute
        clock[0] = float(second)
        done["f"] += 5
        scaler.step()
    assert wait_until(lambda: scaler.live("w") == 1, 5.0, 0.01) and len(stopped) == 1
    for second in range(12, 30):  # no more executions
        clock[0] = float(second)
        scaler.step()
    assert wait_until(lambda: scaler.live("w") == 0, 5.0, 0.01)
    scaler.stop()


def test_an_instance_taken_away_is_replaced_only_when_the_backlog_asks() -> None:
    """The demo's failover: ``remove`` stops the highest live instance at once, as a crash would; the
    next decision starts a new one if the backlog still needs it (the platform replaces lost instances)."""
    plans = {"w": RolePlan("w", 4, OPTIONS, [spec("f", queueName="q")], max_instances=4)}
    backlog, clock = Backlog(), [0.0]
    scaler, started, stopped = controller(plans, backlog, clock)
    backlog.counts["f"] = 4
    scaler.start()
    assert scaler.wait_live(5) and scaler.live("w") == 2
    assert scaler.remove("w") == InstanceId("w", 1) and stopped == [InstanceId("w", 1)] and scaler.live("w") == 1
    scaler.step()  # ceil(4 / 2) = 2 again: a new instance 1
    assert scaler.wait_live(5) and scaler.live("w") == 2 and started.count(InstanceId("w", 1)) == 2
    backlog.counts["f"] = 0
    while scaler.remove("w") is not None:
        pass
    assert scaler.remove("w") is None  # nothing live: nothing to take away
