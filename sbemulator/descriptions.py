"""One description of every Service Bus entity property: the table every surface reads.

Config.json parsing (:mod:`sbemulator.config`), the Atom and ARM formats (:mod:`sbemulator.admin.atom`,
:mod:`sbemulator.admin.arm`), the management back end that validates what they parse
(:mod:`sbemulator.admin.backend`), the web console's property list and the broker's configuration of an
entity (:mod:`sbemulator.broker.topology`) all take names, order, codecs, defaults and bounds from
:data:`PROPERTIES`, so adding a property is one entry here (and, if the broker enforces it, the line that
enforces it). The model is Azurite's generated mappers: one declaration per field drives both
serializers.

The duration codec every surface shares is here too (``parse_duration`` for Config.json's ISO 8601
and TimeSpan text, ``decode_duration`` / ``format_duration`` for the wire, TimeSpan.MaxValue included).

It lives at the package root, beside ``config``, not in ``broker/``: the config loader reads it and the
root must not import from the layers above it. It imports nothing of sbemulator.

Two defaults per property, because they differ (issue #24 item 8): ``config_default`` is the official
emulator's ``Config-schema.json`` default, which a Config.json entity gets when the file leaves the
property out (``infra/servicebus.json`` feeds both emulators, so they must agree); ``api_default`` is
Service Bus's, which an entity created through the management API (``create_queue(name)``) gets.

``since`` is the Atom api-version that introduced a property: under an older api-version a description
carrying it is refused and responses leave it out (``MaxMessageSizeInKilobytes`` came with 2021-05,
"add it after all other properties"; the topic filter counts with 2024-05).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "API_VERSIONS",
    "LATEST_API_VERSION",
    "MAX_TIMESPAN",
    "MAX_TIMESPAN_SECONDS",
    "PROPERTIES",
    "RIGHTS",
    "Codec",
    "Property",
    "atom_order",
    "by_arm",
    "by_atom",
    "by_field",
    "decode_duration",
    "entity_name_problem",
    "for_kind",
    "format_duration",
    "parse_duration",
    "supported_at",
]

QUEUE = "queue"  # entity kinds, as the broker, the management plane and snapshots name them
TOPIC = "topic"
SUBSCRIPTION = "subscription"
KINDS = (QUEUE, TOPIC, SUBSCRIPTION)

MAX_TIMESPAN_SECONDS = 922337203685.4775807  # .NET TimeSpan.MaxValue: "never" / "no limit"
MAX_TIMESPAN = "P10675199DT2H48M5.4775807S"  # ... as Service Bus writes it

API_2017_04 = "2017-04"
API_2021_05 = "2021-05"
API_2024_05 = "2024-05"
API_VERSIONS = (API_2017_04, API_2021_05, API_2024_05)  # the Atom versions the SDKs send
LATEST_API_VERSION = API_2024_05

# Partitions of a partitioned Standard entity ("Partitioned queues and topics": 16 on Standard); its
# MaxSizeInMegabytes is given per partition and reported for all of them (reported_max_size).
PARTITIONS = 16


def reported_max_size(max_size_in_megabytes: int, partitioned: bool) -> int:
    """What a description reports: the size over all partitions of a partitioned entity."""
    return max_size_in_megabytes * PARTITIONS if partitioned else max_size_in_megabytes


def given_max_size(value: Any, partitioned: bool, choices: tuple[int, ...]) -> Any:
    """A size in a request -> the per-partition size kept: a partitioned entity's description read back
    and sent again (an update round trip) carries the reported total, which Service Bus reads as the
    per-partition size it came from."""
    if partitioned and isinstance(value, int) and not isinstance(value, bool) and value % PARTITIONS == 0 \
            and value // PARTITIONS in choices:
        return value // PARTITIONS
    return value


# Shared access rights ("Service Bus authentication and authorization with SAS": Manage implies Send
# and Listen); the order is the one Service Bus lists them in.
RIGHTS = ("Manage", "Send", "Listen")


class Codec(enum.Enum):
    """How a value is read and written: its type on every surface."""

    DURATION = "duration"  # ISO 8601 on the wire (TimeSpan.MaxValue included), seconds in the configs
    BOOL = "bool"
    INT = "int"
    STRING = "string"
    STATUS = "status"  # EntityStatus enum
    ENTITY = "entity"  # a queue or topic name (forwarding targets); the wire may carry an sb:// URL
    RUNTIME = "runtime"  # read-only: counts, sizes, times; rendered from the entity's state


STATUS_ACTIVE = "Active"  # EntityStatus, as Service Bus spells it (Config.json, Atom, ARM)
STATUS_DISABLED = "Disabled"
STATUS_SEND_DISABLED = "SendDisabled"
STATUS_RECEIVE_DISABLED = "ReceiveDisabled"
STATUSES = (STATUS_ACTIVE, STATUS_DISABLED, STATUS_SEND_DISABLED, STATUS_RECEIVE_DISABLED)
NEVER = None  # a duration default meaning TimeSpan.MaxValue (AutoDeleteOnIdle)


@dataclass(frozen=True)
class Property:
    """One property of the queue, topic and subscription descriptions."""

    atom: str  # element name in the Atom description; also the Config.json property name
    order: Mapping[str, int]  # 1-based position in the Atom description, per entity kind it applies to
    codec: Codec
    arm: str | None = None  # property name in ARM's ``properties`` (None: ARM does not carry it)
    field: str | None = None  # attribute of Queue/Topic/SubscriptionConfig; None: echoed only, kept by admin
    config_default: Any = None  # Config.json default (the official emulator's)
    api_default: Any = None  # management-API default (Service Bus's)
    minimum: float | None = None
    maximum: float | None = None
    bound_doc: str = ""  # the bounds in words, for error messages
    choices: tuple[Any, ...] = ()  # the only values the management API takes (empty: any within the bounds)
    file_bounds: bool = False  # Config.json is held to the bounds too (otherwise only the management API)
    # Config.json's own ceiling where it takes more than the management API (None: no other ceiling)
    file_maximum: float | None = None
    file_bound_doc: str = ""
    enforced: bool = False  # the broker behaves by it; otherwise stored and echoed only
    in_config_file: bool = False  # Config.json accepts it
    since: str = API_2017_04
    immutable: bool = False  # cannot change on an existing entity (400)
    rendered: bool = True  # written in responses (False: accepted on input only)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self.order)


def _p(atom: str, order: Mapping[str, int], codec: Codec, **kw: Any) -> Property:
    return Property(atom, dict(order), codec, **kw)


Q, T, S = QUEUE, TOPIC, SUBSCRIPTION

# The Atom order of each description is the order the service's data contract has: the one
# azure-servicebus's models use (its generated models as ``_model_workaround`` reorders them, because
# the service reads elements in that order), matching the responses recorded in the SDKs' tests
# (@azure/service-bus's atomXmlHelper tests for a 2017-04 queue); MaxMessageSizeInKilobytes came last
# ("add it after all other properties").
PROPERTIES: tuple[Property, ...] = (
    _p("LockDuration", {Q: 1, S: 1}, Codec.DURATION, arm="lockDuration", field="lock_duration",
       config_default=60.0, api_default=60.0, maximum=300.0, bound_doc="the maximum is 5 minutes (PT5M)",
       file_bounds=True, enforced=True, in_config_file=True),
    # "Service Bus quotas", queue or topic size: 1, 2, 3, 4 or 5 GB on Standard (1 GB by default), 80 GB
    # only on Premium or with partitioning (which the emulator does not have). The config file keeps its
    # extension: any size from 1 MB, so that a test fills an entity with a few messages.
    # A partitioned entity on Standard has 16 partitions of that size each, and its description reports
    # the whole (4096 -> 65536): azservicebus admin_client_test.go TestAdminClient_QueueWithMaxValues.
    _p("MaxSizeInMegabytes", {Q: 2, T: 2}, Codec.INT, arm="maxSizeInMegabytes", field="max_size_in_megabytes",
       config_default=1024, api_default=1024, minimum=1, choices=(1024, 2048, 3072, 4096, 5120),
       bound_doc="the Standard tier allows 1024, 2048, 3072, 4096 or 5120 (1 to 5 GB)", enforced=True,
       in_config_file=True),
    _p("RequiresDuplicateDetection", {Q: 3, T: 3}, Codec.BOOL, arm="requiresDuplicateDetection",
       field="requires_duplicate_detection", config_default=False, api_default=False, enforced=True,
       in_config_file=True, immutable=True),
    _p("RequiresSession", {Q: 4, S: 2}, Codec.BOOL, arm="requiresSession", field="requires_session",
       config_default=False, api_default=False, enforced=True, in_config_file=True, immutable=True),
    # TimeSpan.MaxValue through the management API: no TTL is stamped on a message sent without one.
    _p("DefaultMessageTimeToLive", {T: 1, Q: 5, S: 3}, Codec.DURATION, arm="defaultMessageTimeToLive",
       field="default_message_ttl", config_default=3600.0, api_default=MAX_TIMESPAN_SECONDS, enforced=True,
       in_config_file=True),
    _p("DeadLetteringOnMessageExpiration", {Q: 6, S: 4}, Codec.BOOL, arm="deadLetteringOnMessageExpiration",
       field="dead_lettering_on_message_expiration", config_default=False, api_default=False, enforced=True,
       in_config_file=True),
    # "minimum is 20 seconds", "max value is 7 days" (QueueProperties.DuplicateDetectionHistoryTimeWindow);
    # the config file, which tests use with short windows, is not held to the minimum.
    _p("DuplicateDetectionHistoryTimeWindow", {Q: 7, T: 4}, Codec.DURATION,
       arm="duplicateDetectionHistoryTimeWindow", field="duplicate_detection_window", config_default=20.0,
       api_default=600.0, minimum=20.0, maximum=7 * 86400.0,
       bound_doc="it must be between 20 seconds (PT20S) and 7 days (P7D)", enforced=True,
       in_config_file=True),
    _p("DeadLetteringOnFilterEvaluationExceptions", {S: 5}, Codec.BOOL,
       arm="deadLetteringOnFilterEvaluationExceptions", field="dead_lettering_on_filter_evaluation_exceptions",
       config_default=True, api_default=True, enforced=True, in_config_file=True),
    _p("DefaultRuleDescription", {S: 19}, Codec.RUNTIME, rendered=False),  # input only: the first rule
    _p("MessageCount", {Q: 11, S: 6}, Codec.RUNTIME, arm="messageCount"),
    _p("MaxDeliveryCount", {Q: 8, S: 7}, Codec.INT, arm="maxDeliveryCount", field="max_delivery_count",
       config_default=3, api_default=10, minimum=1, bound_doc="it must be at least 1", file_bounds=True,
       enforced=True, in_config_file=True),
    _p("EnableBatchedOperations", {Q: 9, T: 5, S: 8}, Codec.BOOL, arm="enableBatchedOperations",
       api_default=True),
    _p("SizeInBytes", {Q: 10, T: 6}, Codec.RUNTIME, arm="sizeInBytes"),
    _p("FilteringMessagesBeforePublishing", {T: 7}, Codec.BOOL, api_default=False),
    _p("IsAnonymousAccessible", {Q: 12, T: 8}, Codec.BOOL, api_default=False),
    # stored with the entity (QueueConfig/TopicConfig.authorization_rules); parsed and rendered by atom
    _p("AuthorizationRules", {Q: 13, T: 9}, Codec.RUNTIME, field="authorization_rules", enforced=True),
    _p("Status", {Q: 14, T: 10, S: 9}, Codec.STATUS, arm="status", field="status", config_default="Active",
       api_default="Active", enforced=True),
    _p("ForwardTo", {Q: 24, S: 10}, Codec.ENTITY, arm="forwardTo", field="forward_to", enforced=True,
       in_config_file=True),
    _p("CreatedAt", {Q: 15, T: 11, S: 11}, Codec.RUNTIME, arm="createdAt"),
    _p("UpdatedAt", {Q: 16, T: 12, S: 12}, Codec.RUNTIME, arm="updatedAt"),
    _p("AccessedAt", {Q: 17, T: 13, S: 13}, Codec.RUNTIME, arm="accessedAt"),
    _p("SupportOrdering", {Q: 18, T: 14}, Codec.BOOL, arm="supportOrdering", api_default=True),
    _p("CountDetails", {Q: 19, T: 15, S: 14}, Codec.RUNTIME, arm="countDetails"),
    _p("SubscriptionCount", {T: 16}, Codec.RUNTIME, arm="subscriptionCount"),
    _p("UserMetadata", {Q: 25, T: 24, S: 18}, Codec.STRING, maximum=1024,
       bound_doc="it may be at most 1024 characters long"),
    _p("ForwardDeadLetteredMessagesTo", {Q: 26, S: 15}, Codec.ENTITY, arm="forwardDeadLetteredMessagesTo",
       field="forward_dead_lettered_messages_to", enforced=True, in_config_file=True),
    # "Message expiration", Temporary entities: enforced on the broker's clock (broker/idle.py)
    _p("AutoDeleteOnIdle", {Q: 20, T: 19, S: 16}, Codec.DURATION, arm="autoDeleteOnIdle", api_default=NEVER,
       field="auto_delete_on_idle", minimum=300.0, bound_doc="the minimum is 5 minutes", enforced=True),
    _p("EnablePartitioning", {Q: 21, T: 20}, Codec.BOOL, arm="enablePartitioning", api_default=False,
       immutable=True),
    _p("EntityAvailabilityStatus", {Q: 22, T: 21, S: 17}, Codec.RUNTIME),
    _p("EnableSubscriptionPartitioning", {T: 22}, Codec.BOOL, api_default=False),
    _p("EnableExpress", {Q: 23, T: 23}, Codec.BOOL, arm="enableExpress", api_default=False),
    # Standard tier: 256 KB ("Service Bus quotas"); 1 MB to 100 MB are Premium's, refused through the
    # management API. The config file keeps its extension: any size from 1 KB up to Premium's 100 MB
    # ("Large messages support": "up to 100 MB"), so a test can try what a larger entity takes.
    _p("MaxMessageSizeInKilobytes", {Q: 27, T: 25}, Codec.INT, arm="maxMessageSizeInKilobytes",
       field="max_message_size_kb", config_default=256, api_default=256, minimum=1, maximum=256,
       bound_doc="the Standard tier allows at most 256 (larger sizes are a Premium feature)", enforced=True,
       in_config_file=True, since=API_2021_05, file_maximum=102400,
       file_bound_doc="Service Bus allows at most 102400 (100 MB, on Premium)"),
    _p("SqlFilterCount", {T: 17}, Codec.RUNTIME, since=API_2024_05),
    _p("CorrelationFilterCount", {T: 18}, Codec.RUNTIME, since=API_2024_05),
)


def for_kind(kind: str) -> tuple[Property, ...]:
    """The properties of one kind of description, in Atom order."""
    return _BY_KIND[kind]


def atom_order(kind: str) -> tuple[str, ...]:
    return tuple(p.atom for p in _BY_KIND[kind])


def by_atom(kind: str) -> Mapping[str, Property]:
    return _ATOM[kind]


def by_arm(kind: str) -> Mapping[str, Property]:
    return _ARM[kind]


def by_field(kind: str) -> Mapping[str, Property]:
    return _FIELD[kind]


def supported_at(prop: Property, api_version: str | None) -> bool:
    """Whether ``prop`` exists at ``api_version`` (None or unknown: the newest, everything)."""
    if api_version is None or api_version not in API_VERSIONS:
        return True
    return prop.since <= api_version


_BY_KIND: dict[str, tuple[Property, ...]] = {
    k: tuple(sorted((p for p in PROPERTIES if k in p.order), key=lambda p: p.order[k])) for k in KINDS
}
_ATOM = {k: {p.atom: p for p in ps} for k, ps in _BY_KIND.items()}
_ARM = {k: {p.arm: p for p in ps if p.arm} for k, ps in _BY_KIND.items()}
_FIELD = {k: {p.field: p for p in ps if p.field} for k, ps in _BY_KIND.items()}


# --- correlation filter properties -------------------------------------------------------------------

@dataclass(frozen=True)
class CorrelationProperty:
    """A system property a correlation filter may match, under each surface's name."""

    name: str  # Atom element, Config.json key and the broker's key
    arm: str  # ARM correlationFilter property
    amqp: str  # key of $management add-rule's correlation-filter map


