"""The web console's door into the broker: what it reads (counts, entities, peeked messages, a body)
and what it changes (send, receive and settle, resubmit, purge, entities and rules), as plain
JSON-ready data.

A thin adapter: every operation is the broker's public management API (:mod:`sbemulator.broker.inspection`)
or the namespace's (:mod:`sbemulator.admin.backend`); this module only turns the console's requests into
those calls and their answers into the console's JSON, and broker errors into HTTP errors. Runs on the
emulator's event loop, like every broker call.
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
from sbemulator.broker.api import PurgeJob
from sbemulator.broker.errors import BrokerError, EntityNotFoundError, MessageNotFoundError
from sbemulator.broker.views import SUB_QUEUES, EntityView, SessionView
from sbemulator.config import RuleConfig
from sbemulator.descriptions import (
    MAX_TIMESPAN_SECONDS,
    QUEUE,
    STATUSES,
    SUBSCRIPTION,
    TOPIC,
    Codec,
    by_atom,
    by_field,
    for_kind,
    parse_duration,
)
from sbemulator.gateway.deliveries import SCHEDULED_ENQUEUE_TIME, incoming_messages
from sbemulator.model import BrokerMessage, Delivery, MessageState, Outcome, ReceiveMode

from .backend import GIVEN_SUFFIX, Namespace, admin_error_from, store_refusal
from .errors import AdminError, BadRequest, NotFound

ACTIVE = "active"  # the console's name for the entity itself, beside the SDKs' sub-queue names
MAX_PEEK = 100
MAX_BODY_PREVIEW = 256 * 1024  # bytes shown as text/hex; larger bodies are cut (and say so)
APP_PROPERTY_TYPES = {"string", "int", "double", "boolean"}
MAX_RECEIVE = 50  # messages one console receive takes
MAX_HELD_SESSIONS = 16  # session receivers the console keeps open for peek-locked messages (oldest closed)
SETTLE_ACTIONS = {"complete": Outcome.COMPLETED, "abandon": Outcome.ABANDONED, "defer": Outcome.DEFERRED,
                  "deadletter": Outcome.DEAD_LETTERED}
DEAD_LETTER_SUB_QUEUES = tuple(SUB_QUEUES)  # both sub-queues hold dead-lettered messages

class ConsoleBroker:
    def __init__(self, namespace: Namespace) -> None:
        self.ns = namespace
        self.broker = namespace.broker
        # Peek-locked messages of a session entity stay locked only while their session receiver is
        # open: the console keeps those receivers here until their messages are settled. A plain
        # receiver is closed at once; its locks last, and settle by token.
        self._held: dict[tuple[str, str], Any] = {}  # broker.receiver.Receiver objects

    # ------------------------------------------------------------------ plumbing
    def _view(self, path: str, *kinds: str) -> EntityView:
        view = self.broker.find_entity(path.strip("/"))
        if view is None or view.kind not in kinds:
            raise NotFound(f"The messaging entity '{path}' could not be found.")
        return view

    def _sub_queue_path(self, view: EntityView, sub_queue: str, also: tuple[str, ...] = ()) -> str:
        """The broker path of one of an entity's sub-queues, by the console's name for it."""
        if sub_queue == ACTIVE:
            return view.path
        suffix = SUB_QUEUES.get(sub_queue)
        if suffix is None:
            names = ", ".join([*also, ACTIVE, *SUB_QUEUES])
            raise BadRequest(f"Unknown sub-queue '{sub_queue}': use {names}.")
        if view.kind == TOPIC:
            raise BadRequest("A topic has no dead-letter queues; its subscriptions do.")
        return f"{view.path}/{suffix}"

    # ------------------------------------------------------------------ reading
    def overview(self) -> dict[str, Any]:
        """Every queue and topic (subscriptions nested) with the counts the portal shows."""
        views = self.broker.entity_views()
        entities = []
        for view in views:
            if view.kind == SUBSCRIPTION:
                continue
            item = _summary(view)
            if view.kind == TOPIC:
                item["subscriptions"] = [_summary(v) for v in views if v.topic == view.path]
            entities.append(item)
        entities.sort(key=lambda e: (e["kind"] != QUEUE, e["path"].lower()))
        return {"namespace": self.ns.name, "entities": entities, "now": _iso(self.broker.now_ms())}

    def entity(self, path: str) -> dict[str, Any]:
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        info = self.ns.get(view.kind, view.path)
        out = _summary(view)
        out["properties"] = _properties(view.kind, info.config, info.extras)
        out["sizeInBytes"] = info.size_in_bytes
        if view.kind == TOPIC:
            out["subscriptions"] = [{**_summary(sub), "rules": [_rule(rc) for rc in sub.rules]}
                                    for sub in self.broker.entity_views(topic=view.path)]
        if view.kind == SUBSCRIPTION:
            out["rules"] = [_rule(rc) for rc in view.rules]
            out["topic"] = view.topic
        if view.requires_session:
            out["sessions"] = [_session(s) for s in self.broker.session_views(view.path)]
        return out

    def peek(self, path: str, sub_queue: str, from_sequence: int, count: int) -> dict[str, Any]:
        """A page of messages (any state) from a sequence number on; no lock, delivery count unchanged."""
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        target = self._sub_queue_path(view, sub_queue)
        count = max(1, min(count, MAX_PEEK))
        messages = self.broker.peek(target, max(from_sequence, 0), count + 1)
        more = len(messages) > count
        messages = messages[:count]
        next_from = messages[-1].sequence_number + 1 if messages else from_sequence
        return {
            "path": view.path,
            "subQueue": sub_queue,
            "messages": [_message(m, sub_queue) for m in messages],
            "nextFromSequenceNumber": next_from,
            "more": more,
        }

    # ------------------------------------------------------------------ changing
    def send(self, path: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one message built from the console's form, through the same path AMQP senders take."""
        view = self._view(path, QUEUE, TOPIC)
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
        messages = incoming_messages(payload, 0)
        try:
            self.broker.send(view.path, messages)
        except BrokerError as exc:
            self.ns.commit()
            raise BadRequest(exc.description or str(exc)) from None
        failure = self.ns.commit()
        if failure is not None:
            # The store could not write it (a full disk: QuotaExceeded; another error: ServerBusy): refused
            # like an SDK's send, and taken back so that it is never delivered nor written later.
            self.broker.withdraw(view.path, messages)
            raise store_refusal(failure)
        return {"sent": 1, "messageId": str(props.message_id), "scheduled": bool(scheduled)}

    def resubmit(self, path: str, sequence_numbers: list[int] | None) -> dict[str, Any]:
        """Move dead-lettered messages back to the entity they were dead-lettered from (all when
        ``sequence_numbers`` is None): see the broker's ``resubmit_dead_lettered``."""
        view = self._view(path, QUEUE, SUBSCRIPTION)
        try:
            # answered once the moved messages are stored; refused (403 QuotaExceeded, 503 ServerBusy)
            # and taken back, the dead-lettered ones where they were, when the store cannot write them
            done = self.ns.stored(lambda: self.broker.resubmit_dead_lettered(view.path, sequence_numbers))
        except MessageNotFoundError as exc:
            raise NotFound(exc.description) from None
        return {"resubmitted": len(done.sequence_numbers), "skippedLocked": len(done.skipped_locked)}

    def purge(self, path: str, sub_queue: str) -> dict[str, Any]:
        """Remove the messages of an entity: its active/scheduled/deferred ones, one dead-letter queue,
        or everything (``all``, which on a topic includes every subscription)."""
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        if sub_queue == "all":
            return {"purged": self.ns.purge(view.path)}
        target = self._sub_queue_path(view, sub_queue, also=("all",))
        try:
            return {"purged": self.broker.purge(target, sub_queues=False)}
        except EntityNotFoundError as exc:
            raise NotFound(exc.description) from None
        finally:
            self.ns.commit()


    def begin_purge(self, path: str, sub_queue: str) -> PurgeJob:
        """:meth:`purge` in slices: the messages are out of the entity when this returns, the job drops
        them (``run_async``, committing after each slice)."""
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        if sub_queue == "all":
            return self.ns.begin_purge(view.path)
        target = self._sub_queue_path(view, sub_queue, also=("all",))
        try:
            return self.broker.begin_purge(target, sub_queues=False)
        except EntityNotFoundError as exc:
            raise NotFound(exc.description) from None

    def body(self, path: str, sub_queue: str, sequence_number: int) -> tuple[bytes, str | None, str]:
        """One message's whole body (its data sections joined, or an AMQP value's text), its content
        type and a file name, for a download."""
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        target = self._sub_queue_path(view, sub_queue)
        peeked = self.broker.peek(target, max(sequence_number, 0), 1)
        found = [m for m in peeked if m.sequence_number == sequence_number]
        if not found:
            raise NotFound(f"No message with sequence number {sequence_number} in {target}.")
        m = found[0]
        data = _body_bytes(m.body_raw)
        extension = ".json" if "json" in (m.content_type or "") else ".txt" if _is_text(data) else ".bin"
        name = f"{view.name}-{sequence_number}{extension}"
        return data, m.content_type, name

    def receive(self, path: str, sub_queue: str, mode: str, count: int, session_id: str | None) -> dict[str, Any]:
        """Receive up to ``count`` available messages as an SDK receiver would: ``peeklock`` locks them
        (settle them with :meth:`settle` before the lock lapses) and counts the delivery;
        ``receiveanddelete`` removes them. A session entity's receive takes one session: the given one
        or the next available."""
        view = self._view(path, QUEUE, SUBSCRIPTION)
        target = self._sub_queue_path(view, sub_queue)
        if mode not in ("peeklock", "receiveanddelete"):
            raise BadRequest("The receive mode must be 'peeklock' or 'receiveanddelete'.")
        receive_mode = ReceiveMode.PEEK_LOCK if mode == "peeklock" else ReceiveMode.RECEIVE_AND_DELETE
        count = max(1, min(count, MAX_RECEIVE))
        sessions = view.requires_session and sub_queue == ACTIVE
        deliveries: list[Delivery] = []
        held_before = self._held.get((target.lower(), session_id)) if sessions and session_id else None
        try:
            receiver = held_before if held_before is not None and held_before.mode is receive_mode else \
                self.broker.open_receiver(target, receive_mode, _nothing, session_id=session_id or None,
                                          next_available_session=sessions and not session_id)
            try:
                if sessions and receiver.session is None:
                    receiver.try_acquire_session()
                deliveries = receiver.take(count) if not sessions or receiver.session is not None else []
            finally:
                self.ns.commit()
                if sessions and receive_mode is ReceiveMode.PEEK_LOCK and receiver.locks:
                    self._hold(target, receiver)
                else:
                    self._held.pop((target.lower(), receiver.session_id or ""), None)
                    receiver.close()
        except AdminError:
            raise
        except BrokerError as exc:
            raise admin_error_from(exc) from None
        return {"path": view.path, "subQueue": sub_queue, "mode": mode,
                "sessionId": receiver.session_id,
                "messages": [_received(d, sub_queue) for d in deliveries]}

    def _hold(self, target: str, receiver: Any) -> None:
        key = (target.lower(), receiver.session_id or "")
        old = self._held.pop(key, None)
        if old is not None and old is not receiver:
            old.close()
        self._held[key] = receiver
        while len(self._held) > MAX_HELD_SESSIONS:
            self._held.pop(next(iter(self._held))).close()

    def settle(self, path: str, sub_queue: str, lock_token: str, action: str, session_id: str | None,
               reason: str | None, description: str | None) -> dict[str, Any]:
        """Settle one peek-locked message by its lock token: complete, abandon, defer or dead-letter
        (with a reason and a description, as ``ServiceBusReceiver.dead_letter_message`` takes them)."""
        view = self._view(path, QUEUE, SUBSCRIPTION)
        target = self._sub_queue_path(view, sub_queue)
        outcome = SETTLE_ACTIONS.get(action)
        if outcome is None:
            raise BadRequest(f"Unknown settlement '{action}': use {', '.join(SETTLE_ACTIONS)}.")
        try:
            token = uuid.UUID(lock_token)
        except ValueError:
            raise BadRequest(f"The lock token '{lock_token}' is not a UUID.") from None
        held = self._held.get((target.lower(), session_id or "")) if session_id else None
        try:
            if held is not None:
                if outcome is Outcome.COMPLETED:
                    held.complete(token)
                elif outcome is Outcome.ABANDONED:
                    held.abandon(token)
                elif outcome is Outcome.DEFERRED:
                    held.defer(token)
                else:
                    held.dead_letter(token, reason, description)
                if not held.locks:
                    self._held.pop((target.lower(), session_id or ""), None)
                    held.close()
            else:
                self.broker.update_disposition(target, [token], outcome, reason, description,
                                               session_id=session_id or None)
        except BrokerError as exc:
            raise admin_error_from(exc) from None
        finally:
            self.ns.commit()
        return {"settled": action, "lockToken": lock_token}

    # ------------------------------------------------------------------ entities and rules
    @staticmethod
    def schema(kind: str) -> dict[str, Any]:
        """The properties a console form offers for ``kind``, straight from the one table
        (sbemulator.descriptions): name, type, the management API's default, bounds in words, and
        whether it is fixed once the entity exists."""
        if kind not in (QUEUE, TOPIC, SUBSCRIPTION):
            raise BadRequest("The kind must be queue, topic or subscription.")
        out = []
        for prop in for_kind(kind):
            if prop.codec is Codec.RUNTIME or prop.atom == "AuthorizationRules":
                continue
            default = prop.api_default
            if prop.codec is Codec.DURATION:
                default = "unlimited" if default is None else _duration(default)
            out.append({"name": prop.atom, "type": prop.codec.value, "default": default,
                        "bounds": prop.bound_doc, "immutable": prop.immutable,
                        "choices": list(STATUSES) if prop.codec is Codec.STATUS else None})
        return {"kind": kind, "properties": out}

    def put_entity(self, spec: dict[str, Any], *, create: bool) -> dict[str, Any]:
        """Create or update a queue, topic or subscription from the console's form. Properties are read
        under their Service Bus names (sbemulator.descriptions), durations as ISO 8601 or TimeSpan
        text, and checked by the admin API's own rules (Namespace.put): an update sends them all."""
        kind = str(spec.get("kind") or "")
        if kind not in (QUEUE, TOPIC, SUBSCRIPTION):
            raise BadRequest("The entity 'kind' must be queue, topic or subscription.")
        name = str(spec.get("name") or "").strip()
        topic = str(spec.get("topic") or "").strip() or None
        if kind == SUBSCRIPTION and topic is None:
            raise BadRequest("A subscription needs its 'topic'.")
        raw = spec.get("properties") or {}
        if not isinstance(raw, dict):
            raise BadRequest("'properties' must be an object of Service Bus property names and values.")
        props = {p.atom: p for p in for_kind(kind) if p.codec is not Codec.RUNTIME and p.atom != "AuthorizationRules"}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            prop = props.get(key)
            if prop is None:
                raise BadRequest(f"'{key}' is not a property a {kind} can be given.")
            if value is None or value == "":
                continue
            values[key] = _form_value(prop.atom, prop.codec, value)
        info, created = self.ns.put(kind, name, values, mode="create" if create else "update", topic=topic)
        path = f"{info.topic}/Subscriptions/{info.name}" if kind == SUBSCRIPTION else info.name
        return {"path": path, "kind": kind, "created": created}

    def delete_entity(self, path: str) -> dict[str, Any]:
        view = self._view(path, QUEUE, TOPIC, SUBSCRIPTION)
        self.ns.delete(view.kind, view.path)
        return {"deleted": view.path, "kind": view.kind}

    def put_rule(self, spec: dict[str, Any], *, create: bool) -> dict[str, Any]:
        """Add or replace a subscription's rule: a SQL filter, or a correlation filter (its system
        properties and application properties), with an optional SQL action."""
        view = self._view(str(spec.get("path") or ""), SUBSCRIPTION)
        name = str(spec.get("name") or "").strip()
        filter_type = str(spec.get("filterType") or "Sql")
        action = _optional_text(spec, "action")
        if filter_type == "Sql":
            rule = RuleConfig(name, "Sql", _optional_text(spec, "sqlExpression") or "1=1", action_expression=action)
        elif filter_type == "Correlation":
            raw = spec.get("correlation") or {}
            if not isinstance(raw, dict):
                raise BadRequest("'correlation' must be an object of filter properties.")
            correlation: dict[str, Any] = {k: str(v) for k, v in raw.items()
                                           if k in CORRELATION_KEYS and v not in (None, "")}
            unknown = [k for k in raw if k not in CORRELATION_KEYS and k != "Properties"]
            if unknown:
                raise BadRequest(f"Unknown correlation filter property '{unknown[0]}'.")
            app = _app_properties(raw.get("Properties") or [])
            if app:
                correlation["Properties"] = app
            rule = RuleConfig(name, "Correlation", correlation=correlation, action_expression=action)
        else:
            raise BadRequest("The filter type must be Sql or Correlation.")
        assert view.topic is not None
        self.ns.put_rule(view.topic, view.name, rule, mode="create" if create else "update")
        return {"path": view.path, "rule": name, "created": create}

    def delete_rule(self, path: str, name: str) -> dict[str, Any]:
        view = self._view(path, SUBSCRIPTION)
        assert view.topic is not None
        self.ns.delete_rule(view.topic, view.name, name)
        return {"path": view.path, "deletedRule": name}


