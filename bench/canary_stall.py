"""A canary's round trips while 100,000 peek-locked messages are taken, lapse and are returned.

Why: the emulator serves every connection from one event loop. Anything that runs in one go for
many messages (a receiver granted 100,000 credits, 100,000 locks lapsing at once, one disposition
settling a range of 100,000 deliveries, a link closing with its locks, a full collection of the
cyclic garbage collector over every message object) holds every other client for as long. Issue
#19's goal: no event-loop stall over 50 ms with 100,000 locks in flight, seen from a client.

What it does (loopback only, every wait bounded): starts the emulator (a separate process, in memory;
``--durable`` on a data directory in a temporary folder), fills the queue ``bulk`` with
``--messages`` messages through the SDK, and starts the canary: a process of its own (so the bulk
client's work never delays it) that sends one message to the queue ``canary`` over raw AMQP and
waits for it to come back on a receive-and-delete link of the same connection, every
``--pace-ms``, recording each round trip. Meanwhile one raw AMQP client on ``bulk`` goes through the
phases, each timed by the canary:

- ``idle``: nothing else happens (the floor);
- ``take``: a peek-lock receiver link is granted ``--messages`` credits in one flow and reads every
  delivery;
- ``expire``: the client waits while all those locks lapse (``--lock-seconds``);
- ``take again`` and ``abandon``: the messages are taken again, then abandoned by one disposition
  over the whole range of delivery ids (``modified``, delivery failed);
- ``take again`` and ``release + detach``: taken once more, released by one range disposition and
  the link detached (what an SDK receiver does with its prefetched messages when it closes);
- ``SDK prefetch`` (``--sdk-take``): an SDK receiver with ``prefetch_count`` = ``--messages`` (at most
  50,000, the Python SDK's bound; one flow of that many credits) receives that many;
- ``session close``: a raw session receiver on ``bulksess`` (``--messages`` messages of one session,
  filled with the others) takes them all in one flow and detaches: the close returns every lock;
- ``purge``: ``POST /$admin/purge/bulk`` on the management endpoint removes ``bulk``'s messages, their
  locks held (those the SDK receiver left) or not.

``--never-idle`` starts the canary before the fill, so the emulator never has an idle second (its
collector policy's busy path, runtime/collector.py), and keeps it running through ``--rss-loop``.

Printed: per phase, the canary's round trips, median, p99 and worst. ``python -m bench.canary_stall``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode

from sbemulator.amqp import codec
from sbemulator.amqp.framing import build_frame
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Attach,
    Detach,
    Disposition,
    Flow,
    Modified,
    Released,
    Source,
    Target,
    Transfer,
    from_described,
)
from sbemulator.amqp.types import Symbol, UByte, UInt
from sbemulator.auth import sign
from sbemulator.runtime.collector import IDLE_S
from sbemulator.runtime.launcher import EmulatorProcess

from ._util import (
    REPO_ROOT,
    UINT_MAX,
    command_line,
    config_file,
    emulator,
    load_average,
    machine,
    process_rss_mb,
    queue_entry,
    raw_connection,
    read_frame,
    today,
)

BULK, CANARY, SESSIONS, SESSION_ID, RSS = "bulk", "canary", "bulksess", "s", "rss"
KEY_NAME, KEY = "RootManageSharedAccessKey", "SAS_KEY_VALUE"
SOCKET_TIMEOUT_S = 30.0
TRANSFER, FLOW, ATTACH, DETACH = 0x14, 0x13, 0x12, 0x16
CANARY_CREDIT = 1000
RSS_ROUND = 500
SDK_MAX_PREFETCH = 50_000  # the Python SDK's bound on prefetch_count


def _config(lock_seconds: int) -> dict:
    bulk = queue_entry(BULK)
    bulk["Properties"].update(LockDuration=f"PT{lock_seconds}S", MaxDeliveryCount=100)
    sessions = queue_entry(SESSIONS)
    sessions["Properties"].update(LockDuration=f"PT{lock_seconds}S", MaxDeliveryCount=100, RequiresSession=True)
    return {"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [bulk, queue_entry(CANARY), sessions,
                                                                      queue_entry(RSS)],
                                           "Topics": []}], "Logging": {"Type": "File"}}}


def _data_section(body: bytes) -> bytes:
    """An AMQP message of one data section (described 0x75, binary ``body``)."""
    return b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


def _code(frame: bytes) -> int | None:
    """The performative's descriptor code of a frame read by ``read_frame`` (None for a heartbeat)."""
    doff = frame[0] * 4 - 4  # read_frame strips the 4-byte size
    return frame[doff + 2] if len(frame) > doff + 2 else None


