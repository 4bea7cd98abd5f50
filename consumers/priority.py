"""The priority consumers' work: simulate processing, record latency, hand the result on.

High and low run the same code; what makes high faster is its own subscription and its own consumer
pool (a Function App with a higher instance limit and less simulated work), not code here.

A body that breaks the contract is not retried here: retrying cannot fix it. It is forwarded
unchanged to the leveling queue, whose worker dead-letters poison at once with the reason, so all
poison ends in one dead-letter queue with an explanation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from shared.contract import ContractMessage, PoisonMessageError, format_timestamp, parse_message, utc_now
from shared.telemetry import LatencyRecorder, end_to_end_latency_ms

log = logging.getLogger("pipeline.consumer")


@dataclass(frozen=True)
class Processed:
    """What to send to the leveling queue; ``message`` is None when the body was forwarded as poison."""

    body: str
    message: ContractMessage | None
    latency_ms: float | None = None


def process_message(
    body: bytes | str,
    *,
    consumer: str,
    work_ms: int = 0,
    enqueued_at: datetime | None = None,
    recorder: LatencyRecorder | None = None,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = utc_now,
) -> Processed:
    try:
        message = parse_message(body)
    except PoisonMessageError as exc:
        log.warning("%s: forwarding poison message to the leveling queue: %s", consumer, exc)
        return Processed(body=body if isinstance(body, str) else bytes(body).decode("utf-8", "replace"),
                         message=None)
    if work_ms > 0:
        sleep(work_ms / 1000.0)
    finished = now()
    latency = end_to_end_latency_ms(message.created_at, enqueued_at, finished)
    if recorder is not None:
        recorder.record(message.priority, latency, stage=consumer, message_id=message.message_id)
    result = message.with_result({
        "consumer": consumer,
        "processed_at": format_timestamp(finished),
        "work_ms": work_ms,
        "latency_ms": round(latency, 3),
    })
    return Processed(body=result.to_json(), message=result, latency_ms=latency)
