"""Shared Access Signature validation, as Service Bus does it for CBS put-token.

A token is ``SharedAccessSignature sr=<url-encoded resource>&sig=<base64 HMAC-SHA256>&se=<expiry>
&skn=<key name>``; the signature covers ``<url-encoded resource> + "\\n" + <expiry>``. The resource
scopes the token: it authorizes that entity path and everything below it. Service Bus compares the
whole resource URI, so a token signed for another namespace's host is refused here too: the resource's
scheme must be one the SDKs sign with (``sb``, ``amqp``, ``amqps``, ``http``, ``https``, ``ws``,
``wss``) and its host one of the emulator's own names (``own_hosts``: localhost, the address it
listens on, ``--hostname``; any loopback address, 127.0.0.0/8 and ::1, is the machine's own). Ports
are not compared: one emulator answers on several ports, and the SDKs sign with whichever their
endpoint names. A resource without a scheme is a host and a path
(``ns.servicebus.windows.net``, what the Go SDK's ``CreateConnectionStringWithSASUsingExpiry`` signs,
is the whole namespace).

"Service Bus authentication and authorization with Shared Access Signatures": a rule (a key name, its
keys and its rights) lives on the namespace or on one queue or topic. Its rights are Listen, Send and
Manage, and Manage implies the other two. A token signed with an entity's rule is valid for that
entity (and what lies below it, such as its subscriptions and sub-queues) only.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import socket
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_KEY_NAME = "RootManageSharedAccessKey"
DEFAULT_KEY = "SAS_KEY_VALUE"


LISTEN, SEND, MANAGE = "Listen", "Send", "Manage"
ALL_RIGHTS: frozenset[str] = frozenset((LISTEN, SEND, MANAGE))


class AuthError(Exception):
    """The token is not acceptable; the message says why (it goes back to the client)."""


def parse_rights(values: Iterable[str]) -> frozenset[str]:
    """Rights as Service Bus names them (case-insensitive on input); Manage implies Listen and Send.
    Raises ValueError for a name that is not a right."""
    by_lower = {right.lower(): right for right in ALL_RIGHTS}
    rights = set()
    for value in values:
        right = by_lower.get(str(value).strip().lower())
        if right is None:
            raise ValueError(f"unknown access right {value!r} (Listen, Send or Manage)")
        rights.add(right)
    return ALL_RIGHTS if MANAGE in rights else frozenset(rights)


@dataclass(frozen=True, slots=True)
class SasRule:
    """A shared access authorization rule: a key name, its primary (and optional secondary) key, and
    its rights. A token signed with either key is valid."""

    key_name: str
    key: str
    rights: frozenset[str] = ALL_RIGHTS
    secondary_key: str | None = None

    def signing_keys(self) -> tuple[str, ...]:
        return (self.key,) if not self.secondary_key else (self.key, self.secondary_key)


@dataclass(frozen=True, slots=True)
class Grant:
    """What a valid token allows: entity paths under ``scope`` until ``expires_at`` (unix s), with the
    rights of the rule whose key signed it."""

    scope: str
    expires_at: float
    key_name: str
    rights: frozenset[str] = ALL_RIGHTS

    def covers(self, entity_path: str, now: float | None = None) -> bool:
        if (now if now is not None else time.time()) >= self.expires_at:
            return False
        return path_covers(self.scope, normalize_path(entity_path))

    def allows(self, right: str) -> bool:
        return right in self.rights


def claims_required(right: str, resource: str) -> str:
    """The description Service Bus gives a request its token's rights do not allow."""
    return (f"Unauthorized access. '{right}' claim(s) are required to perform this operation. "
            f"Resource: '{resource}'.")


