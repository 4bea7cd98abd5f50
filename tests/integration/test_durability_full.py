"""``--durability full`` with the real Python SDK (docs/emulator.md, "Durability"): what is confirmed is
fsynced first (SQLite ``synchronous=FULL``, the delivery journal msynced), and the connections flushed
in one event-loop turn share one commit (group commit), so concurrent clients share an fsync.

What the OS-crash guarantee rests on is shown at the store layer (tests/unit/test_store_os_crash.py);
here: the mode runs end to end (sends, completions, a restart keeps what was confirmed), the journal
is synced before completions are confirmed, and concurrent clients' operations are committed together.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.runtime.server import AmqpServer
from sbemulator.store.journal import DeliveryJournal
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive

CLIENTS = 8
EACH = 25


def test_full_durability_syncs_before_confirming_and_shares_commits_between_clients(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = 0
    groups: list[int] = []
    real_sync, real_flush = DeliveryJournal.sync, AmqpServer._flush_group

    def sync(self: DeliveryJournal) -> None:
        nonlocal syncs
        real_sync(self)
        syncs += 1

    def flush_group(self: AmqpServer) -> None:
        groups.append(len(self._group))
        real_flush(self)

    monkeypatch.setattr(DeliveryJournal, "sync", sync)
    monkeypatch.setattr(AmqpServer, "_flush_group", flush_group)
    data = tmp_path / "data"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False,
                  durability="full") as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client, \
                client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(CLIENTS * EACH + 10)])
        errors: list[BaseException] = []
        completed: list[str] = []
        start = threading.Barrier(CLIENTS)

        def complete_some() -> None:
            try:
                with ServiceBusClient.from_connection_string(emu.connection_string) as own, \
                        own.get_queue_receiver("orders", prefetch_count=0) as receiver:
                    got = receive(receiver, EACH)
                    start.wait(timeout=60)
                    for m in got:
                        receiver.complete_message(m)
                        completed.append(str(m.message_id))
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        threads = [threading.Thread(target=complete_some) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert syncs > 0  # completions went through the journal's msync
        assert max(groups) > 1, "no two connections ever shared a commit"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False,
                  durability="full") as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client, \
            client.get_queue_receiver("orders", max_wait_time=2) as receiver:
        left = receive(receiver, 20, wait=3)
    assert len(completed) == CLIENTS * EACH
    assert sorted(str(m.message_id) for m in left) == sorted(
        {f"m{i}" for i in range(CLIENTS * EACH + 10)} - set(completed))
