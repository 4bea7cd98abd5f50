"""Settlements on a full or failing store, with the real Python SDK: a completion the SDK was told
succeeded never comes back, whatever the store met (a full disk, a read-only database, an I/O error)
and however the emulator stopped (SIGTERM, SIGKILL); one the store could not keep is refused with
ServerBusy, and its message stays locked by the same receiver.

What it follows: azure-servicebus 7.15+ waits for the broker's disposition before ``complete_message``
returns (``ServiceBusReceiver._settle_message``), and Service Bus deletes a message once it confirmed
its completion ("Message transfers, locks, and settlement": "the message is removed from the queue"
on a successful complete). ServerBusy (``com.microsoft:server-busy`` -> ``ServiceBusServerBusyError``) is
what Service Bus answers when it cannot do an operation now, and the SDKs retry it ("Service Bus
messaging exceptions", ServerBusyException).

The full-disk tests need root (a small tmpfs is mounted); the read-only and I/O-error ones inject what
SQLite raises into the store's connection (tests/integration/test_store_faults.py's injection), so the
store's own commit, journal and refusal paths run.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus.exceptions import ServiceBusServerBusyError

from sbemulator import Emulator
from sbemulator.runtime.launcher import start_emulator_process
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.fixtures.filesystem import fill_filesystem
from tests.fixtures.tmpfs import small_tmpfs
from tests.integration.test_store_faults import Faults, faults  # noqa: F401  (the fixture)

SENT = 3000  # more completions than the delivery journal holds (64 KiB, ~2,200 of them) while nothing folds


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "8m", "the injected faults below cover the rest") as target:
        yield target


def _send(client: ServiceBusClient, count: int) -> list[str]:
    ids = [f"fill-{i}" for i in range(1000, 1000 + count)]
    with client.get_queue_sender("orders") as sender:
        for start in range(0, count, 100):
            sender.send_messages([ServiceBusMessage("x" * 200, message_id=mid) for mid in ids[start:start + 100]])
    return ids


def _complete_all(client: ServiceBusClient, limit: int) -> tuple[list[str], list[str]]:
    """Complete up to ``limit`` messages one by one, as an application does: (confirmed, refused). A
    refused one must still be locked by this receiver: its lock renews."""
    confirmed: list[str] = []
    refused: list[str] = []
    with client.get_queue_receiver("orders", max_wait_time=5, prefetch_count=0) as receiver:
        while len(confirmed) + len(refused) < limit:
            batch: list[ServiceBusReceivedMessage] = receiver.receive_messages(max_message_count=100, max_wait_time=5)
            if not batch:
                break
            for m in batch:
                try:
                    receiver.complete_message(m)
                except ServiceBusServerBusyError:
                    refused.append(str(m.message_id))
                    receiver.renew_message_lock(m)  # still this receiver's: the refusal changed nothing
                else:
                    confirmed.append(str(m.message_id))
            if len(refused) >= 20:
                break
    return confirmed, refused


def _stored_ids(connection_string: str) -> list[str]:
    ids: list[str] = []
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_receiver("orders") as receiver:
        last = 0
        while batch := receiver.peek_messages(max_message_count=250, sequence_number=last + 1):
            ids += [str(m.message_id) for m in batch]
            last = batch[-1].sequence_number or last
    return ids


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_no_completion_confirmed_on_a_full_disk_comes_back_after_a_restart(small_fs: Path, stop: str) -> None:
    """The issue's scenario: a durable emulator on an 8 MB file system that another file fills;
    completions go on while it is full; the emulator stops (SIGTERM or SIGKILL); space is freed; it
    restarts. Every message whose completion was confirmed is gone; every other one is there, once."""
    data = small_fs / "data"
    config = small_fs.parent / "topology.json"
    config.write_text(json.dumps(STANDARD_TOPOLOGY))
    proc = start_emulator_process("--config", str(config), "--data-dir", str(data), "--no-websocket", "--no-admin")
    try:
        with ServiceBusClient.from_connection_string(proc.connection_string, retry_total=0) as client:
            sent = _send(client, SENT)
            fill_filesystem(small_fs / "filler")
            confirmed, refused = _complete_all(client, SENT)
    finally:
        if stop == "sigkill":
            proc.kill()
            output = "".join(proc.output)
        else:
            assert proc.terminate() == 0
            output = "".join(proc.output) + (proc.process.stdout.read() if proc.process.stdout else "")
    assert "Traceback" not in output, output
    assert confirmed, "no completion was confirmed on the full disk (the journal takes them)"
    (small_fs / "filler").unlink()
    again = start_emulator_process("--config", str(config), "--data-dir", str(data), "--no-websocket",
                                   "--no-admin")
    try:
        stored = _stored_ids(again.connection_string)
    finally:
        assert again.terminate() == 0
    back = set(confirmed) & set(stored)
    assert not back, f"{len(back)} confirmed completions came back: {sorted(back)[:5]}"
    assert len(stored) == len(set(stored))  # none twice
    assert set(stored) == set(sent) - set(confirmed)  # the refused and the untouched ones are all kept
    assert refused, f"all {len(confirmed)} completions were confirmed: the journal never ran out of room"


READ_ONLY = sqlite3.OperationalError("attempt to write a readonly database")
READ_ONLY.sqlite_errorcode = 8  # SQLITE_READONLY
IO_ERROR = sqlite3.OperationalError("disk I/O error")
IO_ERROR.sqlite_errorcode = 10  # SQLITE_IOERR


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the shutdown's write fails
@pytest.mark.parametrize("fault", [READ_ONLY, IO_ERROR], ids=["read-only", "io-error"])
def test_no_completion_confirmed_while_sqlite_cannot_write_comes_back(
        faults: Faults, tmp_path: Path, fault: sqlite3.Error) -> None:  # noqa: F811
    """SQLite refuses every write (a read-only remount, an I/O error): completions go on through the
    delivery journal until it is full, then are refused with ServerBusy; after a restart with SQLite
    writing again, no confirmed completion is back and every refused one is."""
    data = tmp_path / "data"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False) as emu, \
            ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        sent = _send(client, SENT)
        faults.fail(fault)
        confirmed, refused = _complete_all(client, SENT)
        # still failing at shutdown: what is not written stays in the journal or is delivered again
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False) as again:
        stored = _stored_ids(again.connection_string)
    assert not set(confirmed) & set(stored)
    assert set(stored) == set(sent) - set(confirmed)
    assert confirmed and refused  # the journal took completions, then refused those it had no room for


@pytest.mark.parametrize("fault", [READ_ONLY, IO_ERROR], ids=["read-only", "io-error"])
def test_a_dead_lettering_sqlite_cannot_write_is_refused_and_the_message_stays_locked(
        faults: Faults, tmp_path: Path, fault: sqlite3.Error) -> None:  # noqa: F811
    """A dead-lettering writes a new row: while SQLite cannot write it is refused with ServerBusy (not
    confirmed and then lost), the message stays locked by the receiver, and once SQLite writes again the
    same message dead-letters."""
    data = tmp_path / "data"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), data_dir=data, in_memory=False) as emu, \
            ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
        _send(client, 1)
        with client.get_queue_receiver("orders", max_wait_time=5) as receiver:
            [m] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            faults.fail(fault)
            with pytest.raises(ServiceBusServerBusyError):
                receiver.dead_letter_message(m, reason="poison")
            receiver.renew_message_lock(m)  # still locked by this receiver
            faults.fail(None)
            receiver.dead_letter_message(m, reason="poison")
