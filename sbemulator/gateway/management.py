"""The ``$management`` request/response operations of an entity, mapped onto the broker.

Requests are AMQP messages with an ``operation`` application property and an amqp-value map body;
replies carry ``statusCode``/``statusDescription`` (and ``errorCondition`` on failure) and a map
body. The table of operations is PROTOCOL.md's; names and status codes are Service Bus's.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..amqp.message import ParsedMessage, parse_message
from ..amqp.types import Array, Int, Long, Timestamp
from ..auth import LISTEN, SEND
from ..broker.api import GatewayBroker
from ..broker.errors import (
    BrokerError,
    InvalidOperationError,
    MessageSizeExceededError,
    QuotaExceededError,
    ServerBusyError,
)
from ..broker.transactions import StagedSettlement
from ..broker.unit_of_work import UnitOfWork, apply_stored
from ..model import Outcome, ReceiveMode
from .deliveries import encode_delivery, to_incoming
from .rules_codec import RuleDescriptionError, rule_from_description, rule_to_description
from .settling import refusal

log = logging.getLogger("sbemulator")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(slots=True)
class MgmtReply:
    status_code: int
    description: str
    body: Any = None
    error_condition: str | None = None


class BadRequest(Exception):
    """The request itself is malformed (missing or mistyped field): 400."""


def _field(body: Any, name: str, required: bool = True) -> Any:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be an AMQP map")
    if name in body:
        return body[name]
    if required:
        raise BadRequest(f"the request lacks '{name}'")
    return None


def _uuids(values: Any) -> list[uuid.UUID]:
    out = []
    for v in values or ():
        if isinstance(v, uuid.UUID):
            out.append(v)
        elif isinstance(v, (bytes, str)):
            out.append(uuid.UUID(bytes=v) if isinstance(v, bytes) and len(v) == 16 else uuid.UUID(str(v)))
        else:
            raise BadRequest(f"invalid lock token {v!r}")
    return out


DATETIME_MAX_MS = 253402300800000


def _millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int((value - _EPOCH) // dt.timedelta(milliseconds=1))
    return int(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _outcome(body: Any) -> Outcome:
    """The request's ``disposition-status`` as the settlement it names (``Outcome``'s values are the
    statuses Service Bus spells on the wire); any other status is the client's mistake (400)."""
    status = _required_text(body, "disposition-status")
    try:
        return Outcome(status)
    except ValueError:
        raise BadRequest(f"Unknown disposition status {status!r}.") from None


def _required_text(body: Any, name: str) -> str:
    """A field the operation cannot do without, as text: absent or null is the client's mistake (400)."""
    value = _text(_field(body, name))
    if value is None:
        raise BadRequest(f"the request's '{name}' is null")
    return value


# The right each operation needs. Scheduling is sending; every other operation acts on what a
# receiver holds or may receive, rules included: Service Bus lets a Listen-only client manage its
# subscription's rules over AMQP (the .NET rule manager is the way to do that without Manage).
_SEND_OPERATIONS = frozenset({"com.microsoft:schedule-message", "com.microsoft:cancel-scheduled-message"})


def required_right(request: ParsedMessage) -> str | None:
    """Listen or Send for a known operation; None for one this handler refuses anyway."""
    operation = _text((request.application_properties or {}).get("operation"))
    if operation is None or operation not in OPERATIONS:
        return None
    return SEND if operation in _SEND_OPERATIONS else LISTEN


OPERATIONS = frozenset({
    "com.microsoft:renew-lock", "com.microsoft:peek-message", "com.microsoft:update-disposition",
    "com.microsoft:receive-by-sequence-number", "com.microsoft:schedule-message",
    "com.microsoft:cancel-scheduled-message", "com.microsoft:get-session-state", "com.microsoft:set-session-state",
    "com.microsoft:renew-session-lock", "com.microsoft:get-message-sessions", "com.microsoft:add-rule",
    "com.microsoft:remove-rule", "com.microsoft:enumerate-rules",
})


