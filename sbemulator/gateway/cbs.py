"""Claims-based security ($cbs): the put-token exchange that authorizes every entity link.

Service Bus accepts a SAS token (type ``servicebus.windows.net:sastoken``) or a JWT; the SDK
sends SAS tokens labelled ``jwt``. The emulator validates SAS tokens for real (signature, key
name, expiry, scope) and refuses anything else with 401, because an emulator that accepts any
token would hide authentication bugs until production.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..amqp.message import ParsedMessage
from ..auth import AuthError, Grant, SasValidator, parse_resource

log = logging.getLogger("sbemulator")


class RefusalLog:
    """At most ``per_window`` refusal lines (a refused token, a missing entity) every ``window_s``
    seconds, then one line saying how many were left out. Why: a refusal logs a line at the default
    level (the SDK does not always show the reason), so a client retrying a bad token in a loop, or a
    hostile one, would otherwise fill the log with one line per attempt. One per connection (the gateway's): the retry
    loop is one connection, and connections per namespace are bounded."""

    def __init__(self, per_window: int = 20, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_window = per_window
        self.window_s = window_s
        self.clock = clock
        self._window_start = float("-inf")
        self._logged = 0
        self._left_out = 0

    def warning(self, message: str, *args: object) -> None:
        now = self.clock()
        if now - self._window_start >= self.window_s:
            if self._left_out:
                log.warning("%d more put-token refusals in the last %g s were not logged", self._left_out,
                            self.window_s)
            self._window_start, self._logged, self._left_out = now, 0, 0
        if self._logged < self.per_window:
            self._logged += 1
            log.warning(message, *args)
        else:
            self._left_out += 1



@dataclass(slots=True)
class CbsOutcome:
    status_code: int
    description: str
    grant: Grant | None


# Path segments that name no entity of their own: a token for '<entity>/$management' or a sub-queue
# is a token for that entity's address, and the entity must exist.
_NOT_ENTITIES = ("$management",)


def audience_entity(audience: str) -> str:
    """The entity path a put-token's audience names ('' for the namespace itself)."""
    path = parse_resource(audience).path
    parts = path.split("/")
    while parts and parts[-1] in _NOT_ENTITIES:
        parts.pop()
    return "/".join(parts)


def _display(audience: str) -> str:
    text = audience.strip()
    return text if "://" in text else f"sb://{text.lstrip('/')}"


def handle_put_token(request: ParsedMessage, validator: SasValidator, now: float,
                     entity_exists: Callable[[str], bool] | None = None,
                     refusals: RefusalLog | None = None) -> CbsOutcome:
    """Validate the token first (a bad token is a 401 whatever it names), then the entity the
    audience names: Service Bus answers a put-token for an entity that does not exist with 404."""
    props = request.application_properties or {}
    operation = props.get("operation")
    if operation != "put-token":
        return CbsOutcome(400, f"Unsupported CBS operation '{operation}'", None)
    audience = props.get("name")
    token = request.body_value()
    if isinstance(token, bytes):
        token = token.decode("utf-8", "replace")
    if not isinstance(audience, str) or not isinstance(token, str):
        return CbsOutcome(400, "put-token needs a 'name' property and a string token body", None)
    try:
        grant = validator.validate(token, audience=audience, now=now)
    except AuthError as exc:
        # One line at the default level: the SDK's exception does not always show the reason.
        (refusals.warning if refusals is not None else log.warning)(
            "put-token refused for key name %r, entity %r: %s", _key_name(token), audience, exc)
        return CbsOutcome(401, str(exc), None)
    entity = audience_entity(audience)
    if entity and entity_exists is not None and not entity_exists(entity):
        # The commonest mistake (an entity missing from the topology) reaches the user as an
        # authentication error after the SDK's retries: one line here names the entity.
        (refusals.warning if refusals is not None else log.warning)(
            "put-token for key name %r: entity %r does not exist in this namespace (is it in the topology "
            "file?)", grant.key_name, entity)
        return CbsOutcome(404, f"The messaging entity '{_display(audience)}' could not be found.", None)
    return CbsOutcome(202, "Accepted", grant)


def _key_name(token: str) -> str:
    """The ``skn`` of a SAS token, for the log (the token itself never goes there)."""
    for part in token.split("&"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "skn":
            return value[:64]
    return "?"
