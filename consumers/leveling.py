"""The leveling worker: drain the ``leveling`` queue into Table Storage at a controlled rate.

Settlement is explicit (``autoCompleteMessages: false``): a poison message is dead-lettered at once
with a reason saying what is wrong (retrying cannot fix it, so it must not burn MaxDeliveryCount
deliveries and store writes), a failed write is abandoned so it is retried and, after MaxDeliveryCount
attempts, dead-lettered by the broker, and a stored message is completed.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from consumers.settlement import MessageActions, settle_message
from consumers.table_sink import ResultSink, to_entity
from shared.contract import ContractMessage, PoisonMessageError, parse_message, utc_now
from shared.rate_limit import TokenBucket, WritePacer
from shared.telemetry import LatencyRecorder, end_to_end_latency_ms
from shared.write_budget import SharedWritePacer

log = logging.getLogger("pipeline.leveler")

class Outcome(enum.Enum):
    COMPLETED = "completed"
    DEAD_LETTERED = "dead-lettered"
    ABANDONED = "abandoned"


class LevelingWorker:
    """Parse, wait for the rate limiter, upsert. Raises :class:`PoisonMessageError` for poison."""

    def __init__(
        self,
        sink: ResultSink,
        limiter: TokenBucket | WritePacer | SharedWritePacer | None = None,
        *,
        recorder: LatencyRecorder | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.sink = sink
        self.limiter = limiter
        self.recorder = recorder
        self._now = now

    def parse(self, body: bytes | str) -> ContractMessage:
        message = parse_message(body)
        if message.result is None:
            raise PoisonMessageError(
                "MissingField", "field 'result' is null: the message skipped the consumers"
            )
        return message

    def handle(self, body: bytes | str) -> ContractMessage:
        message = self.parse(body)
        to_entity(message)  # validates the keys before spending a token
        if isinstance(self.limiter, WritePacer | SharedWritePacer):
            with self.limiter.slot():
                self.sink.upsert(message)
        else:
            if self.limiter is not None:
                self.limiter.acquire()
            self.sink.upsert(message)
        if self.recorder is not None:
            latency = end_to_end_latency_ms(message.created_at, None, self._now())
            self.recorder.record(message.priority, latency, stage="stored", message_id=message.message_id)
        return message


def settle(worker: LevelingWorker, message: Any, actions: MessageActions) -> Outcome:
    """Process one received message and settle it; re-raises transient errors after abandoning."""
    stored = settle_message(message, actions, worker.handle, log=log)
    return Outcome.DEAD_LETTERED if stored is None else Outcome.COMPLETED