class ManagementHandler:
    """Executes ``$management`` requests for one broker."""

    def __init__(self, broker: GatewayBroker, commit: Callable[[], BrokerError | None] | None = None) -> None:
        self.broker = broker
        # Writes what the connection did so far; the store's refusal when it could not (a full disk).
        # A schedule-message is answered only once its messages are stored, as a send is settled.
        self.commit = commit
        self._ops: dict[str, Callable[[str, Any], MgmtReply]] = {
            "com.microsoft:renew-lock": self._renew_lock,
            "com.microsoft:peek-message": self._peek,
            "com.microsoft:update-disposition": self._update_disposition,
            "com.microsoft:receive-by-sequence-number": self._receive_by_sequence_number,
            "com.microsoft:schedule-message": self._schedule,
            "com.microsoft:cancel-scheduled-message": self._cancel_scheduled,
            "com.microsoft:get-session-state": self._get_session_state,
            "com.microsoft:set-session-state": self._set_session_state,
            "com.microsoft:renew-session-lock": self._renew_session_lock,
            "com.microsoft:get-message-sessions": self._get_message_sessions,
            "com.microsoft:add-rule": self._add_rule,
            "com.microsoft:remove-rule": self._remove_rule,
            "com.microsoft:enumerate-rules": self._enumerate_rules,
        }

    def handle(self, entity_path: str, request: ParsedMessage) -> MgmtReply:
        props = request.application_properties or {}
        operation = _text(props.get("operation"))
        op = self._ops.get(operation or "")
        if op is None:
            return MgmtReply(400, f"The operation '{operation}' is not supported.", None,
                             "com.microsoft:not-supported")
        try:
            return op(entity_path, request.body_value())
        except BadRequest as exc:
            return MgmtReply(400, str(exc), None, "com.microsoft:argument-error")
        except BrokerError as exc:
            return MgmtReply(exc.status_code, exc.description or str(exc), None, exc.condition)
        except Exception:  # a bug must fail this request, not the client's whole connection
            log.exception("$management %s on %s failed", operation, entity_path)
            return MgmtReply(500, "The emulator failed to process the request.", None, "com.microsoft:internal-error")

    def handle_in_transaction(self, entity_path: str, request: ParsedMessage,
                              stage: Callable[[StagedSettlement], None],
                              refuse: Callable[[BrokerError], None]) -> MgmtReply:
        """A request that carries a transactional-state. Of the operations "Operations within a
        transaction scope" lists (with the session state the .NET SDK's transaction samples set), these
        reach ``$management``: renew-lock and get-session-state run at once (nothing to undo), while
        update-disposition (settling a deferred message) and set-session-state are staged through
        ``stage`` until the commit. Anything else is refused with ``amqp:not-allowed`` and dooms the
        transaction (``refuse``), so that its commit cannot apply the rest as if this had happened."""
        props = request.application_properties or {}
        operation = _text(props.get("operation")) or ""
        if operation in ("com.microsoft:renew-lock", "com.microsoft:get-session-state"):
            return self.handle(entity_path, request)
        try:
            if operation == "com.microsoft:set-session-state":
                body = request.body_value()
                state = _field(body, "session-state", required=False)
                if state is not None and not isinstance(state, bytes):
                    state = str(state).encode()
                stage(_StagedSessionState(self.broker, entity_path, _required_text(body, "session-id"), state))
                return MgmtReply(200, "OK", None)
            if operation != "com.microsoft:update-disposition":
                error = InvalidOperationError(f"The operation '{operation}' cannot be part of a transaction.")
                refuse(error)
                raise error
            body = request.body_value()
            props_to_modify = _field(body, "properties-to-modify", required=False)
            stage(_StagedDisposition(
                self.broker, entity_path, _uuids(_field(body, "lock-tokens")), _outcome(body),
                _text(_field(body, "deadletter-reason", required=False)),
                _text(_field(body, "deadletter-description", required=False)),
                {str(k): v for k, v in props_to_modify.items()} if isinstance(props_to_modify, dict) else None,
                _text(_field(body, "session-id", required=False)),
            ))
            return MgmtReply(200, "OK", None)
        except BadRequest as exc:
            refuse(BrokerError(str(exc)))
            return MgmtReply(400, str(exc), None, "com.microsoft:argument-error")
        except BrokerError as exc:
            return MgmtReply(exc.status_code, exc.description or str(exc), None, exc.condition)

    # -- locks and settlement ----------------------------------------------------------
    def _renew_lock(self, path: str, body: Any) -> MgmtReply:
        tokens = _uuids(_field(body, "lock-tokens"))
        expirations = self.broker.renew_lock(path, tokens)
        return MgmtReply(200, "OK", {"expirations": Array(tuple(Timestamp(e) for e in expirations), "timestamp")})

    def _update_disposition(self, path: str, body: Any) -> MgmtReply:
        status = _outcome(body)
        tokens = _uuids(_field(body, "lock-tokens"))
        props = _field(body, "properties-to-modify", required=False)
        session_id = _text(_field(body, "session-id", required=False))

        def apply() -> None:
            self.broker.update_disposition(
                path,
                tokens,
                status,
                dead_letter_reason=_text(_field(body, "deadletter-reason", required=False)),
                dead_letter_description=_text(_field(body, "deadletter-description", required=False)),
                properties_to_modify={str(k): v for k, v in props.items()} if isinstance(props, dict) else None,
                session_id=session_id,
            )

        # Answered only once written, or refused with ServerBusy (which the SDKs retry) and taken back: the
        # messages stay locked by their receivers (gateway/settling.py).
        try:
            self._stored(apply, self.broker.undo_point(path, tokens))
        except BrokerError as exc:
            if isinstance(exc, (QuotaExceededError, ServerBusyError)):
                raise refusal(exc) from None
            raise
        return MgmtReply(200, "OK", None)

    # -- browsing and deferred messages -------------------------------------------------
    def _peek(self, path: str, body: Any) -> MgmtReply:
        start = int(_field(body, "from-sequence-number"))
        count = int(_field(body, "message-count"))
        session_id = _text(_field(body, "session-id", required=False))
        messages = self.broker.peek(path, start, count, session_id=session_id)
        if not messages:
            return MgmtReply(204, "No messages", None)
        entries = [
            {"message": encode_delivery(m, header_delivery_count=m.delivery_count, locked_until_ms=None)}
            for m in messages
        ]
        return MgmtReply(200, "OK", {"messages": entries})

    def _receive_by_sequence_number(self, path: str, body: Any) -> MgmtReply:
        numbers = [int(n) for n in _field(body, "sequence-numbers")]
        mode_value = _field(body, "receiver-settle-mode", required=False)
        mode = ReceiveMode.RECEIVE_AND_DELETE if mode_value == 0 else ReceiveMode.PEEK_LOCK
        session_id = _text(_field(body, "session-id", required=False))
        results = self.broker.receive_deferred(path, numbers, mode, session_id=session_id)
        entries = []
        for delivery in results:
            message, token = delivery.message, delivery.lock_token
            payload = encode_delivery(
                message,
                header_delivery_count=max(0, delivery.header_delivery_count),
                locked_until_ms=message.locked_until_ms if token is not None else None,
                lock_token=token.bytes if token is not None else None,
                delivered=True,
            )
            entry: dict = {"message": payload}
            if token is not None:
                entry["lock-token"] = token
            entries.append(entry)
        return MgmtReply(200, "OK", {"messages": entries})

    # -- scheduling ----------------------------------------------------------------------
    def _schedule(self, path: str, body: Any) -> MgmtReply:
        items = _field(body, "messages")
        incoming = []
        for item in items or ():
            raw = _field(item, "message")
            if not isinstance(raw, bytes):
                raise BadRequest("each scheduled message needs a binary 'message'")
            incoming.append(to_incoming(parse_message(raw), len(raw)))
        numbers = self.broker.schedule(path, incoming)
        failure = self.commit() if self.commit is not None else None
        if failure is not None:  # QuotaExceeded (a full disk) or ServerBusy: taken back, never stored later
            self.broker.withdraw(path, incoming)
            raise failure
        return MgmtReply(200, "OK", {"sequence-numbers": Array(tuple(Long(n) for n in numbers), "long")})

    def _cancel_scheduled(self, path: str, body: Any) -> MgmtReply:
        numbers = [int(n) for n in _field(body, "sequence-numbers")]
        self.broker.cancel_scheduled(path, numbers)
        return MgmtReply(200, "OK", None)

    # -- sessions --------------------------------------------------------------------------
    def _get_session_state(self, path: str, body: Any) -> MgmtReply:
        session_id = _required_text(body, "session-id")
        state = self.broker.get_session_state(path, session_id)
        return MgmtReply(200, "OK", {"session-state": state})

    def _set_session_state(self, path: str, body: Any) -> MgmtReply:
        session_id = _required_text(body, "session-id")
        state = _field(body, "session-state", required=False)
        if state is not None and not isinstance(state, bytes):
            state = str(state).encode()
        self._stored(lambda: self.broker.set_session_state(path, session_id, state),
                     self.broker.undo_point(path, session_id=session_id))
        return MgmtReply(200, "OK", None)

    def _renew_session_lock(self, path: str, body: Any) -> MgmtReply:
        session_id = _required_text(body, "session-id")
        expiration = self.broker.renew_session_lock(path, session_id)
        return MgmtReply(200, "OK", {"expiration": Timestamp(expiration)})

    def _get_message_sessions(self, path: str, body: Any) -> MgmtReply:
        skip = int(_field(body, "skip", required=False) or 0)
        top = int(_field(body, "top", required=False) or 100)
        # DateTime.MaxValue (253402300800000 ms as the .NET library writes it, clamped there when larger)
        # asks for every session with messages or state; any other time for those whose state changed
        # after it (the SDKs' list_sessions(state_updated_after=...)).
        updated = _millis(_field(body, "last-updated-time", required=False))
        updated_after = None if updated is None or updated >= DATETIME_MAX_MS else updated
        sessions = self.broker.list_sessions(path, updated_after_ms=updated_after)
        page = sessions[skip : skip + top]
        if not page:
            return MgmtReply(204, "No sessions", None)
        return MgmtReply(200, "OK", {"skip": Int(skip), "sessions-ids": Array(tuple(page), "string")})

    # -- rules (subscriptions) ---------------------------------------------------------------
    def _add_rule(self, path: str, body: Any) -> MgmtReply:
        name = _required_text(body, "rule-name")
        try:
            fields = rule_from_description(_field(body, "rule-description"))
        except RuleDescriptionError as exc:
            raise BadRequest(str(exc)) from None
        self._stored(lambda: self.broker.add_rule(path, name, **fields))
        return MgmtReply(200, "OK", None)

    def _remove_rule(self, path: str, body: Any) -> MgmtReply:
        name = _required_text(body, "rule-name")
        self._stored(lambda: self.broker.remove_rule(path, name))
        return MgmtReply(200, "OK", None)

    def _stored(self, apply: Callable[[], None], undo: Callable[[], None] | None = None) -> None:
        """Apply a change that is answered only once stored (a rule change, a session's state), as the
        management plane's writes are (admin/backend.py, Namespace.stored): what the connection did so
        far is written first, so a store that cannot write refuses the request before it applies, and a
        change whose own write fails is taken back (the broker's change log and the store's savepoint;
        ``undo`` for what the change log does not hold) and refused with that error (QuotaExceeded for a
        full disk, ServerBusy otherwise; the client keeps its session lock and may try again)."""
        if self.commit is None:
            apply()
            return
        def change(work: UnitOfWork) -> None:
            if undo is not None:
                work.on_take_back(undo)
            apply()

        apply_stored(self.broker, self.commit, change)

    def _enumerate_rules(self, path: str, body: Any) -> MgmtReply:
        top = int(_field(body, "top", required=False) or 100)
        skip = int(_field(body, "skip", required=False) or 0)
        rules = self.broker.list_rules(path)[skip : skip + top]
        if not rules:
            return MgmtReply(204, "No rules", None)
        return MgmtReply(200, "OK", {"rules": [{"rule-description": rule_to_description(r)} for r in rules]})


