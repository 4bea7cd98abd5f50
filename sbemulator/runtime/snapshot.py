"""Snapshots: a namespace's entities (with their rules) and messages in one JSON file, to seed a test or
to share a broken state in a bug report.

Export reads the broker through its public API only (entity views, peek, session views), so it sees
every message in every state. Import at start-up happens before the broker loads: the snapshot is
handed to the broker as if the store held it (:class:`SeededStore`, or written into a durable
store), so the broker rebuilds it the way it rebuilds a durable namespace after a restart
(sequence numbers, states, timers, session states), with no second code path into the broker. A
durable store keeps the snapshot in its own files, so it survives the next restart.

Import into a running emulator (:func:`import_snapshot`; ``POST /$admin/snapshot``, the console,
``Emulator.import_snapshot``) *replaces* the namespace: the result is what a fresh emulator started
with ``--snapshot`` shows (the config file's entities, the snapshot's entities over them, the
snapshot's messages and nothing else). A test author seeding a state wants exactly that state, not
a mix with what an earlier test left; a merge would also have to renumber messages whose sequence
numbers clash. The snapshot is first loaded into a throw-away broker on the same config, the
start-up path itself, and checked there; only a snapshot that loads whole is applied
(``Broker.replace_state``), so a bad one changes nothing.

The format (``"format": "sbemulator-snapshot"``, ``"version": 1``) is described in docs/emulator.md
("Snapshots"). A snapshot is untrusted input: it is parsed as JSON and AMQP-encoded values only
(never pickle), its size is bounded (:data:`MAX_SNAPSHOT_BYTES`), and every field is checked.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..amqp import codec
from ..broker.core import Broker
from ..broker.entity_records import description_json
from ..broker.errors import BrokerError
from ..broker.topology import runtime_record
from ..broker.views import SUB_QUEUES as VIEW_SUB_QUEUES
from ..descriptions import KINDS
from ..model import BrokerMessage, MessageState
from ..store.base import IndexEntry
from ..store.memory import MemoryStore

if TYPE_CHECKING:
    from ..broker.api import BrokerAPI
    from ..config import NamespaceConfig
    from ..store.base import Store

FORMAT = "sbemulator-snapshot"
VERSION = 1
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024  # the file (export refuses to write more, import to read more)
PAGE = 1000  # messages read per peek while exporting
# A message's "subQueue" in the file, and what it appends to its entity's path (broker/views.py's sub-queues).
SNAPSHOT_QUEUES = {"active": "", **{name: f"/{suffix}" for name, suffix in VIEW_SUB_QUEUES.items()}}
STATES = {"active": MessageState.ACTIVE, "deferred": MessageState.DEFERRED, "scheduled": MessageState.SCHEDULED}


class SnapshotError(ValueError):
    """A snapshot that cannot be read or written; the message says what and where."""


# ---------------------------------------------------------------------- export
def export_snapshot(broker: BrokerAPI, namespace: str) -> dict[str, Any]:
    """Every queue, topic and subscription (their full descriptions, rules included), every message of
    each and of its dead-letter queues in every state, and session states."""
    entities: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    sessions: list[dict[str, Any]] = []
    size = 0
    for view in broker.entity_views():
        if view.kind not in KINDS:
            continue
        description = description_json(view.config)
        entities.append({"kind": view.kind, "path": view.path, "topic": view.topic, "description": description})
        if view.kind == "topic":
            continue  # a topic holds no messages of its own but scheduled ones, kept below
        for sub_queue, suffix in SNAPSHOT_QUEUES.items():
            for msg in _all_messages(broker, view.path + suffix):
                item = _message_to_json(msg, view.path, sub_queue)
                size += len(msg.body_raw) + len(msg.properties_raw) + 256
                if size > MAX_SNAPSHOT_BYTES:
                    raise SnapshotError(f"The namespace holds more than a snapshot may ({_mib(MAX_SNAPSHOT_BYTES)}); "
                                        "purge some messages first.")
                messages.append(item)
        if view.requires_session:
            for s in broker.session_views(view.path):
                if s.state is not None:
                    sessions.append({"entity": view.path, "sessionId": s.id,
                                     "state": base64.b64encode(s.state).decode("ascii")})
    for view in broker.entity_views(kind="topic"):
        for msg in _all_messages(broker, view.path):  # scheduled messages wait on the topic
            messages.append(_message_to_json(msg, view.path, "active"))
    return {
        "format": FORMAT,
        "version": VERSION,
        "namespace": namespace,
        "exportedAtUtc": _iso(broker.now_ms()),
        "entities": entities,
        "messages": messages,
        "sessionStates": sessions,
    }


def snapshot_file(broker: BrokerAPI, namespace: str) -> tuple[bytes, str]:
    """The snapshot as the management plane hands it out: the file's bytes and its name
    (``<namespace>-<time>.snapshot.json``). Raises :class:`SnapshotError` above the size limit."""
    snapshot = export_snapshot(broker, namespace)
    stamp = (snapshot["exportedAtUtc"] or "").replace(":", "").replace("-", "").split(".")[0]
    return dump_snapshot(snapshot), f"{namespace}-{stamp}.snapshot.json"


def dump_snapshot(snapshot: dict[str, Any]) -> bytes:
    data = json.dumps(snapshot, indent=1).encode("utf-8")
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"The snapshot is {len(data)} bytes, above the limit of {_mib(MAX_SNAPSHOT_BYTES)}.")
    return data


def _all_messages(broker: BrokerAPI, path: str) -> Iterator[BrokerMessage]:
    start = 0
    while True:
        page = broker.peek(path, start, PAGE)
        yield from page
        if len(page) < PAGE:
            return
        start = page[-1].sequence_number + 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _amqp(values: dict[Any, Any]) -> str | None:
    """Application properties and annotations keep their AMQP types (uint, symbol, timestamp, ...)."""
    if not values:
        return None
    return _b64(codec.encode(values))


def _message_to_json(msg: BrokerMessage, entity: str, sub_queue: str) -> dict[str, Any]:
    state = {MessageState.ACTIVE: "active", MessageState.DEFERRED: "deferred",
             MessageState.SCHEDULED: "scheduled"}.get(MessageState(msg.state), "active")
    return {
        "entity": entity,
        "subQueue": sub_queue,
        "sequenceNumber": msg.sequence_number,
        "state": state,
        "enqueuedTimeUtc": _iso(msg.enqueued_time_ms),
        "enqueuedTimeMs": msg.enqueued_time_ms,
        "deliveryCount": msg.delivery_count,
        "messageId": msg.message_id,
        "correlationId": msg.correlation_id,
        "sessionId": msg.session_id,
        "subject": msg.subject,
        "to": msg.to,
        "replyTo": msg.reply_to,
        "replyToSessionId": msg.reply_to_session_id,
        "contentType": msg.content_type,
        "partitionKey": msg.partition_key,
        "timeToLiveMs": msg.time_to_live_ms,
        "expiresAtMs": msg.expires_at_ms,
        "scheduledEnqueueTimeMs": msg.scheduled_enqueue_time_ms,
        "enqueuedSequenceNumber": msg.enqueue_sequence_number,
        "deadLetterSource": msg.dead_letter_source,
        "deadLetterReason": msg.dead_letter_reason,
        "deadLetterErrorDescription": msg.dead_letter_description,
        "hops": msg.hops,
        "headerFields": list(msg.header_fields) if msg.header_fields is not None else None,
        "size": msg.size,
        "propertiesChanged": msg.properties_changed,
        "properties": _b64(msg.properties_raw),
        "applicationProperties": _amqp(msg.application_properties),
        "annotations": _amqp(msg.annotations),
        "deliveryAnnotations": _amqp(msg.delivery_annotations),
        "body": _b64(msg.body_raw),
    }


# ---------------------------------------------------------------------- import
def read_snapshot(source: str | Path | bytes | dict[str, Any]) -> dict[str, Any]:
    """A snapshot from a file, its bytes or an already parsed object, checked for its format and size."""
    if isinstance(source, dict):
        data = source
    else:
        if isinstance(source, bytes):
            raw = source
        else:
            path = Path(source)
            try:
                size = path.stat().st_size
            except OSError as exc:
                raise SnapshotError(f"Cannot read the snapshot {path}: {exc.strerror}.") from None
            if size > MAX_SNAPSHOT_BYTES:
                raise SnapshotError(f"The snapshot {path} is {size} bytes, above the limit of "
                                    f"{_mib(MAX_SNAPSHOT_BYTES)}.")
            raw = path.read_bytes()
        if len(raw) > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(f"The snapshot is {len(raw)} bytes, above the limit of {_mib(MAX_SNAPSHOT_BYTES)}.")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SnapshotError(f"The snapshot is not valid JSON: {exc}.") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"Not an sbemulator snapshot (expected \"format\": \"{FORMAT}\").")
    if data.get("version") != VERSION:
        raise SnapshotError(f"Snapshot version {data.get('version')!r} is not supported (this emulator reads "
                            f"version {VERSION}).")
    for key in ("entities", "messages", "sessionStates"):
        if not isinstance(data.get(key, []), list):
            raise SnapshotError(f"The snapshot's '{key}' must be a list.")
    _parse(data)  # every field checked now, before an emulator starts from it
    return data


class SeededStore(MemoryStore):
    """The in-memory store, whose start-up loads yield a snapshot's entities, messages, sequence numbers
    and session states (a plain in-memory store loads nothing). Its writes are the in-memory store's
    own (dropped: the broker keeps the only copy), so the per-message path is unchanged."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self._entities, self._messages, self._sequences, self._sessions = _parse(snapshot)

    def load_entities(self) -> list[tuple[str, str, str]]:
        return list(self._entities)

    def load_messages(self, paged: Collection[str] = ()) -> Iterator[tuple[str, BrokerMessage | IndexEntry]]:
        return iter(self._messages)  # in memory: nothing is paged (page_window 0)

    def load_sequences(self) -> dict[str, int]:
        return dict(self._sequences)

    def load_session_states(self) -> Iterator[tuple[str, str, bytes]]:
        return iter(self._sessions)


