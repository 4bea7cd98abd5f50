"""The web console's only door into the broker: what it reads (counts, entities, peeked messages) and
what it changes (send, resubmit, purge), as plain JSON-ready data.

Why one adapter: the broker has no public API yet for some of these operations (resubmitting a
dead-lettered message, purging one sub-queue), so the few places that reach into broker internals are
concentrated here, where they can be re-pointed at a public API without touching the console's HTTP
layer. Runs on the emulator's event loop, like every broker call.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import uuid
from typing import Any

from sbemulator.amqp import codec
from sbemulator.amqp.message import SECTION_AMQP_SEQUENCE, SECTION_AMQP_VALUE, SECTION_DATA, encode_message
from sbemulator.amqp.message import parse_message as parse_sections
from sbemulator.amqp.performatives import Header, Properties
from sbemulator.amqp.types import Symbol, Timestamp, UInt
from sbemulator.broker.entity import DLQ_SUFFIX, QUEUE, SUBSCRIPTION, TOPIC, TRANSFER_DLQ_SUFFIX, Entity
from sbemulator.broker.errors import BrokerError
from sbemulator.broker.model import BrokerMessage, MessageState
from sbemulator.deliveries import SCHEDULED_ENQUEUE_TIME, incoming_messages

from .backend import Namespace
from .errors import BadRequest, NotFound

SUB_QUEUES = {"active": "", "deadletter": DLQ_SUFFIX, "transferdeadletter": TRANSFER_DLQ_SUFFIX}
MAX_PEEK = 100
MAX_BODY_PREVIEW = 256 * 1024  # bytes shown as text/hex; larger bodies are cut (and say so)
DEAD_LETTER_PROPERTIES = ("DeadLetterReason", "DeadLetterErrorDescription")
APP_PROPERTY_TYPES = {"string", "int", "double", "boolean"}

# Service Bus property names for the config fields (the names the portal and the Atom API use).
_PROPERTY_NAMES = {
    "lock_duration": "LockDuration",
    "max_delivery_count": "MaxDeliveryCount",
    "default_message_ttl": "DefaultMessageTimeToLive",
    "dead_lettering_on_message_expiration": "DeadLetteringOnMessageExpiration",
    "dead_lettering_on_filter_evaluation_exceptions": "DeadLetteringOnFilterEvaluationExceptions",
    "duplicate_detection_window": "DuplicateDetectionHistoryTimeWindow",
    "requires_duplicate_detection": "RequiresDuplicateDetection",
    "forward_to": "ForwardTo",
    "forward_dead_lettered_messages_to": "ForwardDeadLetteredMessagesTo",
    "requires_session": "RequiresSession",
    "max_message_size_kb": "MaxMessageSizeInKilobytes",
}
_DURATIONS = {"lock_duration", "default_message_ttl", "duplicate_detection_window"}


class ConsoleBroker:
    def __init__(self, namespace: Namespace) -> None:
        self.ns = namespace
        self.broker = namespace.broker

    # ------------------------------------------------------------------ plumbing
    def _commit(self) -> None:
        self.ns._commit()

    def _entity(self, path: str, *kinds: str) -> Entity:
        ent = self.broker._entities.get(path.strip("/").lower())
        if ent is None or (kinds and ent.kind not in kinds):
            raise NotFound(f"The messaging entity '{path}' could not be found.")
        return ent

    def _now_ms(self) -> int:
        return self.broker._now()

    # ------------------------------------------------------------------ reading
    def overview(self) -> dict[str, Any]:
        """Every queue and topic (subscriptions nested) with the counts the portal shows."""
        entities = []
        for ent in self.broker._entities.values():
            if ent.kind not in (QUEUE, TOPIC):
                continue
            item = self._summary(ent)
            if ent.kind == TOPIC:
                item["subscriptions"] = [self._summary(sub) for sub in ent.subscriptions.values()]
            entities.append(item)
        entities.sort(key=lambda e: (e["kind"] != QUEUE, e["path"].lower()))
        return {"namespace": self.ns.name, "entities": entities, "now": _iso(self._now_ms())}

    def _summary(self, ent: Entity) -> dict[str, Any]:
        counts = self.broker.counts(ent.path)
        return {
            "kind": ent.kind,
            "path": ent.path,
            "name": ent.path.rsplit("/", 1)[-1] if ent.kind == SUBSCRIPTION else ent.path,
            "requiresSession": bool(ent.requires_session),
            "counts": {
                "active": counts["active"],
                "deadLetter": counts["dead_letter"],
                "scheduled": counts["scheduled"],
                "deferred": counts["deferred"],
                # Forwarding is synchronous in the emulator: nothing ever waits for transfer.
                "transfer": 0,
                "transferDeadLetter": counts["transfer_dead_letter"],
            },
        }

    def entity(self, path: str) -> dict[str, Any]:
        ent = self._entity(path, QUEUE, TOPIC, SUBSCRIPTION)
        info = self.ns.get(ent.kind, ent.path)
        out = self._summary(ent)
        out["properties"] = _properties(info.config, info.extras)
        out["sizeInBytes"] = info.size_in_bytes
        if ent.kind == TOPIC:
            out["subscriptions"] = [
                {**self._summary(sub), "rules": [_rule(rc) for rc, _ in sub.rules]}
                for sub in ent.subscriptions.values()
            ]
        if ent.kind == SUBSCRIPTION:
            out["rules"] = [_rule(rc) for rc, _ in ent.rules]
            out["topic"] = ent.parent.path if ent.parent is not None else None
        if ent.requires_session:
            out["sessions"] = [self._session(s) for s in ent.sessions.values()
                               if s.count > 0 or s.state is not None or s.owner is not None]
        return out

    def _session(self, s: Any) -> dict[str, Any]:
        now = self._now_ms()
        locked = s.owner is not None and s.locked_until_ms > now
        return {
            "id": s.id,
            "messageCount": s.count,
            "lockedUntil": _iso(s.locked_until_ms) if locked else None,
            "state": _payload(s.state) if s.state is not None else None,
        }

    def peek(self, path: str, sub_queue: str, from_sequence: int, count: int) -> dict[str, Any]:
        """A page of messages (any state) from a sequence number on; no lock, delivery count unchanged."""
        ent = self._entity(path, QUEUE, TOPIC, SUBSCRIPTION)
        suffix = SUB_QUEUES.get(sub_queue)
        if suffix is None:
            raise BadRequest(f"Unknown sub-queue '{sub_queue}': use active, deadletter or transferdeadletter.")
        if suffix and ent.kind == TOPIC:
            raise BadRequest("A topic has no dead-letter queue; peek its subscriptions.")
        target = f"{ent.path}/{suffix}" if suffix else ent.path
        count = max(1, min(count, MAX_PEEK))
        messages = self.broker.peek(target, max(from_sequence, 0), count + 1)
        more = len(messages) > count
        messages = messages[:count]
        next_from = messages[-1].sequence_number + 1 if messages else from_sequence
        return {
            "path": ent.path,
            "subQueue": sub_queue,
            "messages": [self._message(m) for m in messages],
            "nextFromSequenceNumber": next_from,
            "more": more,
        }

    def _message(self, m: BrokerMessage) -> dict[str, Any]:
        system = {
            "MessageId": m.message_id,
            "SequenceNumber": m.sequence_number,
            "EnqueuedTimeUtc": _iso(m.enqueued_time_ms),
            "State": MessageState(m.state).name.capitalize(),
            "DeliveryCount": m.delivery_count,
            "ContentType": m.content_type,
            "SessionId": m.session_id,
            "CorrelationId": m.correlation_id,
            "Subject": m.subject,
            "To": m.to,
            "ReplyTo": m.reply_to,
            "ReplyToSessionId": m.reply_to_session_id,
            "PartitionKey": m.partition_key,
            "TimeToLive": _duration(m.time_to_live_ms / 1000) if m.time_to_live_ms else None,
            "ExpiresAtUtc": _iso(m.expires_at_ms) if m.expires_at_ms else None,
            "ScheduledEnqueueTimeUtc": _iso(m.scheduled_enqueue_time_ms) if m.scheduled_enqueue_time_ms else None,
            "LockedUntilUtc": _iso(m.locked_until_ms) if m.locked_until_ms else None,
            "EnqueuedSequenceNumber": m.enqueue_sequence_number,
            "DeadLetterSource": m.dead_letter_source,
            "DeadLetterReason": m.dead_letter_reason,
            "DeadLetterErrorDescription": m.dead_letter_description,
            "Size": m.size,
        }
        return {
            "sequenceNumber": m.sequence_number,
            "messageId": m.message_id,
            "enqueuedTime": system["EnqueuedTimeUtc"],
            "state": system["State"],
            "deadLetterReason": m.dead_letter_reason,
            "deadLetterErrorDescription": m.dead_letter_description,
            "systemProperties": {k: v for k, v in system.items() if v is not None},
            "applicationProperties": [_app_property(k, v) for k, v in m.application_properties.items()],
            "body": _body(m.body_raw),
        }

    # ------------------------------------------------------------------ changing
    def send(self, path: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one message built from the console's form, through the same path AMQP senders take."""
        ent = self._entity(path, QUEUE, TOPIC)
        body = spec.get("body", "")
        if not isinstance(body, str):
            raise BadRequest("The body must be text.")
        props = Properties(
            message_id=_optional_text(spec, "messageId") or uuid.uuid4().hex,
            content_type=Symbol(ct) if (ct := _optional_text(spec, "contentType")) else None,
            group_id=_optional_text(spec, "sessionId"),
            subject=_optional_text(spec, "subject"),
            correlation_id=_optional_text(spec, "correlationId"),
        )
        ttl = spec.get("timeToLiveSeconds")
        header = None
        if ttl not in (None, ""):
            try:
                ttl_ms = round(float(ttl) * 1000)
            except (TypeError, ValueError):
                raise BadRequest(f"TimeToLive must be a number of seconds, not {ttl!r}.") from None
            if ttl_ms <= 0 or ttl_ms > 0xFFFFFFFF:
                raise BadRequest("TimeToLive must be a positive number of seconds (at most 49 days here).")
            header = Header(True, None, UInt(ttl_ms))
        annotations = {}
        scheduled = _optional_text(spec, "scheduledEnqueueTimeUtc")
        if scheduled:
            annotations[SCHEDULED_ENQUEUE_TIME] = Timestamp(_parse_time(scheduled))
        payload = encode_message(
            header=header, message_annotations=annotations or None, properties=props,
            application_properties=_app_properties(spec.get("applicationProperties") or []) or None,
            data=body.encode("utf-8"),
        )
        try:
            self.broker.send(ent.path, incoming_messages(payload, 0))
        except BrokerError as exc:
            raise BadRequest(exc.description or str(exc)) from None
        finally:
            self._commit()
        return {"sent": 1, "messageId": str(props.message_id), "scheduled": bool(scheduled)}

    def resubmit(self, path: str, sequence_numbers: list[int] | None) -> dict[str, Any]:
        """Move dead-lettered messages back to the entity they were dead-lettered from (all when
        ``sequence_numbers`` is None). A subscription's messages go back to that subscription only,
        not through the topic, so other subscriptions do not get a second copy. The copy is a new
        message in the entity (new sequence number, delivery count 0) without the dead-letter reason;
        messages a receiver holds locked in the dead-letter queue are left where they are."""
        ent = self._entity(path, QUEUE, SUBSCRIPTION)
        dlq = ent.dlq
        assert dlq is not None
        broker = self.broker
        if sequence_numbers is None:
            chosen = sorted(dlq.messages.values(), key=lambda m: m.sequence_number)
        else:
            chosen = []
            for seq in sequence_numbers:
                msg = dlq.messages.get(int(seq))
                if msg is None:
                    raise NotFound(f"No dead-lettered message with sequence number {seq} in '{ent.path}'.")
                chosen.append(msg)
        moved, skipped = 0, 0
        try:
            with broker._op():
                now = self._now_ms()
                for msg in chosen:
                    if msg.locked:
                        skipped += 1
                        continue
                    copy = _fresh_copy(msg)
                    broker._remove(dlq, msg)
                    if ent.kind == SUBSCRIPTION:
                        broker._deliver_to_subscription(ent, copy, now)
                    else:
                        broker._accept(ent, copy, now)
                    moved += 1
        finally:
            self._commit()
        return {"resubmitted": moved, "skippedLocked": skipped}

    def purge(self, path: str, sub_queue: str) -> dict[str, Any]:
        """Remove the messages of an entity: its active/scheduled/deferred ones, its dead-letter queue,
        or everything (``all``, which on a topic includes every subscription)."""
        ent = self._entity(path, QUEUE, TOPIC, SUBSCRIPTION)
        if sub_queue == "all":
            return {"purged": self.ns.purge(ent.path)}
        suffix = SUB_QUEUES.get(sub_queue)
        if suffix is None:
            raise BadRequest(f"Unknown sub-queue '{sub_queue}': use all, active, deadletter or transferdeadletter.")
        container = {"": ent, DLQ_SUFFIX: ent.dlq, TRANSFER_DLQ_SUFFIX: ent.transfer_dlq}[suffix]
        if container is None:
            raise BadRequest(f"'{ent.path}' has no {sub_queue} queue.")
        removed = 0
        try:
            with self.broker._op():
                for msg in list(container.messages.values()):
                    self.broker._remove(container, msg)
                    removed += 1
                container.available.clear()
                for s in container.sessions.values():
                    s.heap.clear()
        finally:
            self._commit()
        return {"purged": removed}


