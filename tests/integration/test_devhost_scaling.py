"""The scale controller under a burst: an app grows to its limit and back to zero.

Follows "Target-based scaling" (Azure Functions docs): desired instances = active messages /
maxConcurrentCalls, at most four added per decision, never above maximumInstanceCount; an idle app
scales in to zero. The backlog is read through the emulator's management endpoint
(ServiceBusAdministrationClient runtime properties), as the platform reads it. Delays are short
(cold start 0.2 s, scale-in after 1 s) so the test waits only as long as the behaviour needs.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import azure.functions as func
import pytest
from azure.servicebus import ServiceBusMessage

from devhost.host import Host, HostOptions
from devhost.scale import RoleScale
from devhost.scale_controller import ScaleOptions
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
FAST = ScaleOptions(interval=0.3, cold_start=0.2, scale_in_delay=1.0)


def _topology(tmp_path: Path) -> Path:
    doc = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": "work", "Properties": {"LockDuration": "PT30S"}},
        {"Name": "groups", "Properties": {"RequiresSession": True, "LockDuration": "PT30S"}},
    ], "Topics": []}], "Logging": {"Type": "Console"}}}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    return path


def _slow_app(done: list[str], lock: threading.Lock, queue: str = "work", sessions: bool = False) -> func.FunctionApp:
    app = func.FunctionApp()

    @app.function_name("slow")
    @app.service_bus_queue_trigger(arg_name="message", queue_name=queue, connection="ServiceBusConnection",
                                   is_sessions_enabled=sessions)
    def slow(message: func.ServiceBusMessage) -> None:
        time.sleep(0.05)
        with lock:
            done.append(message.message_id)

    return app


def test_a_burst_grows_the_app_to_its_limit_and_idle_brings_it_to_zero(tmp_path: Path) -> None:
    done: list[str] = []
    lock = threading.Lock()
    options = HostOptions(roles=(), use_local_settings=False, env={}, topology=_topology(tmp_path), scale=FAST,
                          extra_apps={"burst": (_slow_app(done, lock), RoleScale("burst", 6, 1))})
    with Host(options) as host:
        scaler = host.scaler
        assert scaler is not None and scaler.live("burst") == 0  # nothing to do: no instance
        assert scaler.backlog.source == "runtime properties"
        with host.service_bus_client() as client, client.get_queue_sender("work") as sender:
            sender.send_messages([ServiceBusMessage(b"x", message_id=f"m-{i}") for i in range(200)])
        assert wait_until(lambda: scaler.live("burst") == 6, 30), f"never reached the limit: {scaler.events}"
        assert wait_until(lambda: len(done) >= 200, 60)
        assert wait_until(lambda: scaler.live("burst") == 0, 15), f"never scaled to zero: {scaler.events}"
        events = scaler.events_of("burst")
        peak = scaler.peak("burst")
    assert peak == 6
    out = [e for e in events if e.instances > e.previous]
    assert out[0].previous == 0 and out[0].instances == 4  # at most four added per decision
    assert all(e.instances - e.previous <= 4 and e.instances <= 6 for e in out)
    assert out[0].backlogs["slow"] > 0 and out[0].desired == 6
    assert events[-1].instances == 0 and "scale in" in events[-1].reason
    assert sorted(set(done)) == sorted(f"m-{i}" for i in range(200))


def test_a_session_trigger_scales_on_max_concurrent_sessions(tmp_path: Path) -> None:
    """Target for a session trigger: maxConcurrentSessions (host.json), here 8 by default."""
    done: list[str] = []
    lock = threading.Lock()
    options = HostOptions(roles=(), use_local_settings=False, env={}, topology=_topology(tmp_path), scale=FAST,
                          extra_apps={"grouped": (_slow_app(done, lock, "groups", True), RoleScale("grouped", 3, 1))})
    with Host(options) as host:
        scaler = host.scaler
        assert scaler is not None and scaler.apps["grouped"].limits.targets == {"slow": 8}
        with host.service_bus_client() as client, client.get_queue_sender("groups") as sender:
            sender.send_messages([ServiceBusMessage(b"x", message_id=f"s-{i}", session_id=f"g-{i % 4}")
                                  for i in range(20)])
        assert wait_until(lambda: len(done) >= 20, 60)
        events = scaler.events_of("grouped")
    assert events and events[0].desired == 3 and events[0].backlogs["slow"] == 20  # ceil(20 / 8) = 3


def test_fixed_pools_run_their_size_from_the_start(tmp_path: Path) -> None:
    done: list[str] = []
    lock = threading.Lock()
    options = HostOptions(roles=(), use_local_settings=False, env={}, topology=_topology(tmp_path), scale=FAST,
                          instances={"burst": 2},
                          extra_apps={"burst": (_slow_app(done, lock), RoleScale("burst", 6, 1))})
    with Host(options) as host:
        assert host.wait_connected(30)
        scaler = host.scaler
        assert scaler is not None and scaler.live("burst") == 2 and scaler.limit("burst") == 2
        time.sleep(1.0)  # idle longer than the scale-in delay: a fixed pool stays
        assert scaler.live("burst") == 2 and not scaler.events_of("burst")