def seed_store(store: Store, snapshot: dict[str, Any], *, durable: bool) -> Any:
    """The store the broker should load from: ``store`` itself with the snapshot written into it
    (durable), or a :class:`SeededStore` in place of the in-memory one."""
    if not durable:
        return SeededStore(snapshot)
    entities, messages, sequences, sessions = _parse(snapshot)
    for key, kind, description in entities:
        store.save_entity(key, kind, description)
    for key, msg in messages:
        store.put_message(key, msg)
    for key, last in sequences.items():
        store.set_sequence(key, last)
    for key, sid, state in sessions:
        store.set_session_state(key, sid, state)
    store.commit()
    return store


def import_snapshot(broker: Broker, snapshot: dict[str, Any]) -> dict[str, int]:
    """Replace the running broker's namespace with ``snapshot`` (read by :func:`read_snapshot`), as a
    fresh start with ``--snapshot`` would build it (module docstring). Checked first on a throw-away
    broker built from the same config the way start-up builds one: a snapshot that does not load whole
    raises :class:`SnapshotError` naming the problem, and nothing has changed. Returns what was
    imported (``{"entities": n, "messages": m, "sessionStates": k}``). Run it on the broker's thread,
    then commit."""
    seeded = SeededStore(snapshot)
    check_loads(broker.config, seeded, broker.clock)
    broker.replace_state(seeded)
    return {"entities": len(seeded._entities), "messages": len(seeded._messages),
            "sessionStates": len(seeded._sessions)}


