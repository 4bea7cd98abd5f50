"""Failover of the per-tenant ordered writer: the instance holding a tenant's session dies mid-stream.

Two devhost processes run the ``ordered`` role (the real Function, session-enabled trigger, one
session per instance) against sbemulator and a real Azurite. One of them (A) takes tenant ``t-fail``'s
session and starts applying its writes; the other (B) keeps asking for a session. A is failed while it
is in the middle of the stream (it holds the session lock and usually a message it has not
settled). B must take the session over once the broker frees it (at the latest when the lock, 4 s in
this topology, runs out) and finish the stream. The table then shows every sequence applied exactly
once and in order, A's rows before B's: the duplicate a redelivery may bring is completed, not applied.

Documented behaviour this follows: "Message sessions" (Service Bus docs: a session is locked to one
receiver; the lock expires after LockDuration if not renewed, and the session can then be accepted by
another receiver; messages of a session are delivered in order) and the Functions Service Bus trigger
with ``isSessionsEnabled`` (one session per concurrent slot, ``maxConcurrentSessions`` per instance).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusSubQueue

from consumers.ordered import build_ordered_messages, settle_ordered
from consumers.ordered_table import STATE_ROW, TableSequenceStore, audit_table
from consumers.settlement import ReceiverActions
from sbemulator import Emulator
from shared.clients import table_service_client
from shared.settings import TableSettings
from tests.fixtures.azurite import Azurite
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parents[2]
LOCK_SECONDS = 4
QUEUE = "ordered-writes"
TENANT = "t-fail"
WRITES = 40


def _topology(tmp_path: Path) -> Path:
    doc = {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [
        {"Name": QUEUE, "Properties": {"RequiresSession": True, "LockDuration": f"PT{LOCK_SECONDS}S",
                                       "MaxDeliveryCount": 10}},
    ], "Topics": []}], "Logging": {"Type": "Console"}}}
    path = tmp_path / "topology.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def namespace(tmp_path: Path) -> Iterator[str]:
    with Emulator(config=str(_topology(tmp_path)), in_memory=True) as emu:
        yield emu.connection_string


@pytest.fixture
def table(azurite: Azurite) -> Iterator[Any]:
    name = "f" + uuid.uuid4().hex[:16]
    settings = TableSettings(table_name=name, connection_string=azurite.connection_string)
    with table_service_client(settings) as service:
        yield service.get_table_client(name)


def _ledger(table: Any) -> list[dict[str, Any]]:
    try:
        return [row for row in table.list_entities() if row["RowKey"] != STATE_ROW]
    except Exception:  # the writer creates the table on its first write
        return []


def _wait(predicate: Any, timeout: float, what: str) -> None:
    if not wait_until(predicate, timeout):
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _start_instance(tmp_path: Path, name: str, namespace: str, azurite: Azurite, table: Any) -> subprocess.Popen:
    settings = tmp_path / "empty.settings.json"
    settings.write_text(json.dumps({"IsEncrypted": False, "Values": {}}))
    env = {
        **os.environ,
        "ServiceBusConnection": namespace,
        "TableStorageConnection": azurite.connection_string,
        "ORDERED_TABLE": table.table_name,
        "ORDERED_WORK_MS": "100",  # long enough to be killed in the middle of the stream
        "AzureFunctionsJobHost__extensions__serviceBus__maxConcurrentSessions": "1",
        "AzureFunctionsJobHost__extensions__serviceBus__sessionIdleTimeout": "00:00:02",
    }
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process below
    process = subprocess.Popen(
        [sys.executable, "-m", "devhost", "--roles", "ordered", "--instances", "ordered=1",
         "--settings", str(settings), "--log-level", "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    process.log = log  # type: ignore[attr-defined]
    return process


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    process.log.close()  # type: ignore[attr-defined]


def _writer_pid(row: dict[str, Any]) -> int:
    return int(str(row["AppliedBy"]).split(":")[1])


@pytest.mark.parametrize("failure", ["sigkill", "sigstop"])
def test_the_session_holder_fails_mid_stream_and_another_instance_finishes_without_double_or_out_of_order_writes(
    tmp_path: Path, namespace: str, azurite: Azurite, table: Any, failure: str
) -> None:
    """``sigkill``: the process dies, its connection closes. ``sigstop``: it freezes with its connection
    open, so nothing is released until the session lock runs out; then it is resumed as a zombie that
    still believes it holds the session, and must not apply anything on top of B's writes."""
    instances = [_start_instance(tmp_path, name, namespace, azurite, table) for name in ("one", "two")]
    try:
        for name in ("one", "two"):
            _wait(lambda n=name: "running ordered" in (tmp_path / f"{n}.log").read_text(), 60, f"instance {name}")
        with ServiceBusClient.from_connection_string(namespace) as client, client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(build_ordered_messages(TENANT, [f"v{i}" for i in range(WRITES)]))
        _wait(lambda: len(_ledger(table)) >= 5, 60, "the first writes to be applied")
        (holder_pid,) = {_writer_pid(row) for row in _ledger(table)}  # one instance holds the session
        a = next(p for p in instances if p.pid == holder_pid)
        b = next(p for p in instances if p.pid != holder_pid)
        time.sleep(0.5)  # the other instance keeps asking for a session meanwhile
        before_kill = _ledger(table)
        assert {_writer_pid(row) for row in before_kill} == {a.pid}, "B got the session while A held it"
        assert len(before_kill) < WRITES, "the stream finished before the failure: raise ORDERED_WORK_MS"
        failed_at = time.monotonic()
        a.send_signal(signal.SIGKILL if failure == "sigkill" else signal.SIGSTOP)
        if failure == "sigkill":
            a.wait(timeout=10)
        # A may still land a write it had in flight when the signal came: wait for B's own first write
        _wait(lambda: any(_writer_pid(row) == b.pid for row in _ledger(table)), 60, "instance B to take over")
        takeover = time.monotonic() - failed_at
        _wait(lambda: len(_ledger(table)) >= WRITES, 90, "instance B to finish the stream")
        print(f"{failure}: B applied its first write {takeover:.1f}s after the failure; "
              f"{len(before_kill)} of {WRITES} applied by A before")
        if failure == "sigstop":
            # A's lock was renewed last somewhat before the stop: the SDK's AutoLockRenewer checks every
            # 0.5 s and renews over a round trip, more slowly on a busy machine (3.0 s seen with a 4 s lock).
            # A broker that freed the session at the stop would show B's first write within B's own polling
            # (a 1 s wait for a session, then the write): at least 1.5 s still tells the two apart.
            assert takeover >= LOCK_SECONDS - 2.5, "B took the session before A's lock could have run out"
            a.send_signal(signal.SIGCONT)  # the zombie wakes up with a message it thinks is locked
        time.sleep(LOCK_SECONDS + 1)  # anything redelivered or applied late would be in the table by now
        rows = _ledger(table)
    finally:
        for process in instances:
            _stop(process)

    audit = audit_table(table)[TENANT]
    assert (audit.applied, audit.double_applied, audit.out_of_order) == (WRITES, 0, 0)
    assert [row["Sequence"].value for row in sorted(rows, key=lambda r: r["RowKey"])] == list(range(1, WRITES + 1))
    writers = [_writer_pid(row) for row in sorted(rows, key=lambda r: r["RowKey"])]
    switch = writers.index(b.pid)
    assert set(writers[:switch]) == {a.pid} and set(writers[switch:]) == {b.pid}, "A then B, never interleaved"
    with ServiceBusClient.from_connection_string(namespace) as client:
        with client.get_queue_receiver(QUEUE, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.peek_messages(max_message_count=5) == []


def test_a_write_applied_but_not_settled_is_completed_not_applied_again_by_the_next_holder(
    namespace: str, table: Any
) -> None:
    """The crash window itself, made deterministic: apply, then lose the session without settling."""
    store = TableSequenceStore(table, writer_id="host:1:first")
    with ServiceBusClient.from_connection_string(namespace) as client:
        with client.get_queue_sender(QUEUE) as sender:
            sender.send_messages(build_ordered_messages("t-crash", ["a", "b"]))
        receiver = client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=5)
        with receiver:
            (first,) = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert store.apply(settle_write(first)).value == "applied"
            # no settlement: the receiver goes away holding the message and the session
        second_store = TableSequenceStore(table, writer_id="host:2:second")
        outcomes: list[tuple[int | None, object]] = []
        deadline = time.monotonic() + 3 * LOCK_SECONDS + 10
        with client.get_queue_receiver(QUEUE, session_id=NEXT_AVAILABLE_SESSION,
                                       max_wait_time=LOCK_SECONDS * 3) as again:
            actions = ReceiverActions(again)
            while len(outcomes) < 2 and time.monotonic() < deadline:
                for message in again.receive_messages(max_message_count=1, max_wait_time=2):
                    outcomes.append((message.delivery_count, settle_ordered(second_store, message, actions)))
    # Closing a session receiver without settling does not count a delivery ("Message sessions", impact of
    # delivery count): the redelivered write arrives with count 0 and is recognised as a duplicate.
    assert outcomes == [(0, "duplicate"), (0, "applied")]
    audit = audit_table(table)["t-crash"]
    assert (audit.applied, audit.double_applied, audit.out_of_order) == (2, 0, 0)


def settle_write(message: Any) -> Any:
    from consumers.ordered import parse_ordered
    from consumers.settlement import body_bytes

    return parse_ordered(body_bytes(message))