# In the order of the Atom CorrelationFilter (and of $management's described correlation filter).
CORRELATION_PROPERTIES: tuple[CorrelationProperty, ...] = tuple(
    CorrelationProperty(name, name[0].lower() + name[1:], amqp)
    for name, amqp in (
        ("CorrelationId", "correlation-id"), ("MessageId", "message-id"), ("To", "to"), ("ReplyTo", "reply-to"),
        ("Label", "label"), ("SessionId", "session-id"), ("ReplyToSessionId", "reply-to-session-id"),
        ("ContentType", "content-type"),
    )
)


# --- the duration codec ------------------------------------------------------------------------------

_ISO_RE = re.compile(
    r"^P(?!$)(?:(?P<y>\d+(?:\.\d+)?)Y)?(?:(?P<mo>\d+(?:\.\d+)?)M)?(?:(?P<w>\d+(?:\.\d+)?)W)?"
    r"(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?=\d)(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<mi>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_TIMESPAN_RE = re.compile(r"^(?:(?P<d>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2}):(?P<s>\d{1,2}(?:\.\d{1,7})?)$")
_ISO_UNITS = {"y": 365 * 86400, "mo": 30 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "mi": 60, "s": 1}


def parse_duration(text: str) -> float:
    """Seconds in an ISO-8601 duration (``PT1H``, ``P14D``) or a .NET TimeSpan (``1.00:00:00``).

    Years count as 365 days and months as 30, as .NET's XmlConvert does for TimeSpan.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a duration string, got {type(text).__name__}")
    s = text.strip()
    m = _ISO_RE.match(s.upper())
    if m and s:
        return float(sum(float(v) * _ISO_UNITS[k] for k, v in m.groupdict().items() if v is not None))
    m = _TIMESPAN_RE.match(s)
    if m:
        h, mi = int(m["h"]), int(m["m"])
        sec = float(m["s"])
        if h > 23 or mi > 59 or sec >= 60:
            raise ValueError(f"invalid TimeSpan {text!r}")
        return int(m["d"] or 0) * 86400 + h * 3600 + mi * 60 + sec
    raise ValueError(f"invalid duration {text!r} (expected ISO-8601 like 'PT1M' or TimeSpan like '00:01:00')")


class NonPositiveDuration(ValueError):
    """A well-formed duration that is zero or negative where a positive one is needed."""


def decode_duration(text: str) -> float:
    """A duration as the management APIs carry it (ISO 8601, TimeSpan.MaxValue included) -> seconds, at
    most MAX_TIMESPAN_SECONDS. ValueError when it is not a duration, NonPositiveDuration when it is not
    positive."""
    if text.strip().upper() == MAX_TIMESPAN.upper():
        return MAX_TIMESPAN_SECONDS
    seconds = parse_duration(text)
    if not math.isfinite(seconds) or seconds <= 0:
        raise NonPositiveDuration(text)
    return min(seconds, MAX_TIMESPAN_SECONDS)


def format_duration(seconds: float | None) -> str:
    """Seconds -> xs:duration as Service Bus writes it ('PT1M', 'P14D', 'PT0.5S'); None -> TimeSpan.MaxValue."""
    if seconds is None or seconds >= MAX_TIMESPAN_SECONDS:
        return MAX_TIMESPAN
    total = max(0.0, float(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    out = "P" + (f"{int(days)}D" if days else "")
    time_part = (f"{int(hours)}H" if hours else "") + (f"{int(minutes)}M" if minutes else "")
    if secs:
        text = f"{secs:.7f}".rstrip("0").rstrip(".")
        time_part += f"{text}S"
    if time_part:
        out += "T" + time_part
    return out if out != "P" else "PT0S"


# --- names -------------------------------------------------------------------------------------------

# Service Bus naming rules: queues and topics up to 260 characters and may contain '/', subscriptions and
# rules up to 50 and may not; letters, digits, '.', '-', '_' (ASCII only), starting and ending with a
# letter or digit. ``\Z``, not ``$``: ``$`` also matches before a final newline, which let 'q\n' in.
_ENTITY_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_\-./]*[A-Za-z0-9])?\Z", re.ASCII)
_CHILD_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_\-.]*[A-Za-z0-9])?\Z", re.ASCII)
MAX_ENTITY_NAME = 260
MAX_CHILD_NAME = 50
DEFAULT_RULE = "$Default"
RESERVED_SEGMENTS = frozenset({"$resources", "$namespaceinfo", "$admin", "subscriptions", "rules"})


def entity_name_problem(name: Any, *, child: bool, rule: bool = False, http: bool = False) -> str | None:
    """Why ``name`` is not a valid queue/topic (``child=False``) or subscription/rule name, or None.

    The one validator of every surface (Config.json, Atom, ARM, the broker). Rule names may also be
    ``$Default``. ``http``: the management APIs also refuse path segments their URLs give a meaning
    (``$Resources``, ``Subscriptions``...); the config file and the broker, which never parse a URL,
    accept them as they always have."""
    if rule and name == DEFAULT_RULE:
        return None
    pattern, limit = (_CHILD_NAME_RE, MAX_CHILD_NAME) if child else (_ENTITY_NAME_RE, MAX_ENTITY_NAME)
    if not isinstance(name, str) or not name or len(name) > limit or pattern.match(name) is None:
        allowed = "letters, digits, periods, hyphens and underscores" + ("" if child else " and slashes")
        return (f"It can contain only {allowed}, must start and end with a letter or digit and be at most "
                f"{limit} characters long.")
    if not child and any(not seg or (http and seg.lower() in RESERVED_SEGMENTS) for seg in name.split("/")):
        return "It contains a reserved or empty path segment."
    return None


# --- entity authorization rules ------------------------------------------------------------------------

@dataclass(frozen=True)
class AuthorizationRuleConfig:
    """A shared access authorization rule of a queue or topic (``AuthorizationRules`` in its description):
    a token signed with one of its keys, ``skn`` = ``key_name``, is valid for that entity with ``rights``."""

    key_name: str
    primary_key: str
    secondary_key: str
    rights: tuple[str, ...]  # of RIGHTS
    created_at: float = 0.0
    modified_at: float = 0.0
    claim_type: str = "SharedAccessKey"
    claim_value: str = "None"

    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in (self.primary_key, self.secondary_key) if k)
