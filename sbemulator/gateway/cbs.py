"""Claims-based security ($cbs): the put-token exchange that authorizes every entity link.

Service Bus accepts a SAS token (type ``servicebus.windows.net:sastoken``) or a JWT; the SDK
sends SAS tokens labelled ``jwt``. The emulator validates SAS tokens for real (signature, key
name, expiry, scope) and refuses anything else with 401, because an emulator that accepts any
token would hide authentication bugs until production.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..amqp.message import ParsedMessage
from ..auth import AuthError, Grant, SasValidator

log = logging.getLogger("sbemulator")


@dataclass(slots=True)
class CbsOutcome:
    status_code: int
    description: str
    grant: Grant | None


def handle_put_token(request: ParsedMessage, validator: SasValidator, now: float) -> CbsOutcome:
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
        log.warning("put-token refused for key name %r, entity %r: %s", _key_name(token), audience, exc)
        return CbsOutcome(401, str(exc), None)
    return CbsOutcome(202, "Accepted", grant)


def _key_name(token: str) -> str:
    """The ``skn`` of a SAS token, for the log (the token itself never goes there)."""
    for part in token.split("&"):
        name, _, value = part.strip().partition("=")
        if name.lower() == "skn":
            return value[:64]
    return "?"
