"""The web console at ``/console/`` on the management endpoint: static pages plus a small JSON API.

Authorization is the management API's: a shared access key of the namespace. Because a browser cannot
be trusted to keep a key out of URLs, history or logs, the key travels once, in the body of
``POST /console/api/login``; the server checks it and answers with a random session token in an
``HttpOnly; Secure; SameSite=Strict`` cookie named after the port (browsers do not separate cookies
by port, and two emulators on one host must not sign each other out). Sessions live in memory only
(a restart signs everyone out) and end after ``SESSION_SECONDS`` or on sign-out. Every API call needs
that cookie and the ``X-Requested-With: sbconsole`` header (a cross-site page cannot add it without a
CORS preflight, which is never granted); the static files carry no data and are served to anyone.

Sign-in attempts are rate-limited per client address (:class:`SignInLimiter`): ``SIGN_IN_BURST`` failed
attempts at once, then one per ``SIGN_IN_REFILL_S``; beyond that the answer is 429 with ``Retry-After``
and the key is not even compared, so guessing keys from one address is slow.

A request with a ``SharedAccessSignature`` Authorization header is never a console request: a queue
named ``console`` stays reachable through the Atom API (see :func:`is_console_request`).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from sbemulator.auth import MANAGE, SasValidator

from .console_broker import ConsoleBroker
from .control import Controls, clock_body, handle_faults
from .errors import AdminError, BadRequest, MethodNotAllowed, NotFound, Unauthorized
from .http import Pending, Request, Response
from .snapshots import import_response, snapshot_response

log = logging.getLogger("sbemulator.admin.console")

PREFIX = "/console"
COOKIE = "sbconsole"  # + "_<port>"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS = 256
REQUIRED_HEADER = ("x-requested-with", "sbconsole")
DEFAULT_PAGE = 20
SIGN_IN_BURST = 5
SIGN_IN_REFILL_S = 12.0  # five failures a minute, sustained
SIGN_IN_TRACKED = 4096  # client addresses remembered (the oldest is forgotten first)


class SignInLimiter:
    """A token bucket per client address for failed sign-ins, in bounded memory."""

    def __init__(self, clock: Callable[[], float], burst: int = SIGN_IN_BURST, refill_s: float = SIGN_IN_REFILL_S,
                 tracked: int = SIGN_IN_TRACKED) -> None:
        self.clock = clock
        self.burst = burst
        self.refill_s = refill_s
        self.tracked = tracked
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, at)

    def _tokens(self, address: str) -> float:
        tokens, at = self._buckets.get(address, (float(self.burst), self.clock()))
        return min(float(self.burst), tokens + (self.clock() - at) / self.refill_s)

    def retry_after(self, address: str) -> float:
        """Seconds until ``address`` may try again (0: now)."""
        tokens = self._tokens(address)
        return 0.0 if tokens >= 1 else (1 - tokens) * self.refill_s

    def failed(self, address: str) -> None:
        tokens = self._tokens(address) - 1
        self._buckets.pop(address, None)
        self._buckets[address] = (tokens, self.clock())
        while len(self._buckets) > self.tracked:
            del self._buckets[next(iter(self._buckets))]

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_SECURITY_HEADERS = [
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
]


def is_console_request(request: Request) -> bool:
    path = request.path
    if path != PREFIX and not path.startswith(PREFIX + "/"):
        return False
    return not request.headers.get("authorization", "").startswith("SharedAccessSignature")


@dataclass
class _Session:
    key_name: str
    expires_at: float


class Console:
    def __init__(self, data: ConsoleBroker, validator: SasValidator, clock: Callable[[], float] = time.time,
                 controls: Controls | None = None) -> None:
        self.data = data
        # The broker's clock (and how to move it, on a manual clock): shown and advanced by the console.
        self.controls = controls or Controls(clock=time.time)
        self.validator = validator
        self.clock = clock
        self._sessions: dict[str, _Session] = {}
        self.sign_ins = SignInLimiter(clock)
        static = resources.files("sbemulator.admin") / "console_static"
        self._static = {entry.name: entry for entry in static.iterdir() if entry.is_file()}

    def handle(self, request: Request) -> Response | Pending:
        try:
            rest = request.path[len(PREFIX):]
            if rest == "":
                return Response(308, b"", None, [("Location", PREFIX + "/")])
            if rest.startswith("/api/"):
                return self._api(request, rest[len("/api/"):])
            return self._file(request, rest.lstrip("/") or "index.html")
        except AdminError as exc:
            return self._json(exc.status, {"error": exc.code, "message": exc.detail})

    # ------------------------------------------------------------------ static files
    def _file(self, request: Request, name: str) -> Response:
        if request.method not in ("GET", "HEAD"):
            raise MethodNotAllowed("The console's pages are read with GET.")
        entry = self._static.get(name)
        if entry is None:
            raise NotFound(f"No console page '{name}'.")
        suffix = name[name.rfind("."):]
        headers = [*_SECURITY_HEADERS, ("Cache-Control", "no-cache")]
        return Response(200, entry.read_bytes(), _CONTENT_TYPES.get(suffix, "application/octet-stream"), headers)

    # ------------------------------------------------------------------ sessions
    def signed_in(self, request: Request) -> bool:
        """The request carries a live session cookie (http.py allows it a full-size body)."""
        try:
            self._session(request)
        except Unauthorized:
            return False
        return True

    def _session(self, request: Request) -> _Session:
        token = _cookie(request.headers.get("cookie", ""), _cookie_name(request))
        session = self._sessions.get(token) if token else None
        if token is None or session is None:
            raise Unauthorized("Sign in with a shared access key of the namespace.")
        if session.expires_at <= self.clock():
            self._sessions.pop(token, None)
            raise Unauthorized("The console session has expired; sign in again.")
        return session

    def _login(self, request: Request) -> Response:
        wait = self.sign_ins.retry_after(request.peer)
        if wait > 0:
            log.warning("console sign-in from %s refused: too many failed attempts", request.peer or "?")
            return self._json(429, {"error": "TooManyRequests",
                                    "message": f"Too many failed sign-ins from this address; try again in "
                                               f"{math.ceil(wait)} s."},
                              [("Retry-After", str(math.ceil(wait)))])
        body = _json_body(request)
        key_name = str(body.get("keyName") or "").strip()
        key = str(body.get("key") or "")
        rule = self.validator.namespace_rule(key_name)
        # The console manages entities: only a key with the Manage right signs in to it.
        expected = rule.key if rule is not None and MANAGE in rule.rights else None
        # compare_digest also on an unknown key name, so timing does not tell which names exist
        valid = hmac.compare_digest((expected or "\0").encode(), key.encode()) and expected is not None
        if not valid:
            self.sign_ins.failed(request.peer)
            log.warning("console sign-in refused for key name %r from %s", key_name[:64], request.peer or "?")
            raise Unauthorized("The key name or key is not valid for this namespace.")
        now = self.clock()
        for token in [t for t, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[token]
        while len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        token = secrets.token_urlsafe(32)
        self._sessions[token] = _Session(key_name, now + SESSION_SECONDS)
        cookie = (f"{_cookie_name(request)}={token}; Path={PREFIX}/; Max-Age={SESSION_SECONDS}; HttpOnly; Secure; "
                  "SameSite=Strict")
        return self._json(200, self._whoami(key_name), [("Set-Cookie", cookie)])

    def _logout(self, request: Request) -> Response:
        token = _cookie(request.headers.get("cookie", ""), _cookie_name(request))
        if token:
            self._sessions.pop(token, None)
        cookie = f"{_cookie_name(request)}=; Path={PREFIX}/; Max-Age=0; HttpOnly; Secure; SameSite=Strict"
        return self._json(200, {"signedOut": True}, [("Set-Cookie", cookie)])

    def _whoami(self, key_name: str) -> dict[str, Any]:
        return {"keyName": key_name, "namespace": self.data.ns.name}

    # ------------------------------------------------------------------ API
    def _api(self, request: Request, name: str) -> Response | Pending:
        header, value = REQUIRED_HEADER
        if request.headers.get(header, "").lower() != value:
            raise BadRequest(f"Console API calls need the header '{header}: {value}'.")
        method = request.method
        if name == "login":
            _only(method, "POST")
            return self._login(request)
        if name == "logout":
            _only(method, "POST")
            return self._logout(request)
        session = self._session(request)
        q = request.query
        if name == "session":
            _only(method, "GET")
            return self._json(200, self._whoami(session.key_name))
        if name == "overview":
            _only(method, "GET")
            return self._json(200, self.data.overview())
        if name == "entity":
            _only(method, "GET")
            return self._json(200, self.data.entity(_required(q, "path")))
        if name == "messages":
            _only(method, "GET")
            page = self.data.peek(_required(q, "path"), q.get("subqueue", "active"),
                                  _int(q, "from", 0), _int(q, "count", DEFAULT_PAGE))
            return self._json(200, page)
        if name == "clock":
            _only(method, "GET")
            return self._json(200, {**clock_body(self.controls.clock), "canAdvance": self.controls.advance is not None})
        if name == "clock-advance":
            _only(method, "POST")
            return self._clock_advance(request, session.key_name)
        if name == "faults" or name.startswith("faults/"):
            return self._faults(request, name, session.key_name)
        if name == "snapshot":
            if method == "POST":  # the file as the body: replaces the namespace (admin/snapshots.py)
                response = import_response(self.controls, request)
                log.info("console snapshot imported by %s", session.key_name)
                return response
            _only(method, "GET")
            return snapshot_response(self.controls)
        if name == "schema":
            _only(method, "GET")
            return self._json(200, self.data.schema(_required(q, "kind")))
        if name == "body":
            _only(method, "GET")
            return self._body(q)
        if name in ENTITY_CHANGES:
            return self._change(request, name, session.key_name)
        if name in ("send", "resubmit", "purge"):
            _only(method, "POST")
            return self._message_action(request, name, session.key_name)
        raise NotFound(f"No console API '{name}'.")

    def _clock_advance(self, request: Request, key_name: str) -> Response:
        """Move a manual clock (docs/emulator.md, "A clock you control"); 409 on real time."""
        seconds = _json_body(request).get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            raise BadRequest("'seconds' must be a number of seconds, zero or more.")
        if self.controls.advance is None:
            raise AdminError("The emulator runs on real time: start it with --clock manual to move its time.",
                             409, "Conflict")
        self.controls.advance(float(seconds))
        log.info("console clock advanced %.3f s by %s", seconds, key_name)
        return self._json(200, {**clock_body(self.controls.clock), "canAdvance": True})

    def _faults(self, request: Request, name: str, key_name: str) -> Response:
        """The admin API's own handler (control.py): the same rules, checks and answers."""
        method = request.method
        if method not in ("GET", "HEAD"):
            _json_body(request)  # a JSON body, as every console change sends
        response = handle_faults(self.controls, request, [p for p in name.split("/")[1:] if p])
        if method != "GET" and response.status < 300:
            log.info("console faults %s %s by %s", method, name, key_name)
        return response

    def _body(self, q: dict[str, str]) -> Response:
        """A message's body as a download."""
        data, content_type, filename = self.data.body(_required(q, "path"), q.get("subqueue", "active"),
                                                      _int(q, "seq", 0))
        # Always a download, never rendered: the body is untrusted (and the CSP would apply anyway).
        return Response(200, data, "application/octet-stream", [
            ("Content-Disposition", f'attachment; filename="{_safe_filename(filename)}"'),
            ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-store"),
            ("X-Message-Content-Type", _safe_header(content_type or ""))])

    def _message_action(self, request: Request, name: str, key_name: str) -> Response | Pending:
        """Send, resubmit (from the dead-letter queue) or purge: POST with the entity's 'path'."""
        body = _json_body(request)
        path = str(body.get("path") or "")
        if not path:
            raise BadRequest("The request needs the entity 'path'.")
        if name == "send":
            result = self.data.send(path, body)
        elif name == "resubmit":
            numbers = None if body.get("all") is True else body.get("sequenceNumbers")
            if numbers is not None and (not isinstance(numbers, list) or not numbers
                                        or not all(isinstance(n, int) for n in numbers)):
                raise BadRequest("Give 'sequenceNumbers' (a non-empty list of integers) or 'all': true.")
            result = self.data.resubmit(path, numbers)
        else:  # the messages leave the entity now, and are dropped in slices before the answer
            job = self.data.begin_purge(path, str(body.get("subQueue") or "all"))

            async def purged() -> Response:
                done = {"purged": await self.data.ns.run(job)}
                log.info("console purge on %s by %s: %s", path, key_name, done)
                return self._json(200, done)

            return Pending(purged)
        log.info("console %s on %s by %s: %s", name, path, key_name, result)
        return self._json(200, result)

    def _change(self, request: Request, name: str, key_name: str) -> Response:
        """Receive, settle and the entity and rule changes: POST with a JSON body, logged like a send."""
        _only(request.method, "POST")
        body = _json_body(request)
        data = self.data
        if name == "receive":
            count = body.get("count", 1)
            if isinstance(count, bool) or not isinstance(count, int):
                raise BadRequest("'count' must be an integer.")
            result = data.receive(str(body.get("path") or ""), str(body.get("subQueue") or "active"),
                                  str(body.get("mode") or ""), count, _text(body, "sessionId"))
        elif name == "settle":
            result = data.settle(str(body.get("path") or ""), str(body.get("subQueue") or "active"),
                                 str(body.get("lockToken") or ""), str(body.get("action") or ""),
                                 _text(body, "sessionId"), _text(body, "reason"), _text(body, "description"))
        elif name in ("create-entity", "update-entity"):
            result = data.put_entity(body, create=name == "create-entity")
        elif name == "delete-entity":
            result = data.delete_entity(str(body.get("path") or ""))
        elif name in ("create-rule", "update-rule"):
            result = data.put_rule(body, create=name == "create-rule")
        else:
            result = data.delete_rule(str(body.get("path") or ""), str(body.get("name") or ""))
        log.info("console %s by %s: %s", name, key_name, {k: v for k, v in result.items() if k != "messages"})
        return self._json(200, result)

    @staticmethod
    def _json(status: int, data: Any, headers: list[tuple[str, str]] | None = None) -> Response:
        extra = [("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"), *(headers or [])]
        return Response(status, json.dumps(data).encode(), "application/json; charset=utf-8", extra)


ENTITY_CHANGES = ("receive", "settle", "create-entity", "update-entity", "delete-entity", "create-rule",
                  "update-rule", "delete-rule")


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    return str(value).strip() or None if value is not None else None


def _safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120] or "body"


def _safe_header(value: str) -> str:
    return "".join(c for c in value if 32 <= ord(c) < 127)[:200]


def _only(method: str, allowed: str) -> None:
    if method != allowed:
        raise MethodNotAllowed(f"Use {allowed} here.")


def _required(query: dict[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise BadRequest(f"The query parameter '{name}' is required.")
    return value


def _int(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"The query parameter {name}={value!r} is not an integer.") from None


def _json_body(request: Request) -> dict[str, Any]:
    if not request.headers.get("content-type", "").lower().startswith("application/json"):
        raise BadRequest("Send the request body as application/json.")
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise BadRequest("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    return body


def _cookie_name(request: Request) -> str:
    host = request.headers.get("host", "")
    port = host.rsplit(":", 1)[1] if ":" in host and not host.endswith("]") else "443"
    return f"{COOKIE}_{port}" if port.isdigit() else COOKIE


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None
