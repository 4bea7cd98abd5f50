"""Shared Access Signature validation, as Service Bus does it for CBS put-token.

A token is ``SharedAccessSignature sr=<url-encoded resource>&sig=<base64 HMAC-SHA256>&se=<expiry>
&skn=<key name>``; the signature covers ``<url-encoded resource> + "\\n" + <expiry>``. The resource
scopes the token: it authorizes that entity path and everything below it. Hosts are not compared,
because an emulator is reached under several names (127.0.0.1, localhost, a container name).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse
from dataclasses import dataclass

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"


class AuthError(Exception):
    """The token is not acceptable; the message says why (it goes back to the client)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What a valid token allows: entity paths under ``scope`` until ``expires_at`` (unix s)."""

    scope: str
    expires_at: float
    key_name: str

    def covers(self, entity_path: str, now: float | None = None) -> bool:
        if (now if now is not None else time.time()) >= self.expires_at:
            return False
        return path_covers(self.scope, normalize_path(entity_path))


def normalize_path(resource: str) -> str:
    """'sb://host:5672/Queue/' -> 'queue'; 'amqps://host/t/Subscriptions/s' -> 't/subscriptions/s'."""
    text = urllib.parse.unquote(resource.strip())
    if "://" in text:
        text = text.split("://", 1)[1]
        text = text.split("/", 1)[1] if "/" in text else ""
    return text.strip("/").lower()


def path_covers(scope: str, path: str) -> bool:
    return scope == "" or path == scope or path.startswith(scope + "/")


def sign(resource_uri: str, key_name: str, key: str, expiry: int) -> str:
    """Build a SAS token the way the SDKs do (used by tests and tools)."""
    encoded = urllib.parse.quote_plus(resource_uri)
    digest = hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest()
    signature = urllib.parse.quote_plus(base64.b64encode(digest).decode())
    return f"SharedAccessSignature sr={encoded}&sig={signature}&se={expiry}&skn={key_name}"


class SasValidator:
    """Checks tokens against the namespace's keys (key name -> key)."""

    def __init__(self, keys: dict[str, str]) -> None:
        self.keys = dict(keys)

    def validate(self, token: str, audience: str | None = None, now: float | None = None) -> Grant:
        now = time.time() if now is None else now
        if not isinstance(token, str) or not token.startswith("SharedAccessSignature "):
            raise AuthError("InvalidSignature: the token is not a SharedAccessSignature")
        fields: dict[str, str] = {}
        for part in token[len("SharedAccessSignature "):].strip().split("&"):
            name, sep, value = part.partition("=")
            if not sep:
                raise AuthError(f"InvalidSignature: malformed token field {part[:40]!r}")
            fields[name.strip().lower()] = value.strip()
        missing = [f for f in ("sr", "sig", "se", "skn") if f not in fields]
        if missing:
            raise AuthError(f"InvalidSignature: the token lacks {', '.join(missing)}")
        key = self.keys.get(fields["skn"])
        if key is None:
            raise AuthError(f"InvalidSignature: unknown shared access key name '{fields['skn']}'")
        try:
            expiry = int(fields["se"])
        except ValueError:
            raise AuthError("InvalidSignature: the expiry 'se' is not an integer") from None
        expected = hmac.new(key.encode(), f"{fields['sr']}\n{fields['se']}".encode(), hashlib.sha256).digest()
        try:
            given = base64.b64decode(urllib.parse.unquote(fields["sig"]), validate=True)
        except ValueError:
            raise AuthError("InvalidSignature: the signature is not base64") from None
        if not hmac.compare_digest(expected, given):
            raise AuthError("InvalidSignature: the token has an invalid signature")
        if expiry <= now:
            raise AuthError("ExpiredToken: the token has expired")
        scope = normalize_path(fields["sr"])
        if audience is not None and not path_covers(scope, normalize_path(audience)):
            raise AuthError(
                f"InvalidAudience: the token's resource '{urllib.parse.unquote(fields['sr'])}' does not "
                f"cover '{audience}'"
            )
        return Grant(scope, float(expiry), fields["skn"])