def _performative(frame: bytes) -> Any:
    doff = frame[0] * 4 - 4
    return from_described(codec.decode(frame, doff)[0])


class RawClient:
    """One raw AMQP connection (SASL PLAIN) with one session; frames are read by the caller."""

    def __init__(self, port: int, name: str) -> None:
        self.sock = raw_connection(port, name, timeout=SOCKET_TIMEOUT_S, nodelay=True)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> bytes:
        return read_frame(self.sock)

    def until(self, code: int, handle: int | None = None) -> Any:
        """Read frames until a performative with ``code`` (on ``handle``, when given); return it."""
        while True:
            frame = self.frame()
            if _code(frame) == code:
                perf = _performative(frame)
                if handle is None or perf.handle == handle:
                    return perf

    def close(self) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- the canary process

def run_canary(port: int, pace_ms: float, seconds: float) -> None:
    """Round trips on CANARY until stdin closes or ``seconds`` pass; prints ``monotonic rtt_ms`` lines."""
    client = RawClient(port, "canary")
    client.send(build_frame(0, Attach("canary-send", UInt(0), ROLE_SENDER, UByte(1), UByte(0),
                                      Source("canary-sender"), Target(CANARY))))
    client.send(build_frame(0, Attach("canary-recv", UInt(1), ROLE_RECEIVER, UByte(1), UByte(0),
                                      Source(CANARY), Target("canary-receiver"))))
    client.until(FLOW, 0)  # the emulator's credit for the sender
    delivery_count, credit = 0, CANARY_CREDIT
    client.send(build_frame(0, Flow(UInt(0), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX), UInt(1), UInt(0),
                                    UInt(credit))))
    stop = threading.Event()

    def _until_stdin_closes() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=_until_stdin_closes, daemon=True).start()
    samples: list[tuple[float, float]] = []
    end = time.monotonic() + seconds
    payload = _data_section(b"canary")
    sent = 0
    while not stop.is_set() and time.monotonic() < end:
        start = time.monotonic()
        client.send(build_frame(0, Transfer(UInt(0), UInt(sent), sent.to_bytes(8, "big"), UInt(0), True),
                                payload=payload))
        sent += 1
        while True:  # the emulator's flows (sender credit) may come first
            frame = client.frame()
            if _code(frame) == TRANSFER:
                break
        samples.append((start, (time.monotonic() - start) * 1000))
        delivery_count += 1
        credit -= 1
        if credit < CANARY_CREDIT // 2:
            credit = CANARY_CREDIT
            client.send(build_frame(0, Flow(UInt(delivery_count), UInt(UINT_MAX), UInt(sent), UInt(UINT_MAX),
                                            UInt(1), UInt(delivery_count), UInt(credit))))
        time.sleep(max(0.0, pace_ms / 1000 - (time.monotonic() - start)))
    client.close()
    sys.stdout.write("".join(f"{t:.6f} {rtt:.3f}\n" for t, rtt in samples))
    sys.stdout.flush()


