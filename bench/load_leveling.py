"""Load leveling: a 20x burst into the ``leveling`` queue, drained into Table Storage under the cap.

The leveler runs under devhost with its instance limit and maxConcurrentCalls from infra/main.bicep,
against the emulator and Azurite. The burst is 20 x the cap messages (20 seconds of work at the cap)
sent as fast as one sender can. Every write is the leveler's own ``stored`` telemetry sample, logged
after the upsert returned; the rows are counted in the table afterwards.

Reported: the peak writes/s over 1-second windows (fixed windows from the first write, and the
strictest sliding window), as the store saw them (the rows' Timestamp) and as the leveler did, against the
cap, the time from the first send to the last write, and rows
written vs messages sent. Goals: peak <= cap x 1.05, rows == messages sent, no message written twice.
Exit code 0 when all hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

from azure.servicebus import ServiceBusMessage, ServiceBusSubQueue

from bench._util import command_line, machine, markdown_table, today, write_section
from devhost.demo.metrics import STORED, TelemetryCollector, peak_sliding, per_second
from devhost.host import Host, HostOptions
from devhost.scale import parameter_default
from sender.messages import publish
from shared.contract import ContractMessage, utc_now
from shared.topology import HIGH, LOW, QUEUE_LEVELING

SECTION_KEY = "leveling"
TABLE = "benchleveling"
TENANTS = tuple(f"tenant-{i}" for i in range(1, 6))


def burst_messages(count: int) -> list[ServiceBusMessage]:
    """Messages as the consumers hand them on: contract bodies with a ``result``."""
    messages = []
    for i in range(count):
        body = ContractMessage(
            message_id=str(uuid.uuid4()), tenant_id=TENANTS[i % len(TENANTS)], priority=HIGH if i % 5 == 0 else LOW,
            created_at=utc_now(), payload={"index": i}, result={"consumer": "bench", "work_ms": 0},
        )
        messages.append(ServiceBusMessage(body.to_json(), message_id=body.message_id,
                                          content_type="application/json"))
    return messages


def dead_letters(host: Host) -> int:
    with host.service_bus_client() as client, \
            client.get_queue_receiver(QUEUE_LEVELING, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
        return len(dlq.peek_messages(max_message_count=250))


def run(args: argparse.Namespace) -> dict:
    count = int(args.factor * args.cap)
    options = HostOptions(
        roles=("leveler",), use_local_settings=False, env={},
        overrides={"LEVELER_MAX_WRITES_PER_SECOND": f"{args.cap:g}", "RESULTS_TABLE": TABLE},
    )
    with TelemetryCollector() as collector, Host(options) as host:
        host.wait_connected(60)
        plan = host.plans["leveler"]
        host.table_client(TABLE).create_table()  # in Azure the Bicep creates it (infra/modules/storage.bicep)
        messages = burst_messages(count)
        ids = {m.message_id for m in messages}
        started = time.time()
        with host.service_bus_client() as client, client.get_queue_sender(QUEUE_LEVELING) as sender:
            publish(sender, messages)
        sent_seconds = time.time() - started
        print(f"sent {count} messages in {sent_seconds:.2f}s; {plan.instances} leveler instance(s) x "
              f"{plan.options.max_concurrent_calls} calls, cap {args.cap:g}/s", flush=True)
        deadline = time.monotonic() + count / args.cap * 2 + 30
        while time.monotonic() < deadline:
            stored = {s.message_id for s in collector.snapshot() if s.stage == STORED}
            if ids <= stored:
                break
            time.sleep(0.5)
        time.sleep(2)  # a late duplicate (redelivery) would land now
        writes = [s for s in collector.snapshot() if s.stage == STORED and s.message_id in ids]
        host.stop_functions()
        table = host.table_client(TABLE)
        entities = list(table.list_entities())
        rows = len(entities)
        # when the store applied each write (the table's own Timestamp): what the store experienced
        store_times = sorted(e.metadata["timestamp"].timestamp() for e in entities)
        dead = dead_letters(host)
    times = sorted(s.at for s in writes)
    first = times[0] if times else started
    windows = per_second(times, first, times[-1] + 1e-9 if times else first)
    store_first = store_times[0] if store_times else 0.0
    store_windows = per_second(store_times, store_first, store_times[-1] + 1e-9 if store_times else 0.0)
    return {
        "count": count, "sent_seconds": sent_seconds, "writes": len(writes),
        "unique": len({s.message_id for s in writes}), "rows": rows, "dead": dead,
        "peak_fixed": max(windows, default=0), "peak_sliding": peak_sliding(times),
        "store_windows": store_windows,
        "store_peak_fixed": max(store_windows, default=0), "store_peak_sliding": peak_sliding(store_times),
        "drain": (times[-1] - started) if times else float("nan"),
        "mean_rate": len(times) / (times[-1] - first) if len(times) > 1 else float("nan"),
        "plan": f"{plan.instances} x {plan.options.max_concurrent_calls}",
        "per_instance_rate": args.cap / plan.instances,
    }


def report(r: dict, args: argparse.Namespace) -> tuple[str, bool]:
    limit = args.cap * 1.05
    ok_peak = r["store_peak_fixed"] <= limit
    ok_rows = r["rows"] == r["count"] and r["writes"] == r["unique"] == r["count"]
    verdict = lambda ok: "met" if ok else "**missed**"  # noqa: E731
    note = ("  (each instance spaces its writes 1 / (cap / instances) apart, counted from the previous write's "
            "return, so a write's landing time at the store is what is paced)" if ok_peak else
            "  (look at the windows above: a window over the cap at the start, after idling, means the writes are "
            "paced by when they start rather than by when they land)")
    table = markdown_table(["measure", "value"], [
        ["messages in the burst (20 x cap)", f"{r['count']:,} (sent in {r['sent_seconds']:.2f} s)"],
        ["cap (LEVELER_MAX_WRITES_PER_SECOND)", f"{args.cap:g}/s ({r['per_instance_rate']:g}/s per instance)"],
        ["leveler instances x maxConcurrentCalls", r["plan"]],
        ["store's peak writes/s: 1-s windows from the first write (table Timestamp)", r["store_peak_fixed"]],
        ["store's peak writes in any 1-s window (sliding, table Timestamp)", r["store_peak_sliding"]],
        ["leveler's peak writes/s: 1-s windows from the first write (upsert returned)", r["peak_fixed"]],
        ["leveler's peak writes in any 1-s window (sliding, upsert returned)", r["peak_sliding"]],
        ["mean write rate", f"{r['mean_rate']:.1f}/s"],
        ["time from first send to last write", f"{r['drain']:.1f} s (ideal {r['count'] / args.cap:.0f} s)"],
        ["writes / distinct messages written / rows in the table", f"{r['writes']} / {r['unique']} / {r['rows']}"],
        ["dead-lettered", r["dead"]],
        ["store's writes per 1-s window, first 6 and last 3", " ".join(map(str, r["store_windows"][:6])) + " ... "
         + " ".join(map(str, r["store_windows"][-3:]))],
    ])
    body = f"""`{command_line()}` on {machine()}, {today()}.

The leveler under devhost, against sbemulator and Azurite. The store's view is the `Timestamp` Azurite
gave each row when it applied the write; the leveler's view is its `stored` sample, logged when the upsert
returned.

{table}

- the store's peak {r['store_peak_fixed']}/s against cap x 1.05 = {limit:g}/s: {verdict(ok_peak)}
{note}
- rows == messages sent, each written once: {verdict(ok_rows)}
"""
    return body, ok_peak and ok_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=float, default=None,
                        help="LEVELER_MAX_WRITES_PER_SECOND (default: levelerMaxWritesPerSecond in infra/main.bicep)")
    parser.add_argument("--factor", type=float, default=20.0, help="burst size in seconds of cap (default 20)")
    parser.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.cap is None:
        args.cap = float(parameter_default("levelerMaxWritesPerSecond"))
    from devhost.cli import configure_logging

    configure_logging("WARNING")
    result = run(args)
    body, ok = report(result, args)
    print(body)
    if not args.no_doc:
        write_section(SECTION_KEY, body)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
