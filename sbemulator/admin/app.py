"""Routing of management requests: authentication, then the Atom API, ARM, health and test support.

Runs on the emulator's event loop; every broker call completes (and is committed) before the response
is written, so an entity created here is usable over AMQP as soon as the client sees the answer.

* ``GET /health``: 200 ``{"status": "ok"}`` once the emulator serves requests (no authentication).
* ``POST /$admin/purge/{entity path}`` and ``POST /$admin/reset``: test support (SAS token required);
  ``/$admin/clock`` and ``/$admin/faults``: the clock and injected faults, as JSON (control.py);
  ``GET /$admin/snapshot``: the namespace's entities and messages as a snapshot (sbemulator/runtime/snapshot.py);
  ``POST /$admin/snapshot`` (a snapshot file as the body, up to the snapshot limit): replaces the namespace with it.
* ``/subscriptions/...``: the Azure Resource Manager subset (``Bearer`` + a namespace SAS token, arm_auth.py).
* ``/console/...``: the web console (its own sign-in with a SAS key, see console.py).
* everything else: the Service Bus Atom API (``Authorization: SharedAccessSignature ...``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from sbemulator.auth import MANAGE, AuthError, Grant, SasValidator, claims_required, path_covers

from . import arm, arm_auth, atom
from .backend import QUEUE, SUBSCRIPTION, TOPIC, Namespace
from .console import Console, is_console_request
from .console_broker import ConsoleBroker
from .control import Controls, error_response, handle_clock, handle_faults
from .errors import AdminError, BadRequest, MethodNotAllowed, NotFound, Unauthorized
from .http import MAX_BODY, MAX_UNAUTHENTICATED_BODY, Pending, Request, Response, asks_for_websocket
from .snapshots import import_response, snapshot_response

log = logging.getLogger("sbemulator.admin")

DEFAULT_PAGE = 100
MAX_PAGE = 1000


class AdminApp:
    def __init__(self, namespace: Namespace, validator: SasValidator, clock: Callable[[], float] = time.time,
                 controls: Controls | None = None) -> None:
        self.ns = namespace
        # the broker's clock and faults (control.py); ``clock`` above is real time, for credentials
        self.controls = controls or Controls(clock=time.time)
        self.validator = validator
        self.clock = clock
        self.ready = True
        self._arm_namespaces: dict[str, dict[str, Any]] = {}
        self.console = Console(ConsoleBroker(namespace), validator, clock, controls=self.controls)

    async def __call__(self, request: Request) -> Response:
        response = self.handle(request)
        if isinstance(response, Pending):
            try:
                return await response.finish()
            except AdminError as exc:
                return self._error(exc, request.path.lower().startswith("/subscriptions/"))
        return response

    def admit(self, request: Request) -> Response | int:
        """Before a request's body is read (http.py): refuse a request whose credential is missing or
        invalid (401, the same answer ``handle`` would give, without reading the body), and allow a
        full-size body only to requests that are authenticated by their head. The console's sign-in
        carries its key in the body, so it, and anything else not yet authenticated, gets a small one."""
        path = request.path
        is_arm = path.lower().startswith("/subscriptions/")
        if path in ("/health", "/$health") or asks_for_websocket(request):
            return MAX_UNAUTHENTICATED_BODY  # a WebSocket authenticates inside, over AMQP ($cbs)
        if is_console_request(request):
            if not self.console.signed_in(request):
                return MAX_UNAUTHENTICATED_BODY
            return self._snapshot_body(request) if request.path.lower().endswith("/api/snapshot") else MAX_BODY
        try:
            if is_arm:
                arm_auth.authenticate(request.headers.get("authorization", ""), self.validator, self.clock())
            else:
                self._authenticate(request)
        except AdminError as exc:
            return self._error(exc, is_arm)
        if path.strip("/").lower() == "$admin/snapshot":
            return self._snapshot_body(request)
        return MAX_BODY

    def _snapshot_body(self, request: Request) -> int:
        """A snapshot upload may be as large as a snapshot may be (runtime/snapshot.py's limit), above
        the 4 MiB of other requests; anything else on that path gets the usual limit."""
        return max(MAX_BODY, self.controls.max_snapshot_bytes) if request.method == "POST" else MAX_BODY

    def handle(self, request: Request) -> Response | Pending:
        path = request.path
        is_arm = path.lower().startswith("/subscriptions/")
        try:
            if path in ("/health", "/$health"):
                return self._health(request)
            if is_console_request(request):
                return self.console.handle(request)
            if is_arm:
                return self._arm(request)
            return self._atom(request)
        except AdminError as exc:
            return self._error(exc, is_arm)

    @staticmethod
    def _error(exc: AdminError, is_arm: bool) -> Response:
        if is_arm:
            return Response(exc.status, arm.error_body(exc.code, exc.detail), "application/json; charset=utf-8")
        return Response(exc.status, atom.render_error(exc.status, exc.detail), atom.ERROR_CONTENT_TYPE)

    # ------------------------------------------------------------------ health
    def _health(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            raise MethodNotAllowed("Use GET /health.")
        status = 200 if self.ready else 503
        body = json.dumps({"status": "ok" if self.ready else "starting", "namespace": self.ns.name}).encode()
        return Response(status, body, "application/json")

    # ------------------------------------------------------------------ auth
    def _authenticate(self, request: Request) -> Grant:
        token = request.headers.get("authorization", "")
        if not token:
            raise Unauthorized("MissingToken: the request has no Authorization header.")
        if token[:7].lower() == "bearer ":
            # A client signed in with a token credential sends its token as Bearer; the emulator verifies
            # SAS tokens only, so one given that way is taken (docs/management.md, "Credentials").
            token = token[7:].lstrip()
        try:
            return self.validator.validate(token, None, self.clock())
        except AuthError as exc:
            raise Unauthorized(str(exc)) from None

    def _authorize(self, request: Request, entity_path: str = "", denied: str | None = None,
                   absent: bool = False) -> None:
        """A valid token covering ``entity_path`` with the Manage right. Without Manage: 401 with
        ``denied`` (Service Bus's text for the action, see _entity_denial), or 404 when ``absent`` (a GET
        of a queue or topic that does not exist is 404 on Service Bus whatever the rights)."""
        grant = self._authenticate(request)
        # The JS SDK signs the full request URL, query included: the scope is its path.
        scope = grant.scope.split("?", 1)[0].strip("/")
        # A token minted for exactly this request's URL (the JS SDK does that, also for listings) is fine.
        own = scope == request.path.strip("/").lower()
        if not own and not path_covers(scope, entity_path.strip("/").lower()):
            raise Unauthorized(f"InvalidAudience: the token does not cover '{entity_path or '/'}'.")
        # The management plane needs the Manage right ("Service Bus authentication and authorization":
        # Manage is the right to manage the namespace's or the entity's topology).
        if not grant.allows(MANAGE):
            if absent:
                raise NotFound(f"The messaging entity '{self.ns.name}:{entity_path}' could not be found.")
            resource = f"sb://{request.headers.get('host', '')}/{entity_path}"
            raise Unauthorized(denied or claims_required(MANAGE, resource))

    # ------------------------------------------------------------------ Atom API
    def _atom(self, request: Request) -> Response | Pending:
        segments = [s for s in request.path.split("/") if s]
        method = request.method
        host = request.headers.get("host", "localhost")
        base = f"https://{host}"
        if not segments:
            raise NotFound("No resource at '/'.")
        head = segments[0].lower()
        if head == "$admin":
            return self._test_support(request, segments[1:])
        if head == "$namespaceinfo" and len(segments) == 1:
            self._authorize(request)
            self._only(method, "GET")
            now = self.clock()
            return Response(200, atom.render_namespace(self.ns.name, base, self.ns.started_at, now),
                            atom.ENTRY_CONTENT_TYPE)
        if head == "$resources" and len(segments) == 2:
            self._authorize(request, denied=_entity_denial(method))
            self._only(method, "GET")
            kind = {"queues": QUEUE, "topics": TOPIC}.get(segments[1].lower())
            if kind is None:
                raise NotFound(f"Unknown resource collection '{segments[1]}'.")
            infos = self.ns.list_entities(kind)
            entries = [atom.entity_entry(i, base, host, self.ns.name, _api(request)) for i in infos]
            return self._feed(request, segments[1].capitalize(), f"/$Resources/{segments[1]}", entries, base)
        lower = [s.lower() for s in segments]
        if "subscriptions" in lower:
            i = lower.index("subscriptions")
            topic = "/".join(segments[:i])
            rest = segments[i + 1:]
            if not topic:
                raise NotFound("A subscription path needs a topic.")
            return self._subscription_routes(request, topic, rest, base, host)
        entity = "/".join(segments)
        self._authorize(request, entity, _entity_denial(method),
                        absent=method in ("GET", "HEAD") and self.ns.kind_of(entity) is None)
        if method == "GET":
            kind = self.ns.kind_of(entity)
            if kind is None:
                raise NotFound(f"The messaging entity '{self.ns.name}:{entity}' could not be found.")
            info = self.ns.get(kind, entity)
            return Response(200, atom.render_entity(info, base, host, self.ns.name, _api(request)),
                            atom.ENTRY_CONTENT_TYPE)
        if method == "PUT":
            kind, el = atom.description_kind(request.body)
            spec = atom.parse_description(el, _api(request))
            info, created = self.ns.put(kind, entity, spec, mode=self._mode(request))
            return Response(201 if created else 200,
                            atom.render_entity(info, base, host, self.ns.name, _api(request)), atom.ENTRY_CONTENT_TYPE)
        if method == "DELETE":
            kind = self.ns.kind_of(entity)
            if kind is None:
                raise NotFound(f"The messaging entity '{self.ns.name}:{entity}' could not be found.")
            self.ns.delete(kind, entity)
            return Response(200)
        raise MethodNotAllowed(f"{method} is not supported on '{entity}'.")

    def _subscription_routes(self, request: Request, topic: str, rest: list[str], base: str, host: str) -> Response:
        method = request.method
        ns = self.ns
        if not rest:
            self._authorize(request, topic, _subscription_denial("EnumerateSubscriptions", host, topic))
            self._only(method, "GET")
            infos = ns.list_entities(SUBSCRIPTION, topic)
            entries = [atom.entity_entry(i, base, host, ns.name, _api(request)) for i in infos]
            return self._feed(request, "Subscriptions", f"/{topic}/Subscriptions", entries, base)
        sub = rest[0]
        sub_path = f"{topic}/Subscriptions/{sub}"
        operation = _SUBSCRIPTION_OPERATIONS.get((method, min(len(rest), 3)), "GetSubscription")
        self._authorize(request, sub_path, _subscription_denial(operation, host, "/".join([sub_path, *rest[1:]])))
        if len(rest) == 1:
            if method == "GET":
                info = ns.get(SUBSCRIPTION, sub_path)
                return Response(200, atom.render_entity(info, base, host, ns.name, _api(request)),
                                atom.ENTRY_CONTENT_TYPE)
            if method == "PUT":
                el = atom._find_description(request.body, ("SubscriptionDescription",))
                spec = atom.parse_description(el, _api(request))
                info, created = ns.put(SUBSCRIPTION, sub, spec, mode=self._mode(request), topic=topic)
                return Response(201 if created else 200,
                                atom.render_entity(info, base, host, ns.name, _api(request)), atom.ENTRY_CONTENT_TYPE)
            if method == "DELETE":
                ns.delete(SUBSCRIPTION, sub_path)
                return Response(200)
            raise MethodNotAllowed(f"{method} is not supported on a subscription.")
        if rest[1].lower() != "rules" or len(rest) > 3:
            raise NotFound(f"No resource at '{request.path}'.")
        if len(rest) == 2:
            self._only(method, "GET")
            rules = ns.list_rules(topic, sub)
            entries = [atom.rule_entry(r, base, ns.name) for r in rules]
            return self._feed(request, "Rules", f"/{sub_path}/Rules", entries, base)
        rule_name = rest[2]
        if method == "GET":
            return Response(200, atom.render_rule(ns.get_rule(topic, sub, rule_name), base, ns.name),
                            atom.ENTRY_CONTENT_TYPE)
        if method == "PUT":
            rule = atom.parse_rule(request.body, rule_name)
            rule_info, created = ns.put_rule(topic, sub, rule, mode=self._mode(request))
            return Response(201 if created else 200, atom.render_rule(rule_info, base, ns.name),
                            atom.ENTRY_CONTENT_TYPE)
        if method == "DELETE":
            ns.delete_rule(topic, sub, rule_name)
            return Response(200)
        raise MethodNotAllowed(f"{method} is not supported on a rule.")

    @staticmethod
    def _mode(request: Request) -> str:
        # The SDKs update with 'If-Match: *' and create without it.
        return "update" if request.headers.get("if-match") else "create"

    @staticmethod
    def _only(method: str, *allowed: str) -> None:
        if method not in allowed and not (method == "HEAD" and "GET" in allowed):
            raise MethodNotAllowed(f"Only {', '.join(allowed)} is supported here.")

    def _feed(self, request: Request, title: str, path: str, entries: list[str], base: str) -> Response:
        skip = _int_query(request.query, "$skip", 0)
        top = _int_query(request.query, "$top", DEFAULT_PAGE)
        top = min(max(top, 1), MAX_PAGE)
        page = entries[skip:skip + top]
        api = request.query.get("api-version", "2021-05")
        self_path = f"{path}?$skip={skip}&$top={top}&api-version={api}"
        next_path = None
        if skip + top < len(entries):
            next_path = f"{path}?$skip={skip + top}&$top={top}&api-version={api}"
        body = atom.render_feed(title, self_path, page, base, self.clock(), next_path)
        return Response(200, body, atom.FEED_CONTENT_TYPE)

    # ------------------------------------------------------------------ test support
    def _test_support(self, request: Request, rest: list[str]) -> Response | Pending:
        self._authorize(request)
        lower = [r.lower() for r in rest]
        if lower[:1] == ["clock"]:
            return handle_clock(self.controls, request, lower[1:])
        if lower == ["snapshot"]:
            if request.method == "POST":  # replace the namespace with the snapshot in the body (JSON errors)
                try:
                    return import_response(self.controls, request)
                except AdminError as exc:
                    return error_response(exc)
            self._only(request.method, "GET")
            return snapshot_response(self.controls)
        if lower[:1] == ["faults"]:
            return handle_faults(self.controls, request, rest[1:])
        self._only(request.method, "POST")
        if rest and rest[0].lower() == "purge" and len(rest) > 1:
            # the messages leave the entity now; the answer comes once the last slice is committed
            job = self.ns.begin_purge("/".join(rest[1:]))

            async def purged() -> Response:
                removed = await self.ns.run(job)
                return Response(200, json.dumps({"purged": removed}).encode(), "application/json")

            return Pending(purged)
        if rest == ["reset"] or [r.lower() for r in rest] == ["reset"]:
            async def reset() -> Response:  # the purges in slices, as above
                result = await self.ns.reset_async()
                return Response(200, json.dumps(result).encode(), "application/json")

            return Pending(reset)
        raise NotFound("Test-support operations: POST /$admin/purge/{entity path}, POST /$admin/reset.")

    # ------------------------------------------------------------------ ARM
    def _arm(self, request: Request) -> Response:
        arm_auth.authenticate(request.headers.get("authorization", ""), self.validator, self.clock())
        seg = [s for s in request.path.split("/") if s]
        if [s.lower() for s in seg[2:]] == ["providers", "microsoft.servicebus", "namespaces"]:
            # subscriptions/{sub}/providers/Microsoft.ServiceBus/namespaces: every namespace of the subscription
            self._only(request.method, "GET")
            rid = f"/subscriptions/{seg[1]}/resourceGroups/local/providers/Microsoft.ServiceBus/namespaces"
            return self._json(200, {"value": [self._arm_namespace(f"{rid}/{self.ns.name}", self.ns.name)]})
        # subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ServiceBus/namespaces[/{ns}[/...]]
        if (len(seg) < 6 or seg[2].lower() != "resourcegroups" or seg[4].lower() != "providers"
                or seg[5].lower() != "microsoft.servicebus"):
            raise NotFound(f"No ARM resource at '{request.path}'.")
        if len(seg) < 7 or seg[6].lower() != "namespaces":
            raise NotFound(f"No ARM resource at '{request.path}'.")
        ns_prefix = "/".join(seg[:7])
        if len(seg) == 7:
            self._only(request.method, "GET")
            return self._json(200, {"value": [self._arm_namespace(f"/{ns_prefix}/{self.ns.name}", self.ns.name)]})
        ns_name = seg[7]
        ns_id = f"/{ns_prefix}/{ns_name}"
        rest = seg[8:]
        method = request.method
        if not rest:
            return self._arm_namespace_request(method, request.body, ns_id, ns_name)
        location = (self._arm_namespaces.get(ns_name.lower()) or {}).get("location")
        kind_word = rest[0].lower()
        if kind_word == "queues" or (kind_word == "topics" and len(rest) <= 2):
            kind = QUEUE if kind_word == "queues" else TOPIC
            if len(rest) == 1:
                self._only(method, "GET")
                items = [arm.entity_resource(i, f"{ns_id}/{rest[0]}/{i.name}", location)
                         for i in self.ns.list_entities(kind)]
                return self._json(200, {"value": items})
            name = rest[1]
            rid = f"{ns_id}/{rest[0]}/{name}"
            return self._arm_entity(method, kind, name, None, request.body, rid, location)
        if kind_word != "topics" or len(rest) < 3 or rest[2].lower() != "subscriptions":
            raise NotFound(f"No ARM resource at '{request.path}'.")
        topic = rest[1]
        sub_base = f"{ns_id}/topics/{topic}/subscriptions"
        if len(rest) == 3:
            self._only(method, "GET")
            items = [arm.entity_resource(i, f"{sub_base}/{i.name}", location)
                     for i in self.ns.list_entities(SUBSCRIPTION, topic)]
            return self._json(200, {"value": items})
        sub = rest[3]
        if len(rest) == 4:
            return self._arm_entity(method, SUBSCRIPTION, sub, topic, request.body, f"{sub_base}/{sub}", location)
        if rest[4].lower() != "rules" or len(rest) > 6:
            raise NotFound(f"No ARM resource at '{request.path}'.")
        rules_base = f"{sub_base}/{sub}/rules"
        if len(rest) == 5:
            self._only(method, "GET")
            items = [arm.rule_resource(r, f"{rules_base}/{r.rule.name}", location)
                     for r in self.ns.list_rules(topic, sub)]
            return self._json(200, {"value": items})
        rule_name = rest[5]
        return self._arm_rule(method, request.body, topic, sub, rule_name, f"{rules_base}/{rule_name}", location)

    def _arm_namespace_request(self, method: str, body: bytes, ns_id: str, ns_name: str) -> Response:
        """A namespace resource: PUT keeps what ARM was told (location, SKU, tags), GET answers it."""
        if method == "PUT":
            data = arm.parse_body(body)
            state = self._arm_namespaces.setdefault(ns_name.lower(), {"created": self.clock()})
            state.update(location=data.get("location"), sku=data.get("sku"), tags=data.get("tags"),
                         properties=data.get("properties") or {}, updated=self.clock())
            return self._json(200, self._arm_namespace(ns_id, ns_name))
        if method == "GET":
            return self._json(200, self._arm_namespace(ns_id, ns_name))
        if method == "DELETE":
            raise BadRequest("The emulator's namespace cannot be deleted; use POST /$admin/reset.")
        raise MethodNotAllowed(f"{method} is not supported on a namespace.")

    def _arm_rule(self, method: str, body: bytes, topic: str, sub: str, rule_name: str, rid: str,
                  location: Any) -> Response:
        """A subscription rule resource: GET, PUT (create or replace), DELETE (204 when there is none)."""
        if method == "GET":
            return self._json(200, arm.rule_resource(self.ns.get_rule(topic, sub, rule_name), rid, location))
        if method == "PUT":
            rule = arm.rule_config(body, rule_name)
            info, _ = self.ns.put_rule(topic, sub, rule, mode="upsert", replace_implicit_default=True)
            return self._json(200, arm.rule_resource(info, rid, location))
        if method == "DELETE":
            try:
                self.ns.delete_rule(topic, sub, rule_name)
            except NotFound:
                return Response(204)
            return Response(200)
        raise MethodNotAllowed(f"{method} is not supported on a rule.")

    def _arm_entity(self, method: str, kind: str, name: str, topic: str | None, body: bytes, rid: str,
                    location: str | None) -> Response:
        path = name if topic is None else f"{topic}/Subscriptions/{name}"
        if method == "GET":
            return self._json(200, arm.entity_resource(self.ns.get(kind, path), rid, location))
        if method == "PUT":
            spec = arm.entity_spec(body, kind)
            info, _ = self.ns.put(kind, name, spec, mode="upsert", topic=topic)
            return self._json(200, arm.entity_resource(info, rid, location))
        if method == "DELETE":
            try:
                self.ns.delete(kind, path)
            except NotFound:
                return Response(204)
            return Response(200)
        raise MethodNotAllowed(f"{method} is not supported here.")

    def _arm_namespace(self, rid: str, name: str) -> dict[str, Any]:
        state = self._arm_namespaces.get(name.lower()) or {}
        props = state.get("properties") or {}
        extra = {k: v for k, v in props.items() if k in ("disableLocalAuth", "minimumTlsVersion", "zoneRedundant",
                                                          "publicNetworkAccess", "premiumMessagingPartitions")}
        return arm.namespace_resource(
            rid, name, state.get("location") or "local", state.get("sku") or {"name": "Standard", "tier": "Standard"},
            f"https://{name}.servicebus.windows.net:443/", state.get("created", self.ns.started_at),
            state.get("updated", self.ns.started_at), extra, state.get("tags"),
        )

    @staticmethod
    def _json(status: int, data: Any) -> Response:
        return Response(status, arm.dumps(data), "application/json; charset=utf-8")


def _api(request: Request) -> str | None:
    """The Atom request's api-version (the SDKs always send one; None: every property)."""
    return request.query.get("api-version") or None


def _int_query(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadRequest(f"The query parameter {name}={value!r} is not an integer.") from None
    if number < 0:
        raise BadRequest(f"The query parameter {name} must not be negative.")
    return number


# Service Bus's 401 texts for a key without Manage, per action (azservicebus admin_client_test.go,
# TestAdminClient_LackPermissions_Queue, _Topic and _Subscription).
def _entity_denial(method: str) -> str:
    """A queue or topic, or their listings."""
    if method in ("GET", "HEAD"):
        return "Manage,EntityRead claims required for this operation."
    if method == "DELETE":
        return "Authorization failed for specified action: Manage,EntityDelete."
    return "Authorization failed for specified action: Manage,EntityWrite."


# (method, path depth below the subscription: 1 itself, 2 its rules, 3 one rule) -> the operation named
_SUBSCRIPTION_OPERATIONS = {
    ("GET", 1): "GetSubscription", ("HEAD", 1): "GetSubscription", ("PUT", 1): "CreateOrUpdateSubscription",
    ("DELETE", 1): "DeleteSubscription", ("GET", 2): "EnumerateRules", ("GET", 3): "GetRule",
    ("PUT", 3): "CreateOrUpdateRule", ("DELETE", 3): "DeleteRule",
}


def _subscription_denial(operation: str, host: str, path: str) -> str:
    """A subscription, its listing or its rules."""
    return (f"401 SubCode=40100: Unauthorized : Unauthorized access for '{operation}' operation on endpoint "
            f"'sb://{host}/{path}'.")