class Canary:
    """The canary as a child process; :meth:`stop` returns its samples (monotonic start, ms)."""

    def __init__(self, port: int, pace_ms: float, seconds: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.canary_stall", "--canary-port", str(port), "--pace-ms", str(pace_ms),
             "--canary-seconds", str(seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def stop(self, timeout: float = 60) -> list[tuple[float, float]]:
        out, _ = self.process.communicate(input="", timeout=timeout)
        if self.process.returncode != 0:
            raise RuntimeError(f"the canary exited with {self.process.returncode}")
        return [(float(a), float(b)) for a, b in (line.split() for line in out.splitlines())]


# --------------------------------------------------------------------------- the bulk client

class Bulk:
    """A raw peek-lock receiver on BULK: takes with one flow, settles with one range disposition."""

    def __init__(self, port: int, address: str = BULK, session_id: str | None = None) -> None:
        self.client = RawClient(port, "bulk")
        self.handle = 0
        self.delivery_count = 0
        self.next_incoming = 0
        self.address = address
        self.session_id = session_id
        self._attach()

    def _attach(self) -> None:
        source = Source(self.address)
        if self.session_id is not None:
            source.filter = {Symbol("com.microsoft:session-filter"): self.session_id}
        self.client.send(build_frame(0, Attach(f"bulk-{self.handle}", UInt(self.handle), ROLE_RECEIVER, UByte(0),
                                               UByte(1), source, Target("bulk-receiver"))))
        attach = self.client.until(ATTACH, self.handle)
        self.delivery_count = int(attach.initial_delivery_count or 0)

    def take(self, count: int, deadline_s: float) -> tuple[int, int]:
        """Grant ``count`` credits in one flow and read that many deliveries: (first, last) delivery id."""
        self.client.send(build_frame(0, Flow(UInt(self.next_incoming), UInt(UINT_MAX), UInt(0), UInt(UINT_MAX),
                                             UInt(self.handle), UInt(self.delivery_count), UInt(count))))
        end = time.monotonic() + deadline_s
        got, first = 0, -1
        while got < count:
            frame = self.client.frame()
            if _code(frame) != TRANSFER:
                continue
            if got == 0:
                first = int(_performative(frame).delivery_id)
            got += 1
            if got % 1000 == 0 and time.monotonic() > end:
                raise TimeoutError(f"took {got} of {count} within {deadline_s:g} s")
        self.delivery_count += count
        self.next_incoming = (first + count) & UINT_MAX
        return first, (first + count - 1) & UINT_MAX

    def settle_range(self, first: int, last: int, state: object) -> None:
        self.client.send(build_frame(0, Disposition(ROLE_RECEIVER, UInt(first), UInt(last), True, state)))

    def detach(self) -> None:
        self.client.send(build_frame(0, Detach(UInt(self.handle), True)))
        self.client.until(DETACH, self.handle)


def _fill(connection_string: str, messages: int, queue: str = BULK, session_id: str | None = None) -> None:
    with ServiceBusClient.from_connection_string(connection_string) as client, \
            client.get_queue_sender(queue) as sender:
        sent = 0
        while sent < messages:
            batch = sender.create_message_batch()
            while sent < messages:
                try:
                    batch.add_message(ServiceBusMessage(b"b" * 100, session_id=session_id))
                except ValueError:
                    break
                sent += 1
            sender.send_messages(batch)


def _sdk_take(connection_string: str, messages: int, deadline_s: float) -> None:
    messages = min(messages, SDK_MAX_PREFETCH)
    with ServiceBusClient.from_connection_string(connection_string) as client, client.get_queue_receiver(
            BULK, receive_mode=ServiceBusReceiveMode.PEEK_LOCK, prefetch_count=messages) as receiver:
        end, got = time.monotonic() + deadline_s, 0
        while got < messages:
            if time.monotonic() > end:
                raise TimeoutError(f"the SDK received {got} of {messages} within {deadline_s:g} s")
            got += len(receiver.receive_messages(max_message_count=messages - got, max_wait_time=5))


def _purge(proc: EmulatorProcess, path: str) -> None:
    """``POST /$admin/purge/{path}`` on the emulator's management endpoint (its own CA, a SAS token)."""
    assert proc.admin_port is not None and proc.ca_path is not None
    context = ssl.create_default_context(cafile=proc.ca_path)
    conn = http.client.HTTPSConnection("127.0.0.1", proc.admin_port, context=context, timeout=SOCKET_TIMEOUT_S)
    try:
        token = sign(f"https://127.0.0.1:{proc.admin_port}", KEY_NAME, KEY, int(time.time()) + 300)
        conn.request("POST", f"/$admin/purge/{path}", headers={"Authorization": token})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"purge answered {response.status}: {body[:200]!r}")
        print(f"[canary_stall] purged: {json.loads(body)}", flush=True)
    finally:
        conn.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--lock-seconds", type=int, default=20,
                        help="the bulk queue's LockDuration (the takes must fit in it)")
    parser.add_argument("--pace-ms", type=float, default=2.0, help="the canary's time between round trips")
    parser.add_argument("--durable", action="store_true", help="a data directory in a temporary folder")
    parser.add_argument("--sdk-take", action="store_true", help="also an SDK receiver with prefetch --messages")
    parser.add_argument("--emulator-arg", action="append", default=[],
                        help="passed to the emulator (e.g. --emulator-arg=--gc=python)")
    parser.add_argument("--rss-loop", type=int, default=0, metavar="ROUNDS",
                        help="afterwards, that many rounds of connect / send / receive / disconnect, with RSS")
    parser.add_argument("--never-idle", action="store_true",
                        help="the canary runs from before the fill to the end of --rss-loop: no idle second")
    parser.add_argument("--canary-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--canary-seconds", type=float, default=600.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.canary_port is not None:
        run_canary(args.canary_port, args.pace_ms, args.canary_seconds)
        return 0
    phases: list[tuple[str, float, float]] = []
    budget = 120.0 + args.messages / 500  # per phase: a slow machine takes 100,000 at a few thousand a second

    def phase(name: str, action: Callable[[], object]) -> None:
        start = time.monotonic()
        action()
        phases.append((name, start, time.monotonic()))
        print(f"[canary_stall] {name}: {phases[-1][2] - start:.1f} s", flush=True)

    with ExitStack() as stack:
        path = stack.enter_context(config_file(_config(args.lock_seconds)))
        store = ["--in-memory"]
        if args.durable:
            store = ["--data-dir", stack.enter_context(tempfile.TemporaryDirectory(prefix="sbcanary-"))]
        probe = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sbprobe-")))
        proc = stack.enter_context(_probed(probe, lambda: emulator(path, *store, "--no-websocket",
                                                                    *args.emulator_arg)))
        canary = Canary(proc.port, args.pace_ms, seconds=budget * 12) if args.never_idle else None
        _fill(proc.connection_string, args.messages)
        _fill(proc.connection_string, args.messages, SESSIONS, SESSION_ID)
        print(f"[canary_stall] {args.messages:,} messages in {BULK} and in {SESSIONS}", flush=True)
        if canary is None:
            canary = Canary(proc.port, args.pace_ms, seconds=budget * 10)
        rss: list[float] = []
        try:
            bulk = Bulk(proc.port)
            phase("idle", lambda: time.sleep(3))
            taken: dict[str, tuple[int, int]] = {}

            def take() -> None:
                taken["range"] = bulk.take(args.messages, budget)

            phase("take (one flow of credit)", take)
            phase("expire (locks lapse)", lambda: time.sleep(args.lock_seconds + 3))
            phase("take again", take)
            def abandon() -> None:
                bulk.settle_range(*taken["range"], Modified(True, False))
                time.sleep(3)

            def release_and_detach() -> None:
                bulk.settle_range(*taken["range"], Released())
                bulk.detach()
                time.sleep(3)

            phase("abandon (one range disposition)", abandon)
            phase("take again ", take)
            phase("release + detach", release_and_detach)
            if args.sdk_take:
                phase("SDK prefetch of all", lambda: _sdk_take(proc.connection_string, args.messages, budget))
                phase("SDK receiver closed (locks stay)", lambda: time.sleep(3))
            bulk.client.close()
            session = Bulk(proc.port, SESSIONS, SESSION_ID)
            phase("session take", lambda: session.take(args.messages, budget))

            def close_session() -> None:
                session.detach()
                time.sleep(3)

            phase("session receiver closed (locks returned)", close_session)
            session.client.close()

            def purge() -> None:
                _purge(proc, BULK)
                time.sleep(3)

            phase("purge", purge)
            if args.never_idle and args.rss_loop:
                rss = _rss_loop(proc, args.rss_loop, idle_moments=False)
        finally:
            samples = canary.stop()
        if args.rss_loop and not args.never_idle:
            rss = _rss_loop(proc, args.rss_loop)
        proc.terminate()
        measured = json.loads((probe / "probe.json").read_text())
    callbacks, collections = measured["callbacks"], measured["collections"]
    rows: list[tuple[str, int, str, str, str, str, str, str]] = []
    for name, start, end in phases:
        rtts = [rtt for t, rtt in samples if start <= t < end]
        worst_cpu = max((cpu for t, cpu, *_ in callbacks if start <= t < end), default=0.0)
        worst_wall = max((wall for t, _, _, _, wall in callbacks if start <= t < end), default=0.0)
        fulls = [cpu for t, cpu, generation, *_ in collections if start <= t < end and generation == 2]
        gc_cell = f"{len(fulls)}" + (f", longest {max(fulls):.0f} ms" if fulls else "")
        if not rtts:
            rows.append((name.strip(), 0, "-", "-", "-", f"{worst_cpu:.1f}", f"{worst_wall:.1f}", gc_cell))
            continue
        rows.append((name.strip(), len(rtts), f"{statistics.median(rtts):.1f}", f"{_percentile(rtts, 0.99):.1f}",
                     f"{max(rtts):.1f}", f"{worst_cpu:.1f}", f"{worst_wall:.1f}", gc_cell))
    store_name = "durable" if args.durable else "in memory"
    print(f"\nCommand: `{command_line()}`  ")
    print(f"Machine: {machine()}; load average {load_average()}; {today()}; {store_name}  ")
    print(f"{args.messages:,} messages of 100 B, lock {args.lock_seconds} s, canary every {args.pace_ms:g} ms\n")
    print("| phase | canary round trips | median | p99 | worst | emulator's longest callback, CPU | "
          "longest callback, wall | full collections |")
    print("|---|---|---|---|---|---|---|---|")
    for name, count, median, p99, worst, cpu, wall, gc_text in rows:
        print(f"| {name} | {count:,} | {median} ms | {p99} ms | {worst} ms | {cpu} ms | {wall} ms | {gc_text} |")
    if os.environ.get("SBEMU_PROBE_COLLECTIONS"):  # every full collection: when, CPU, frozen, scanned
        for t, cpu, generation, frozen, scanned, collected in collections:
            where = next((name.strip() for name, start, end in phases if start <= t < end), "between phases")
            print(f"- collection of generation {generation} in {where}: {cpu:.1f} ms, {collected:,} found"
                  + (f", {frozen:,} frozen, {scanned:,} in the oldest generation" if generation == 2
                     else f", {scanned:,} objects in the young generations"))
        for generation, found, free_ms, kinds in measured.get("garbage", []):
            if free_ms >= 2:
                print(f"- generation {generation} found {found:,} objects, freed in {free_ms:.1f} ms: {kinds}")
        for size, kinds in measured.get("young_types", []):
            print(f"- a collection over {size:,} objects, the largest container: {kinds}")
    listed_ms = float(os.environ.get("SBEMU_PROBE_LIST_MS", "50"))  # diagnosis: list shorter ones too
    long_ones = [entry for entry in callbacks if max(entry[1], entry[4]) >= listed_ms]
    if long_ones:
        print(f"\nCallbacks over {listed_ms:g} ms of CPU or wall time (phase, CPU, of it collecting, wall, what ran):")
        for t, cpu, collecting, what, wall in long_ones:
            where = next((name.strip() for name, start, end in phases if start <= t < end), "between phases")
            print(f"- {where}: {cpu:.1f} ms, {collecting:.1f} ms collecting, {wall:.1f} ms wall, `{what}`")
    if rss:
        when = "the canary running throughout" if args.never_idle else "each reading after an idle moment"
        print(f"\nRSS over {args.rss_loop} rounds (connect, send {RSS_ROUND} and receive them, disconnect; {when}): "
              + ", ".join(f"{mb:.0f}" for mb in rss) + " MB")
    return 0


@contextmanager
def _probed(directory: Path, start: Callable[[], AbstractContextManager[EmulatorProcess]]
            ) -> Iterator[EmulatorProcess]:
    """Start the emulator with bench._loop_probe loaded (a sitecustomize on its PYTHONPATH only)."""
    (directory / "sitecustomize.py").write_text("import bench._loop_probe  # noqa: F401\n")
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "SBEMU_LOOP_PROBE")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(directory), str(REPO_ROOT), saved["PYTHONPATH"]]))
    os.environ["SBEMU_LOOP_PROBE"] = str(directory / "probe.json")
    try:
        manager = start()
        proc = manager.__enter__()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        yield proc
    finally:
        manager.__exit__(None, None, None)


