"""The scale rule on the cases the Azure Functions docs describe.

Pages: "Target-based scaling" (desired instances = event source length / target executions per
instance; up to four instances added per decision; the Service Bus targets come from host.json
maxConcurrentCalls / maxConcurrentSessions / maxMessageBatchSize; the scale limit still applies;
functions of one app are summed) and "Event-driven scaling in Azure Functions" (an idle app scales
in to zero; Flex Consumption always-ready instances). The clock is a number passed in.
"""

from __future__ import annotations

import pytest

from devhost.scaling import (
    DEFAULT_TARGETS,
    MAX_INSTANCES_ADDED_PER_DECISION,
    ScaleLimits,
    ScaleState,
    decide,
    desired_instances,
)


def limits(max_instances: int = 40, target: int = 16, **kwargs) -> ScaleLimits:
    return ScaleLimits(max_instances=max_instances, targets={"f": target}, **kwargs)


def test_documented_defaults() -> None:
    assert MAX_INSTANCES_ADDED_PER_DECISION == 4
    assert DEFAULT_TARGETS == {"maxConcurrentCalls": 16, "maxConcurrentSessions": 8, "maxMessageBatchSize": 1000}


@pytest.mark.parametrize(("backlog", "target", "expected"), [
    (0, 16, 0), (1, 16, 1), (16, 16, 1), (17, 16, 2), (160, 16, 10),
    (9, 8, 2),  # session trigger: maxConcurrentSessions
    (1000, 1000, 1), (1001, 1000, 2),  # batch trigger: maxMessageBatchSize
])
def test_desired_is_backlog_over_target_rounded_up(backlog: int, target: int, expected: int) -> None:
    assert desired_instances({"f": backlog}, limits(target=target)) == expected


def test_desired_is_capped_by_maximum_instance_count() -> None:
    assert desired_instances({"f": 20_000}, limits(max_instances=5, target=2)) == 5


def test_functions_of_one_app_are_summed() -> None:
    both = ScaleLimits(max_instances=100, targets={"a": 16, "b": 8})
    assert desired_instances({"a": 32, "b": 9}, both) == 2 + 2


def test_scale_out_adds_at_most_four_per_decision() -> None:
    rule = limits(max_instances=40, target=16)
    first = decide(ScaleState(0), {"f": 16 * 40}, now=0.0, limits=rule)
    assert (first.previous, first.instances, first.desired) == (0, 4, 40)
    assert "at most 4" in first.reason
    second = decide(first.state, {"f": 16 * 40}, now=1.0, limits=rule)
    assert second.instances == 8


def test_scale_out_reaches_the_limit_and_stops_there() -> None:
    rule = limits(max_instances=5, target=2)
    state = ScaleState(0)
    seen = []
    for second in range(4):
        decision = decide(state, {"f": 20_000}, now=float(second), limits=rule)
        state = decision.state
        seen.append(decision.instances)
    assert seen == [4, 5, 5, 5]


def test_scale_in_waits_for_the_delay_then_goes_to_zero() -> None:
    rule = limits(target=16, scale_in_delay=30.0)
    state = ScaleState(6)
    pending = decide(state, {"f": 0}, now=100.0, limits=rule)
    assert pending.instances == 6 and "pending" in pending.reason
    still = decide(pending.state, {"f": 0}, now=129.9, limits=rule)
    assert still.instances == 6
    done = decide(still.state, {"f": 0}, now=130.0, limits=rule)
    assert done.instances == 0 and done.changed and done.state.below_since is None


def test_scale_in_goes_to_the_desired_count_not_below() -> None:
    rule = limits(target=16, scale_in_delay=0.0)
    decision = decide(ScaleState(6), {"f": 20}, now=0.0, limits=rule)
    assert decision.instances == 2


def test_an_app_that_keeps_up_with_a_stream_is_not_idle() -> None:
    """Event-driven scaling: the platform scales to zero "once your function app has been idle for a
    number of minutes". Instances that keep up leave an active count of zero while they execute all the
    time: that is work, not idleness, so the app keeps one instance."""
    rule = limits(target=16, scale_in_delay=10.0)
    state = ScaleState(3)
    for second in range(0, 60, 1):  # a steady stream: empty queue, executions every second
        decision = decide(state, {"f": 0}, now=float(second), limits=rule, active=True)
        state = decision.state
    assert decision.instances == 1 and decision.desired == 1
    quiet = [decide(state, {"f": 0}, now=60.0 + t, limits=rule) for t in (0.0, 9.0)]
    assert [d.instances for d in quiet] == [1, 1]  # idle for less than the delay
    state = quiet[-1].state
    for t in (10.0, 20.0):  # idle since 59 s: desired 0, and then the delay of the step to zero
        decision = decide(state, {"f": 0}, now=60.0 + t, limits=rule)
        state = decision.state
    assert decision.instances == 0


def test_a_new_burst_cancels_a_pending_scale_in() -> None:
    rule = limits(target=16, scale_in_delay=30.0)
    pending = decide(ScaleState(4), {"f": 0}, now=0.0, limits=rule)
    busy = decide(pending.state, {"f": 64}, now=10.0, limits=rule)
    assert busy.instances == 4 and busy.state.below_since is None
    again = decide(busy.state, {"f": 0}, now=35.0, limits=rule)
    assert again.instances == 4  # the delay starts over


def test_always_ready_instances_are_a_floor() -> None:
    rule = limits(target=16, min_instances=2, scale_in_delay=0.0)
    assert decide(ScaleState(0), {"f": 0}, now=0.0, limits=rule).instances == 2
    assert decide(ScaleState(5), {"f": 0}, now=0.0, limits=rule).instances == 2


def test_an_app_with_only_a_timer_keeps_one_instance() -> None:
    timer_app = ScaleLimits(max_instances=1, targets={}, min_instances=1, scale_in_delay=0.0)
    decision = decide(ScaleState(0), {}, now=0.0, limits=timer_app)
    assert decision.instances == 1
    assert decide(decision.state, {}, now=100.0, limits=timer_app).instances == 1


def test_a_lowered_limit_applies_at_once() -> None:
    decision = decide(ScaleState(10), {"f": 1000}, now=0.0, limits=limits(max_instances=3))
    assert decision.instances == 3


def test_decision_describes_its_inputs() -> None:
    text = decide(ScaleState(0), {"f": 33}, now=0.0, limits=limits(target=16)).describe()
    assert "0 -> 3" in text and "f=33" in text and "desired 3" in text


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        ScaleLimits(max_instances=0)
    with pytest.raises(ValueError):
        ScaleLimits(max_instances=2, min_instances=3)
    with pytest.raises(ValueError):
        ScaleLimits(max_instances=2, targets={"f": 0})
    with pytest.raises(KeyError):
        desired_instances({"g": 1}, limits())
