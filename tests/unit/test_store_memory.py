"""The in-memory mode's store implements the whole store interface and keeps nothing."""

from __future__ import annotations

import inspect

from sbemulator.broker.core import Broker
from sbemulator.config import parse_config
from sbemulator.model import IncomingMessage
from sbemulator.store.base import Store
from sbemulator.store.memory import MemoryStore


def test_every_method_of_the_store_interface_is_implemented() -> None:
    wanted = {name for name, _ in inspect.getmembers(Store, inspect.isfunction) if not name.startswith("_")}
    missing = {name for name in wanted if not callable(getattr(MemoryStore, name, None))}
    assert not missing, f"MemoryStore lacks {sorted(missing)}"


def test_a_broker_on_the_memory_store_works_and_a_new_one_starts_empty() -> None:
    config = parse_config({"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": {}}],
                                                         "Topics": []}], "Logging": {"Type": "Console"}}}, "<test>")
    store = MemoryStore()
    broker = Broker(config, store)
    broker.send("q", [IncomingMessage(body_raw=b"\x00\x53\x77\x40", message_id="m-1", size=4)])
    broker.commit()
    assert broker.message_count("q") == 1
    assert Broker(config, store).message_count("q") == 0  # nothing was kept for a restart