def _rss_loop(proc: EmulatorProcess, rounds: int, idle_moments: bool = True) -> list[float]:
    """Bounded churn (a connection per round, RSS_ROUND messages through RSS): the emulator's RSS
    every tenth of the rounds, to show that what the collector defers does not accumulate. With
    ``idle_moments`` each reading follows an idle moment (the collector's idle collection); without,
    the canary keeps running and the readings come at once (the busy path's bound)."""
    out = []
    payload = _data_section(b"r" * 100)
    for n in range(rounds):
        client = RawClient(proc.port, f"rss-{n}")
        client.send(build_frame(0, Attach("rss-send", UInt(0), ROLE_SENDER, UByte(1), UByte(0),
                                          Source("rss-sender"), Target(RSS))))
        client.send(build_frame(0, Attach("rss-recv", UInt(1), ROLE_RECEIVER, UByte(1), UByte(0),
                                          Source(RSS), Target("rss-receiver"))))
        client.until(FLOW, 0)
        client.send(b"".join(build_frame(0, Transfer(UInt(0), UInt(i), i.to_bytes(8, "big"), UInt(0), True),
                                         payload=payload) for i in range(RSS_ROUND)))
        client.send(build_frame(0, Flow(UInt(0), UInt(UINT_MAX), UInt(RSS_ROUND), UInt(UINT_MAX), UInt(1),
                                        UInt(0), UInt(RSS_ROUND))))
        got = 0
        while got < RSS_ROUND:
            if _code(client.frame()) == TRANSFER:
                got += 1
        client.close()
        if n % max(1, rounds // 10) == 0 or n == rounds - 1:
            if idle_moments:
                time.sleep(IDLE_S + 0.5)  # an idle moment: the collector's full collection runs
            out.append(process_rss_mb(proc.pid))
    return out


if __name__ == "__main__":
    sys.exit(main())