# The schemes the SDKs sign resources with: sb:// (every SDK's CBS audience), amqp:// and amqps://
# (.NET), https:// (the Atom and ARM clients), http://, ws:// and wss:// (WebSocket endpoints).
SCHEMES = frozenset({"sb", "amqp", "amqps", "http", "https", "ws", "wss"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def own_hosts(listen_host: str, names: Iterable[str] = ()) -> frozenset[str]:
    """The host names a token's resource may carry: loopback, the address the emulator listens on and
    the extra ``names``; listening on every address (0.0.0.0, ::) adds the machine's own names."""
    hosts = set(LOOPBACK_HOSTS) | {name.strip().lower().strip("[]") for name in names if name.strip()}
    if listen_host in _WILDCARDS:
        hosts |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    else:
        hosts.add(listen_host.lower().strip("[]"))
    return frozenset(hosts)


def _loopback(host: str | None) -> bool:
    """A loopback address (127.0.0.0/8, ::1) is this machine, whichever of them a client dials."""
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Resource:
    """A token's resource or a put-token audience, taken apart: lower-case scheme (None: none given),
    host without port (None: none given) and entity path."""

    scheme: str | None
    host: str | None
    path: str


def parse_resource(resource: str) -> Resource:
    """'sb://Host:5672/Queue/' -> ('sb', 'host', 'queue'); 'ns.servicebus.windows.net' -> (None,
    'ns.servicebus.windows.net', ''); 'https://[::1]:5300/t/Subscriptions/s' -> ('https', '::1',
    't/subscriptions/s')."""
    text = urllib.parse.unquote(resource.strip())
    scheme: str | None = None
    if "://" in text:
        scheme, text = text.split("://", 1)
        scheme = scheme.lower()
    authority, _, path = text.partition("/")
    authority = authority.rpartition("@")[2].lower()
    if authority.startswith("["):
        host = authority[1:].partition("]")[0]
    else:
        host = authority.partition(":")[0] if authority.count(":") == 1 else authority
    return Resource(scheme, host or None, path.split("?", 1)[0].strip("/").lower())


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


class EntityRule(Protocol):
    """An entity's authorization rule as the broker stores it (``descriptions.AuthorizationRuleConfig``)."""

    @property
    def key_name(self) -> str: ...
    @property
    def primary_key(self) -> str: ...
    @property
    def secondary_key(self) -> str: ...
    @property
    def rights(self) -> tuple[str, ...]: ...


EntityRules = Callable[[str], Sequence[EntityRule]]
"""Looks up the authorization rules of the queue or topic a path names or lies in (empty when none)."""


class SasValidator:
    """Checks tokens against the namespace's rules, then the rules of the entity the token names.

    ``keys`` is the namespace's rules (or, as before rights existed, key name -> key: full rights).
    ``entity_rules`` finds an entity's own rules; a token whose key name is not a namespace rule's is
    checked against the rules of the entity its resource names (and of each entity above it)."""

    def __init__(self, keys: Mapping[str, str] | Iterable[SasRule], entity_rules: EntityRules | None = None,
                 hosts: Iterable[str] | None = None) -> None:
        rules = [SasRule(name, key) for name, key in keys.items()] if isinstance(keys, Mapping) else list(keys)
        self.rules: dict[str, SasRule] = {rule.key_name: rule for rule in rules}
        self.entity_rules = entity_rules
        # The host names a token's resource may name (own_hosts); None compares no host.
        self.hosts: frozenset[str] | None = None if hosts is None else frozenset(h.lower() for h in hosts)

    @property
    def keys(self) -> dict[str, str]:
        """Namespace key name -> primary key (SASL PLAIN and the console sign in with these)."""
        return {name: rule.key for name, rule in self.rules.items()}

    def namespace_rule(self, key_name: str) -> SasRule | None:
        return self.rules.get(key_name)

    def _entity_rule(self, key_name: str, resource: str) -> SasRule | None:
        """The rule named ``key_name`` of the entity the resource names, or of one above it (a topic's
        rule for its subscription): the longest path that is an entity with such a rule wins."""
        if self.entity_rules is None:
            return None
        parts = parse_resource(resource).path.split("/")
        for end in range(len(parts), 0, -1):
            path = "/".join(parts[:end])
            if not path or path.startswith("$"):
                continue
            for rule in self.entity_rules(path):
                if rule.key_name == key_name:
                    return SasRule(rule.key_name, rule.primary_key, parse_rights(rule.rights),
                                   rule.secondary_key or None)
        return None

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
        key_name = fields["skn"]
        candidates = [rule for rule in (self.namespace_rule(key_name),
                                        self._entity_rule(key_name, urllib.parse.unquote(fields["sr"])))
                      if rule is not None]
        if not candidates:
            raise AuthError(f"InvalidSignature: unknown shared access key name '{key_name}'")
        try:
            expiry = int(fields["se"])
        except ValueError:
            raise AuthError("InvalidSignature: the expiry 'se' is not an integer") from None
        try:
            given = base64.b64decode(urllib.parse.unquote(fields["sig"]), validate=True)
        except ValueError:
            raise AuthError("InvalidSignature: the signature is not base64") from None
        signed = f"{fields['sr']}\n{fields['se']}".encode()
        rule = next((candidate for candidate in candidates for key in candidate.signing_keys()
                     if hmac.compare_digest(hmac.new(key.encode(), signed, hashlib.sha256).digest(), given)),
                    None)
        if expiry <= now:
            # Service Bus's text (its SAS validation checks the expiry before the signature)
            raise AuthError("ExpiredToken: The token is expired. Expiration time: "
                            f"'{time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime(expiry))}'.")
        if rule is None:
            raise AuthError("InvalidSignature: the token has an invalid signature")
        resource = parse_resource(fields["sr"])
        self._check_host(resource, urllib.parse.unquote(fields["sr"]))
        scope = resource.path
        if audience is not None and not path_covers(scope, parse_resource(audience).path):
            raise AuthError(
                f"InvalidAudience: the token's resource '{urllib.parse.unquote(fields['sr'])}' does not "
                f"cover '{audience}'"
            )
        return Grant(scope, float(expiry), key_name, rule.rights)

    def _check_host(self, resource: Resource, text: str) -> None:
        """Service Bus compares the whole resource URI: a scheme no SDK signs with, or a host that is not
        one of the emulator's own names, means the token was made for another service."""
        if resource.scheme is not None and resource.scheme not in SCHEMES:
            raise AuthError(f"InvalidAudience: the token's resource '{text}' has the scheme '{resource.scheme}' "
                            f"(expected one of {', '.join(sorted(SCHEMES))})")
        if self.hosts is not None and resource.host not in self.hosts and not _loopback(resource.host):
            raise AuthError(f"InvalidAudience: the token's resource '{text}' is for the host "
                            f"'{resource.host or ''}', not this namespace ({', '.join(sorted(self.hosts))})")