class _StagedDisposition:
    """An update-disposition waiting for its transaction's commit (a broker.transactions.StagedSettlement)."""

    def __init__(self, broker: GatewayBroker, path: str, tokens: list[uuid.UUID], status: Outcome,
                 reason: str | None, description: str | None, properties: dict | None,
                 session_id: str | None) -> None:
        self.broker = broker
        self.path = path
        self.tokens = tokens
        self.status = status
        self.reason = reason
        self.description = description
        self.properties = properties
        self.session_id = session_id

    def check(self) -> None:
        self.broker.check_locks(self.path, self.tokens, self.session_id)

    def undo_point(self) -> Callable[[], None]:
        return self.broker.undo_point(self.path, self.tokens)

    def apply(self) -> None:
        self.broker.update_disposition(
            self.path, self.tokens, self.status, dead_letter_reason=self.reason,
            dead_letter_description=self.description, properties_to_modify=self.properties,
            session_id=self.session_id,
        )


class _StagedSessionState:
    """A set-session-state waiting for its transaction's commit: the session must still be held then."""

    def __init__(self, broker: GatewayBroker, path: str, session_id: str | None, state: bytes | None) -> None:
        if session_id is None:
            raise BadRequest("set-session-state needs a 'session-id'")
        self.broker = broker
        self.path = path
        self.session_id = session_id
        self.state = state

    def check(self) -> None:
        self.broker.get_session_state(self.path, self.session_id)  # raises if the session lock is gone
        limit = self.broker.resolve(self.path).max_message_size
        if self.state is not None and len(self.state) > limit:
            # "Message sessions", Message session state: it can hold data of the size of one message.
            raise MessageSizeExceededError(
                f"The session state ({len(self.state)} bytes) exceeds the limit ({limit} bytes) of one message."
            )

    def apply(self) -> None:
        self.broker.set_session_state(self.path, self.session_id, self.state)

    def undo_point(self) -> Callable[[], None]:
        return self.broker.undo_point(self.path, session_id=self.session_id)
