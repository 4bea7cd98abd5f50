"""A durable emulator on a real, small file system that fills up (a tmpfs of a few MB mounted for the
test): every send the SDK was told was stored is received exactly once, no refused send is ever
delivered (also not after a restart), the connection is kept throughout, and the emulator takes sends
again by itself once the file system has room (the tmpfs is remounted larger; no restart).

Needs root to mount a tmpfs; skipped otherwise (tests/integration/test_store_faults.py injects the same
failures without mounting anything).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusQuotaExceededError, ServiceBusServerBusyError

from sbemulator import Emulator
from sbemulator.runtime.launcher import start_emulator_process
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive
from tests.fixtures.filesystem import fill_filesystem
from tests.fixtures.tmpfs import mount_tmpfs, small_tmpfs

BODY = "x" * (16 * 1024)
MAX_SENDS = 400  # 6.4 MB of bodies: more than the file system holds


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "3m", "the fault-injection tests cover the rest") as target:
        yield target


def _drain(client: ServiceBusClient, wait: float = 2) -> list[str]:
    got: list[str] = []
    with client.get_queue_receiver("orders", max_wait_time=wait) as receiver:
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=wait):
            for m in batch:
                got.append(str(m.message_id))
                receiver.complete_message(m)
    return got


@pytest.mark.slow
def test_a_filling_disk_refuses_sends_keeps_every_acknowledged_one_and_recovers(small_fs: Path) -> None:
    data = small_fs / "data"
    acknowledged: list[str] = []
    refused: list[str] = []
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False) as emu, \
            ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            for i in range(MAX_SENDS):
                mid = f"m{i}"
                try:
                    sender.send_messages(ServiceBusMessage(BODY, message_id=mid))
                except (ServiceBusQuotaExceededError, ServiceBusServerBusyError):
                    refused.append(mid)
                    if len(refused) >= 5:
                        break
                else:
                    acknowledged.append(mid)
            assert refused, f"{MAX_SENDS} sends of {len(BODY)} bytes all fitted on a 3 MB file system"
            assert acknowledged

            # Space comes back (the file system grows); the same connection and sender go on.
            assert mount_tmpfs(small_fs, "64m", remount=True).returncode == 0
            for i in range(MAX_SENDS, MAX_SENDS + 20):
                sender.send_messages(ServiceBusMessage(BODY, message_id=f"m{i}"))
                acknowledged.append(f"m{i}")
        received = _drain(client)
    assert sorted(received) == sorted(acknowledged)  # each acknowledged send once, no refused one
    assert not set(received) & set(refused)
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False) as again, \
            ServiceBusClient.from_connection_string(again.connection_string) as client:
        assert _drain(client, wait=1) == []  # nothing refused (or completed) comes back after a restart


def _ids(client: ServiceBusClient, sub_queue: ServiceBusSubQueue | None = None) -> list[str]:
    ids: list[str] = []
    with client.get_queue_receiver("orders", sub_queue=sub_queue) as receiver:
        last = 0
        while batch := receiver.peek_messages(max_message_count=250, sequence_number=last + 1):
            ids += [str(m.message_id) for m in batch]
            last = batch[-1].sequence_number or last
    return ids


@pytest.mark.slow
def test_sigterm_on_a_full_disk_keeps_every_confirmed_settlement_and_each_acknowledged_send_once(
    small_fs: Path,
) -> None:
    """docs/emulator.md, "Limits and faults" (Shutdown on a full disk): on a full disk a completion is
    confirmed (its record goes to the delivery journal, allocated up front) and a dead-lettering, a new
    row the disk cannot take, is refused with ServerBusy, its message still locked by the receiver;
    SIGTERM exits 0; once the disk has room, a restart holds every acknowledged send exactly once
    except the completed ones, the ones whose dead-lettering was refused back in the queue."""
    data = small_fs / "data"
    config = str(small_fs.parent / "topology.json")
    Path(config).write_text(json.dumps(STANDARD_TOPOLOGY))
    proc = start_emulator_process("--config", config, "--data-dir", str(data), "--no-websocket", "--no-admin")
    acknowledged: list[str] = []
    completed: list[str] = []
    try:
        with ServiceBusClient.from_connection_string(proc.connection_string, retry_total=0) as client:
            with client.get_queue_sender("orders") as sender:
                for i in range(MAX_SENDS):
                    try:
                        sender.send_messages(ServiceBusMessage(BODY, message_id=f"m{i}"))
                    except (ServiceBusQuotaExceededError, ServiceBusServerBusyError):
                        break
                    acknowledged.append(f"m{i}")
            assert 5 < len(acknowledged) < MAX_SENDS
            with client.get_queue_receiver("orders") as receiver:
                got = receive(receiver, 5)
                fill_filesystem(small_fs / "filler")  # nothing left for SQLite
                for m in got[:3]:  # a completion goes to the delivery journal, allocated up front
                    receiver.complete_message(m)
                    completed.append(str(m.message_id))
                for m in got[3:5]:  # a dead-lettering is a new row: refused, the message stays locked
                    with pytest.raises(ServiceBusServerBusyError):
                        receiver.dead_letter_message(m, reason="full-disk")
                    receiver.renew_message_lock(m)
    finally:
        status = proc.terminate()
    output = "".join(proc.output) + (proc.process.stdout.read() if proc.process.stdout else "")
    assert status == 0, output
    assert "Traceback" not in output
    (small_fs / "filler").unlink()
    assert mount_tmpfs(small_fs, "64m", remount=True).returncode == 0
    again = start_emulator_process("--config", config, "--data-dir", str(data), "--no-websocket", "--no-admin")
    try:
        with ServiceBusClient.from_connection_string(again.connection_string) as client:
            stored = _ids(client)
            dead = _ids(client, ServiceBusSubQueue.DEAD_LETTER)
    finally:
        assert again.terminate() == 0
    assert dead == []  # no refused dead-lettering was written later
    assert len(stored) == len(set(stored))  # none twice
    assert sorted(stored) == sorted(set(acknowledged) - set(completed))  # every acknowledged one, once
