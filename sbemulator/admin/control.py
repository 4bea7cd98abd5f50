"""Test control over HTTPS: the emulator's clock (and, through ``faults``, injected faults), as JSON.

These are what a test in another process (or the web console) uses to move a manual clock and to
inject faults; in-process code has ``Emulator.advance`` and ``Emulator.faults``. The requests are
authenticated like the rest of the management plane (a SAS token with Manage), by ``AdminApp``.

Routes (under ``/$admin``)::

    GET  /$admin/clock                  {"mode": "manual"|"real", "now": ISO-8601 UTC, "nowMs": epoch ms}
    POST /$admin/clock/advance          {"seconds": 3600}  -> the same shape, after the due timers ran

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

from .errors import AdminError, BadRequest, MethodNotAllowed, NotFound
from .http import Request, Response

JSON = "application/json; charset=utf-8"


@dataclass
class Controls:
    """What the runtime lets the management plane control. ``advance`` moves a manual clock and runs
    the timers that became due (on the event loop, where requests are handled); None on a real clock."""

    clock: Clock
    advance: Callable[[float], float] | None = None
    faults: Any = None  # sbemulator.gateway.faults.Faults, when the runtime has one


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