# ---------------------------------------------------------------------- formatting helpers
def _fresh_copy(msg: BrokerMessage) -> BrokerMessage:
    copy = msg.copy()
    for name in DEAD_LETTER_PROPERTIES:
        copy.application_properties.pop(name, None)
    copy.dead_letter_reason = copy.dead_letter_description = copy.dead_letter_source = None
    copy.delivery_count = 0
    copy.state = MessageState.ACTIVE
    copy.scheduled_enqueue_time_ms = None
    copy.expires_at_ms = None
    copy.enqueue_sequence_number = None
    copy.hops = 0
    return copy


def _iso(ms: int | None) -> str | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(text: str) -> int:
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadRequest(f"ScheduledEnqueueTimeUtc '{text}' is not an ISO 8601 date and time.") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def _duration(seconds: float) -> str:
    """Seconds as a .NET TimeSpan string ('1.00:00:00', '00:01:00'), the notation the portal shows."""
    if seconds >= 10 * 365 * 86400:
        return "unlimited"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    fraction = seconds - whole
    text = f"{hours:02d}:{minutes:02d}:{secs:02d}" + (f".{round(fraction * 1000):03d}" if fraction else "")
    return f"{days}.{text}" if days else text


def _properties(config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        if f.name in ("name", "rules", "subscriptions"):
            continue
        value = getattr(config, f.name)
        label = _PROPERTY_NAMES.get(f.name) or "".join(part.capitalize() for part in f.name.split("_"))
        out[label] = _duration(value) if f.name in _DURATIONS and value is not None else value
    for key, value in extras.items():
        out[key] = _duration(value) if key == "AutoDeleteOnIdle" and value is not None else value
    if "AutoDeleteOnIdle" in out and out["AutoDeleteOnIdle"] is None:
        out["AutoDeleteOnIdle"] = "unlimited"
    return out


def _rule(rc: Any) -> dict[str, Any]:
    if rc.filter_type.lower() == "correlation":
        parts = [f"{k} = {v!r}" for k, v in (rc.correlation or {}).items() if k != "Properties"]
        parts += [f"{k} = {v!r}" for k, v in ((rc.correlation or {}).get("Properties") or {}).items()]
        filter_text = " AND ".join(parts) or "(matches every message)"
    else:
        filter_text = rc.sql_expression or "1=1"
    return {"name": rc.name, "filterType": rc.filter_type, "filter": filter_text, "action": rc.action_expression}


def _app_property(name: Any, value: Any) -> dict[str, Any]:
    kind = {str: "string", bool: "boolean", int: "long", float: "double"}.get(type(value), type(value).__name__.lower())
    if isinstance(value, bytes | bytearray):
        shown: Any = value.decode("utf-8", "replace")
        kind = "binary"
    elif isinstance(value, bool | int | float | str) or value is None:
        shown = value
    elif isinstance(value, dt.datetime):
        shown = value.isoformat()
    else:
        shown = str(value)
    return {"name": str(name), "value": shown, "type": kind}


def _app_properties(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        raise BadRequest("applicationProperties must be a list of {name, value, type}.")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict):
            raise BadRequest("applicationProperties must be a list of {name, value, type}.")
        name = str(item.get("name") or "").strip()
        if not name:
            continue
        kind = str(item.get("type") or "string")
        raw = item.get("value", "")
        if kind not in APP_PROPERTY_TYPES:
            raise BadRequest(f"Application property '{name}': unknown type '{kind}'.")
        try:
            if kind == "int":
                out[name] = int(str(raw).strip())
            elif kind == "double":
                out[name] = float(str(raw).strip())
            elif kind == "boolean":
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise ValueError(text)
                out[name] = text == "true"
            else:
                out[name] = "" if raw is None else str(raw)
        except ValueError:
            raise BadRequest(f"Application property '{name}': {raw!r} is not a valid {kind}.") from None
    return out


def _optional_text(spec: dict[str, Any], key: str) -> str | None:
    value = spec.get(key)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _payload(data: bytes) -> dict[str, Any]:
    """Bytes for display: text when they are UTF-8, always hex (cut at MAX_BODY_PREVIEW)."""
    cut = data[:MAX_BODY_PREVIEW]
    try:
        text: str | None = cut.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"text": text, "hex": cut.hex(" "), "size": len(data), "truncated": len(data) > len(cut),
            "base64": base64.b64encode(cut).decode("ascii")}


def _body(body_raw: bytes) -> dict[str, Any]:
    """The body sections as the SDKs would see them: data (bytes), an AMQP value or a sequence."""
    if not body_raw:
        return {"kind": "empty", **_payload(b"")}
    try:
        sections = parse_sections(body_raw).body_sections
    except ValueError:
        return {"kind": "undecodable", **_payload(body_raw)}
    data = [v for code, v in sections if code == SECTION_DATA]
    if data:
        return {"kind": "data", **_payload(b"".join(bytes(v) for v in data))}
    values = [v for code, v in sections if code in (SECTION_AMQP_VALUE, SECTION_AMQP_SEQUENCE)]
    if not values:
        return {"kind": "empty", **_payload(b"")}
    value = values[0]
    if isinstance(value, bytes):
        return {"kind": "value", **_payload(value)}
    shown = value if isinstance(value, str) else repr(value)
    out = _payload(shown.encode("utf-8"))
    out["kind"] = "value"
    out["encoded"] = codec.encode(value).hex(" ") if not isinstance(value, str) else None
    return out
