"""Test control over HTTPS: the emulator's clock and its injected faults, as JSON.

These are what a test in another process (or the web console) uses to move a manual clock and to
inject faults; in-process code has ``Emulator.advance`` and ``Emulator.faults``. The requests are
authenticated like the rest of the management plane (a SAS token with Manage), by ``AdminApp``.

Routes (under ``/$admin``)::

    GET  /$admin/clock                  {"mode": "manual"|"real", "now": ISO-8601 UTC, "nowMs": epoch ms}
    POST /$admin/clock/advance          {"seconds": 3600}  -> the same shape, after the due timers ran
    GET  /$admin/faults                 {"faults": [rule, ...], "operations": [...], "effects": {...}}
    POST /$admin/faults                 a rule: {"operation": "send", "effect": "server-busy",
                                        "entity": "orders", "count": 2, "probability": 1.0, "seed": 7,
                                        "seconds": 0, "description": null}  -> 201 the rule with its "id"
    GET  /$admin/faults/{id}            the rule, with "matched" (operations it covered) and
                                        "applied" (how many it failed) and "spent"
    DELETE /$admin/faults/{id}          204; DELETE /$admin/faults: every rule, {"removed": n}

Errors are JSON too: ``{"error": {"code": ..., "message": ...}}`` with the HTTP status.

May import what ``sbemulator.admin`` may; the runtime hands in the clock and how to advance it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sbemulator.broker.clock import Clock, clock_mode
from sbemulator.gateway.faults import EFFECTS, OPERATIONS, Faults

from .errors import AdminError, BadRequest, MethodNotAllowed, NotFound
from .http import Request, Response

JSON = "application/json; charset=utf-8"


@dataclass
class Controls:
    """What the runtime lets the management plane control. ``advance`` moves a manual clock and runs
    the timers that became due (on the event loop, where requests are handled); None on a real clock."""

    clock: Clock
    advance: Callable[[float], float] | None = None
    faults: Faults | None = None
    # The namespace as a snapshot file (bytes, file name; runtime/snapshot.py), exported on the event loop;
    # raises the runtime's SnapshotError (a ValueError) above the size limit. None: not offered.
    snapshot: Callable[[], tuple[bytes, str]] | None = None
    # Replace the namespace with a snapshot file's bytes (runtime/snapshot.py import_snapshot), on the
    # event loop; raises the runtime's SnapshotError (a ValueError) naming what is wrong, having changed
    # nothing. Returns the numbers imported. None: not offered. ``max_snapshot_bytes``: the largest file.
    import_snapshot: Callable[[bytes], dict[str, int]] | None = None
    max_snapshot_bytes: int = 0


def iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clock_body(clock: Clock) -> dict[str, Any]:
    now = clock()
    return {"mode": clock_mode(clock), "now": iso(now), "nowMs": int(now * 1000)}


def json_response(status: int, body: Any) -> Response:
    return Response(status, json.dumps(body).encode(), JSON)


def error_response(exc: AdminError) -> Response:
    return json_response(exc.status, {"error": {"code": exc.code, "message": exc.detail}})


def read_json(request: Request) -> dict[str, Any]:
    if not request.body.strip():
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"The body is not JSON: {exc}.") from None
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.")
    return body


def handle_clock(controls: Controls, request: Request, rest: list[str]) -> Response:
    """``rest``: the path after ``/$admin/clock`` (lower-cased)."""
    try:
        if not rest:
            if request.method not in ("GET", "HEAD"):
                raise MethodNotAllowed("Use GET /$admin/clock, or POST /$admin/clock/advance.")
            return json_response(200, clock_body(controls.clock))
        if rest == ["advance"]:
            if request.method != "POST":
                raise MethodNotAllowed("Use POST /$admin/clock/advance with {\"seconds\": N}.")
            seconds = read_json(request).get("seconds")
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
                raise BadRequest("'seconds' must be a number of seconds, zero or more.")
            if controls.advance is None:
                raise AdminError("The emulator runs on real time: start it with --clock manual to move its time.",
                                 409, "Conflict")
            controls.advance(float(seconds))
            return json_response(200, clock_body(controls.clock))
        raise NotFound("Clock operations: GET /$admin/clock, POST /$admin/clock/advance.")
    except AdminError as exc:
        return error_response(exc)


def handle_faults(controls: Controls, request: Request, rest: list[str]) -> Response:
    """``rest``: the path after ``/$admin/faults`` (as given: rule ids are lower-case anyway)."""
    try:
        faults = controls.faults
        if faults is None:
            raise NotFound("This emulator has no fault injection.")
        method = request.method
        if not rest:
            if method in ("GET", "HEAD"):
                effects = {e.name: {"condition": e.condition, "statusCode": e.status_code or None,
                                    "sdkException": e.sdk_exception} for e in EFFECTS.values()}
                return json_response(200, {"faults": faults.list(), "operations": list(OPERATIONS),
                                           "effects": effects})
            if method == "POST":
                try:
                    rule = faults.add_from(read_json(request))
                except (TypeError, ValueError) as exc:
                    raise BadRequest(str(exc)) from None
                return json_response(201, rule.as_dict())
            if method == "DELETE":
                return json_response(200, {"removed": faults.clear()})
            raise MethodNotAllowed("Use GET, POST or DELETE on /$admin/faults.")
        if len(rest) == 1:
            found = faults.get(rest[0].lower())
            if found is None:
                raise NotFound(f"No fault with id '{rest[0]}'.")
            if method in ("GET", "HEAD"):
                return json_response(200, found.as_dict())
            if method == "DELETE":
                faults.remove(found)
                return Response(204)
            raise MethodNotAllowed("Use GET or DELETE on /$admin/faults/{id}.")
        raise NotFound("Fault operations: /$admin/faults, /$admin/faults/{id}.")
    except AdminError as exc:
        return error_response(exc)