def check_loads(config: NamespaceConfig, seeded: SeededStore, clock: Callable[[], float]) -> None:
    """Build a broker from ``seeded`` on ``config`` and check that every entity, message and session
    state of the snapshot found its place (start-up drops what has none, such as a subscription
    whose topic neither the snapshot nor the config file has, or a message of an entity that is in
    neither): :class:`SnapshotError` naming the first that did not."""
    try:
        trial = Broker(config, seeded, clock=clock)
    except (BrokerError, TypeError, ValueError, KeyError) as exc:
        raise SnapshotError(f"The snapshot cannot be loaded: {exc}") from None
    try:
        for i, (key, kind, _) in enumerate(seeded._entities):
            if trial.find_entity(key) is None:
                raise SnapshotError(f"entities[{i}]: the {kind} '{key}' cannot be created (a subscription needs "
                                    "its topic in the snapshot or in the config file).")
        for what, keys in (("messages", [k for k, _ in seeded._messages]),
                           ("sessionStates", [k for k, _, _ in seeded._sessions])):
            for i, key in enumerate(keys):
                try:
                    trial.resolve(key)
                except BrokerError:
                    raise SnapshotError(f"{what}[{i}]: the entity '{key}' is neither in the snapshot nor in "
                                        "the config file.") from None
    finally:
        trial.close()


ParsedSnapshot = tuple[list[tuple[str, str, str]], list[tuple[str, BrokerMessage]], dict[str, int],
                       list[tuple[str, str, bytes]]]


