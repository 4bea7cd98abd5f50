"""The credential the ARM surface demands: a namespace-wide SAS token, sent as a bearer token.

Azure Resource Manager takes Microsoft Entra ID tokens, which an emulator cannot verify (nothing here
can issue or check them). Accepting any ``Bearer`` value, as the emulator once did, let every process
that reached the port create and delete entities and their messages. So the ARM surface asks for a
token the emulator can verify: a Shared Access Signature for the namespace root (``sr`` is any URL with
an empty path, for example ``https://127.0.0.1:5300/``), signed with one of the namespace's keys, as
``Authorization: Bearer sr=...&sig=...&se=...&skn=...`` (the ``SharedAccessSignature `` prefix may be
kept). ``infra/provision.py --credential sas`` mints one from the key; see docs/management.md.
"""

from __future__ import annotations

from sbemulator.auth import MANAGE, AuthError, Grant, SasValidator, claims_required, sign

from .errors import Unauthorized

PREFIX = "SharedAccessSignature "


def bearer_token(resource_uri: str, key_name: str, key: str, expiry: int) -> str:
    """The bearer value for ``Authorization: Bearer <value>`` (what provision.py computes itself)."""
    return sign(resource_uri, key_name, key, expiry)[len(PREFIX):]


def authenticate(authorization: str, validator: SasValidator, now: float) -> Grant:
    """The grant of a valid namespace-wide token, else ``Unauthorized`` with ARM's error codes
    (``AuthenticationFailed`` without a credential, ``InvalidAuthenticationToken`` for a bad one)."""
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        raise Unauthorized("Authentication failed. The 'Authorization' header is missing: send 'Bearer' with a "
                           "SAS token of the namespace (docs/management.md).", code="AuthenticationFailed")
    token = value if value.startswith(PREFIX) else PREFIX + value
    try:
        grant = validator.validate(token, None, now)
    except AuthError as exc:
        raise Unauthorized(f"The access token is invalid: {exc}", code="InvalidAuthenticationToken") from None
    if grant.scope != "":
        raise Unauthorized(f"The access token is invalid: its resource covers only '{grant.scope}', the ARM "
                           "surface needs a token for the namespace root.", code="InvalidAuthenticationToken")
    if not grant.allows(MANAGE):  # managing entities is the Manage right's ("Service Bus authentication")
        raise Unauthorized(claims_required(MANAGE, "the namespace"), code="AuthorizationFailed")
    return grant
