"""The priority strategies through the real Functions code under devhost, against sbemulator.

- ``aging``: with no low-priority consumer running, low messages are promoted after AGING_AFTER_SECONDS
  and the high pool processes them (their latency still counts as Low); started afterwards, the low
  consumer finds each promoted copy already active ("Messages not found" on cancel, as Service Bus
  answers for a scheduled message that is no longer scheduled) and completes the original without
  working on it twice.
- ``strict``: one app; a low message sent beside a slow high one is worked on only after the high one
  is done (the low function peeks the high subscription first).
- ``fifo``: both priorities arrive through the one queue.
"""

from __future__ import annotations

import pytest

from devhost.demo.metrics import TelemetryCollector
from devhost.host import ROOT, Host, HostOptions
from devhost.local_services import LocalServices
from sender.messages import build_messages
from sender.routing import route
from shared.topology import QUEUE_PRIORITY_FIFO, SUBSCRIPTION_LOW, TOPIC
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(180)


def _options(strategy: str, roles: tuple[str, ...], **settings: str) -> HostOptions:
    return HostOptions(roles=roles, use_local_settings=False, env={},
                       instances={role: 1 for role in roles},
                       overrides={"PRIORITY_STRATEGY": strategy, "CONSUMER_WORK_MS_HIGH": "0",
                                  "CONSUMER_WORK_MS_LOW": "0", **settings})


def _publish(host: Host, strategy: str, n_high: int, n_low: int, aging_after: float = 30) -> list[str]:
    messages = build_messages(n_high, n_low, ["tenant-1"])
    with host.service_bus_client() as client, client.get_topic_sender(TOPIC) as topic, \
            client.get_queue_sender(QUEUE_PRIORITY_FIFO) as fifo:
        route(strategy, messages, topic_sender=lambda: topic, fifo_sender=lambda: fifo, aging_after=aging_after)
    return [str(m.message_id) for m in messages]


@pytest.fixture
def emulator_connection():
    """One emulator process for two hosts in turn (a host stops the services it started itself)."""
    services = LocalServices()
    try:
        yield services.start_service_bus(ROOT / "infra" / "servicebus.json")
    finally:
        services.stop()


@pytest.mark.slow
def test_aging_promotes_waiting_low_messages_to_the_high_pool_and_never_works_twice(emulator_connection: str) -> None:
    high_options = _options("aging", ("consumer-high",), ServiceBusConnection=emulator_connection)
    with TelemetryCollector() as collector, Host(high_options) as host:
        assert host.wait_connected(60)
        ids = _publish(host, "aging", 0, 3, aging_after=1)
        assert wait_until(lambda: {s.message_id for s in collector.snapshot()} >= set(ids), 60), \
            "the promoted copies never reached the high pool"
        samples = [s for s in collector.snapshot() if s.message_id in ids]
        assert {(s.stage, s.priority) for s in samples} == {("consumer_high", "Low")}  # counted as Low
        assert all(s.latency_ms >= 1000 for s in samples)  # not before they were due
        with host.service_bus_client() as client, client.get_subscription_receiver(TOPIC, SUBSCRIPTION_LOW) as low:
            assert len(low.peek_messages(max_message_count=10)) == 3  # the originals still wait there
    low_options = _options("aging", ("consumer-low",), ServiceBusConnection=emulator_connection)
    with TelemetryCollector() as collector, Host(low_options) as host:
        def drained() -> bool:
            with host.service_bus_client() as client, client.get_subscription_receiver(TOPIC, SUBSCRIPTION_LOW) as r:
                return not r.peek_messages(max_message_count=10)

        assert wait_until(drained, 60), "the low consumer did not complete the promoted originals"
        assert [s for s in collector.snapshot() if s.message_id in ids] == []  # completed without working
        assert host.stats.by_function()["consumer_low"]["succeeded"] == 3


def test_strict_works_on_low_only_after_high_is_done() -> None:
    options = _options("strict", ("consumer-high",), CONSUMER_WORK_MS_HIGH="2000")
    with TelemetryCollector() as collector, Host(options) as host:
        assert host.wait_connected(60)
        assert sorted(spec.name for spec in host.plans["consumer-high"].specs) == ["consumer_high", "consumer_low"]
        ids = _publish(host, "strict", 1, 1)
        assert wait_until(lambda: {s.message_id for s in collector.snapshot()} >= set(ids), 60)
        done = {s.priority: s.at for s in collector.snapshot() if s.message_id in ids}
    assert done["Low"] >= done["High"]  # the low one waited for the slow high one to finish


def test_fifo_carries_both_priorities_through_the_one_queue() -> None:
    with TelemetryCollector() as collector, Host(_options("fifo", ("consumer-high", "consumer-low"))) as host:
        assert list(host.plans) == ["consumer-high"]  # consumer-low has nothing to run under fifo
        assert host.wait_connected(60)
        ids = _publish(host, "fifo", 2, 2)
        assert wait_until(lambda: {s.message_id for s in collector.snapshot()} >= set(ids), 60)
        samples = [s for s in collector.snapshot() if s.message_id in ids]
    assert {s.stage for s in samples} == {"consumer_fifo"} and {s.priority for s in samples} == {"High", "Low"}