# ---------------------------------------------------------------------- formatting helpers
def _summary(view: EntityView) -> dict[str, Any]:
    counts = view.counts
    return {
        "kind": view.kind,
        "path": view.path,
        "name": view.name,
        "requiresSession": view.requires_session,
        "counts": {
            "active": counts.active,
            "deadLetter": counts.dead_letter,
            "scheduled": counts.scheduled,
            "deferred": counts.deferred,
            # Forwarding is synchronous in the emulator: nothing ever waits for transfer.
            "transfer": 0,
            "transferDeadLetter": counts.transfer_dead_letter,
        },
    }


def _session(s: SessionView) -> dict[str, Any]:
    return {
        "id": s.id,
        "messageCount": s.message_count,
        "lockedUntil": _iso(s.locked_until_ms),
        "state": _payload(s.state) if s.state is not None else None,
    }


def _state(m: BrokerMessage, sub_queue: str) -> str:
    """The state the portal's explorer shows: a message of a dead-letter queue is dead-lettered there
    (the broker's x-opt-message-state stays Active: it is receivable from that queue)."""
    if sub_queue in DEAD_LETTER_SUB_QUEUES:
        return "DeadLettered"
    return MessageState(m.state).name.capitalize()


def _message(m: BrokerMessage, sub_queue: str = ACTIVE) -> dict[str, Any]:
    system = {
        "MessageId": m.message_id,
        "SequenceNumber": m.sequence_number,
        "EnqueuedTimeUtc": _iso(m.enqueued_time_ms),
        "State": _state(m, sub_queue),
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


def _received(d: Delivery, sub_queue: str) -> dict[str, Any]:
    out = _message(d.message, sub_queue)
    out["lockToken"] = str(d.lock_token) if d.lock_token is not None else None
    out["lockedUntil"] = _iso(d.locked_until_ms)
    return out


def _nothing() -> None:
    """The console's receivers take once, when asked: they need no wake-up."""


CORRELATION_KEYS = ("ContentType", "CorrelationId", "Label", "MessageId", "ReplyTo", "ReplyToSessionId",
                    "SessionId", "To")


def _form_value(atom: str, kind: Codec, value: Any) -> Any:
    """A form field (text, a number or a checkbox's boolean) -> the value Namespace.put checks."""
    if kind is Codec.DURATION:
        text = str(value).strip()
        if text.lower() in ("unlimited", "never", "max"):
            return MAX_TIMESPAN_SECONDS
        try:
            return parse_duration(text)
        except ValueError:
            raise BadRequest(f"The value supplied for {atom} is invalid: '{text}' is not a duration "
                             "(ISO 8601 such as PT1M, or a TimeSpan such as 00:01:00).") from None
    if kind is Codec.BOOL:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise BadRequest(f"The value supplied for {atom} is invalid: expected true or false.")
        return text == "true"
    if kind is Codec.INT:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise BadRequest(f"The value supplied for {atom} is invalid: expected an integer.") from None
    return value if not isinstance(value, str) else value.strip()


def _body_bytes(body_raw: bytes) -> bytes:
    """The body as the SDKs hand it to an application: data sections joined, or the AMQP value's
    text (its repr for a non-string value)."""
    if not body_raw:
        return b""
    try:
        sections = parse_sections(body_raw).body_sections
    except ValueError:
        return body_raw
    data = [v for code, v in sections if code == SECTION_DATA]
    if data:
        return b"".join(bytes(v) for v in data)
    values = [v for code, v in sections if code in (SECTION_AMQP_VALUE, SECTION_AMQP_SEQUENCE)]
    if not values:
        return b""
    value = values[0]
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    return (value if isinstance(value, str) else repr(value)).encode("utf-8")


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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


def _properties(kind: str, config: Any, extras: dict[str, Any]) -> dict[str, Any]:
    """The entity's settings under their Service Bus names (the table's), durations as text. The
    authorization rules are left out: their keys are secrets."""
    fields = by_field(kind)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        prop = fields.get(f.name)
        if prop is None or prop.codec is Codec.RUNTIME:
            continue
        value = getattr(config, f.name)
        out[prop.atom] = _duration(value) if prop.codec is Codec.DURATION and value is not None else value
    for key, value in extras.items():
        if key.endswith(GIVEN_SUFFIX):  # a forwarding target as a client wrote it (the Atom echo's)
            continue
        prop = by_atom(kind).get(key)
        duration = prop is not None and prop.codec is Codec.DURATION
        out[key] = _duration(value) if duration and value is not None else value
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
    return {"name": rc.name, "filterType": rc.filter_type, "filter": filter_text, "action": rc.action_expression,
            "correlation": rc.correlation}


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