def _parse(snapshot: dict[str, Any]) -> ParsedSnapshot:
    entities: list[tuple[str, str, str]] = []
    for i, item in enumerate(snapshot.get("entities", [])):
        where = f"entities[{i}]"
        kind, path, desc = _field(item, "kind", str, where), _field(item, "path", str, where), item.get("description")
        if kind not in KINDS or not isinstance(desc, dict):
            raise SnapshotError(f"{where}: 'kind' must be one of {', '.join(KINDS)} and 'description' an object.")
        topic = _field(item, "topic", str, where) if kind == "subscription" else None
        try:
            record = runtime_record(kind, desc, topic)
        except BrokerError as exc:
            raise SnapshotError(f"{where} ({path}): {exc}") from None
        entities.append((path.lower(), kind, record))
    messages: list[tuple[str, BrokerMessage]] = []
    sequences: dict[str, int] = {}
    for i, item in enumerate(snapshot.get("messages", [])):
        where = f"messages[{i}]"
        entity = _field(item, "entity", str, where)
        sub_queue = item.get("subQueue", "active")
        if sub_queue not in SNAPSHOT_QUEUES:
            raise SnapshotError(f"{where}: unknown subQueue {sub_queue!r}.")
        msg = _message_from_json(item, where)
        messages.append(((entity + SNAPSHOT_QUEUES[sub_queue]).lower(), msg))
        owner = entity.lower()
        sequences[owner] = max(sequences.get(owner, 0), msg.sequence_number)
    sessions: list[tuple[str, str, bytes]] = []
    for i, item in enumerate(snapshot.get("sessionStates", [])):
        where = f"sessionStates[{i}]"
        sessions.append((_field(item, "entity", str, where).lower(), _field(item, "sessionId", str, where),
                         _unb64(_field(item, "state", str, where), where)))
    return entities, messages, sequences, sessions


def _message_from_json(item: Any, where: str) -> BrokerMessage:
    if not isinstance(item, dict):
        raise SnapshotError(f"{where}: a message must be an object.")
    state = STATES.get(item.get("state", "active"))
    if state is None:
        raise SnapshotError(f"{where}: unknown state {item.get('state')!r} (use {', '.join(STATES)}).")
    header = item.get("headerFields")
    if header is not None and (not isinstance(header, list) or len(header) != 3):
        raise SnapshotError(f"{where}: 'headerFields' must be [durable, priority, first-acquirer].")
    sequence_number = _field(item, "sequenceNumber", int, where)
    if sequence_number < 1:
        raise SnapshotError(f"{where}: 'sequenceNumber' must be positive.")
    return BrokerMessage(
        properties_raw=_unb64(_optional(item, "properties", str, where) or "", where),
        application_properties=_amqp_values(item.get("applicationProperties"), where),
        body_raw=_unb64(_optional(item, "body", str, where) or "", where),
        message_id=_optional(item, "messageId", str, where),
        correlation_id=_optional(item, "correlationId", str, where),
        session_id=_optional(item, "sessionId", str, where),
        subject=_optional(item, "subject", str, where),
        to=_optional(item, "to", str, where),
        reply_to=_optional(item, "replyTo", str, where),
        reply_to_session_id=_optional(item, "replyToSessionId", str, where),
        content_type=_optional(item, "contentType", str, where),
        partition_key=_optional(item, "partitionKey", str, where),
        time_to_live_ms=_optional(item, "timeToLiveMs", int, where),
        scheduled_enqueue_time_ms=_optional(item, "scheduledEnqueueTimeMs", int, where),
        size=_optional(item, "size", int, where) or 0,
        sequence_number=sequence_number,
        enqueued_time_ms=_field(item, "enqueuedTimeMs", int, where),
        enqueue_sequence_number=_optional(item, "enqueuedSequenceNumber", int, where),
        expires_at_ms=_optional(item, "expiresAtMs", int, where),
        delivery_count=_optional(item, "deliveryCount", int, where) or 0,
        state=state,
        dead_letter_source=_optional(item, "deadLetterSource", str, where),
        dead_letter_reason=_optional(item, "deadLetterReason", str, where),
        dead_letter_description=_optional(item, "deadLetterErrorDescription", str, where),
        hops=_optional(item, "hops", int, where) or 0,
        properties_changed=bool(item.get("propertiesChanged", False)),
        annotations=_amqp_values(item.get("annotations"), where),
        delivery_annotations=_amqp_values(item.get("deliveryAnnotations"), where),
        header_fields=(header[0], header[1], header[2]) if header is not None else None,
    )


def _field(item: Any, key: str, kind: type, where: str) -> Any:
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise SnapshotError(f"{where}: '{key}' must be a {kind.__name__}.")
    return value


def _optional(item: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if item.get(key) is None:
        return None
    return _field(item, key, kind, where)


def _unb64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SnapshotError(f"{where}: not valid base64.") from None


def _amqp_values(text: Any, where: str) -> dict[Any, Any]:
    if text is None:
        return {}
    if not isinstance(text, str):
        raise SnapshotError(f"{where}: AMQP-encoded values must be base64 text.")
    try:
        value, _ = codec.decode(_unb64(text, where), 0)
    except SnapshotError:
        raise
    except Exception:
        raise SnapshotError(f"{where}: not an AMQP-encoded map.") from None
    if not isinstance(value, dict):
        raise SnapshotError(f"{where}: not an AMQP-encoded map.")
    return dict(value)


def _iso(ms: int) -> str | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"
