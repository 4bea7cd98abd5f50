"""AMQP 1.0 composite types: performatives, SASL frames, delivery states, terminus and sections.

Each composite is a slotted dataclass whose fields, in order, are the described list's (``composite``
registers it with the decoder), so the wire encoding and the Python view, types included, stay in one
place. Trailing null fields are trimmed on encoding, as the
specification allows and as peers expect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

from .codec import DecodeError
from .types import Described, Symbol, ULong

_BY_CODE: dict[int, type[Composite]] = {}
_BY_NAME: dict[str, type[Composite]] = {}


class Composite:
    """Base of every described-list type: the fields are the subclass's dataclass fields, in wire order."""

    __slots__ = ()
    CODE: ClassVar[int]
    NAME: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]
    # The non-null defaults, which a null (or absent) field decodes to.
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    # Per field, a check of what a peer may send in it (None: anything): see ``field_types``.
    CHECKS: ClassVar[tuple[Callable[[Any], bool] | None, ...]] = ()
    # Some clients index into certain lists (the SDK reads error[2] without a length check), so
    # those types keep every field on the wire instead of trimming trailing nulls.
    KEEP_ALL_FIELDS: ClassVar[bool] = False
    # What ``dataclass`` adds to every subclass (declared so the type checker sees composites as dataclasses).
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def to_described(self) -> Described:
        values = [getattr(self, name) for name in self.FIELDS]
        if not self.KEEP_ALL_FIELDS:
            while values and values[-1] is None:
                values.pop()
        return Described(ULong(self.CODE), values)

    @classmethod
    def from_list(cls, values: list[Any]) -> Self:
        """The composite a decoded field list describes. Fields with a declared type are checked here,
        where the peer's values become ours: a value of the wrong type is a DecodeError (the peer sees
        ``amqp:decode-error``), so no handler meets a string handle or a list as a delivery-id."""
        obj = cls.__new__(cls)
        fields = cls.FIELDS
        defaults = cls.DEFAULTS
        checks = cls.CHECKS
        n = len(values)
        for i, name in enumerate(fields):
            value = values[i] if i < n else None
            if type(value) is Described:
                value = from_described(value)
            if value is None:
                if name in defaults:
                    value = defaults[name]
            elif checks:
                check = checks[i]
                if check is not None and not check(value):
                    raise DecodeError(f"{cls.__name__}.{name} cannot be {type(value).__name__} {value!r:.40}")
            object.__setattr__(obj, name, value)
        return obj

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, f) == getattr(other, f) for f in self.FIELDS
        )

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f}={getattr(self, f)!r}" for f in self.FIELDS if getattr(self, f) is not None
        )
        return f"{type(self).__name__}({shown})"


_C = TypeVar("_C", bound=Composite)


@dataclass_transform(eq_default=False)
def composite(code: int, symbol: str) -> Callable[[type[_C]], type[_C]]:
    """Make the decorated class a composite type with descriptor ``code`` / ``symbol``: a slotted
    dataclass whose annotated fields, in order, are the described list's fields. The ``__init__`` the
    dataclass writes has one parameter per field (like ``namedtuple``'s): a frame or a section is built
    for every message, and a generic loop over ``*args``/``**kwargs`` cost more than the rest of
    building it. The class is registered with the decoder (``from_described``)."""

    def register(cls: type[_C]) -> type[_C]:
        built = dataclass(slots=True, eq=False, repr=False)(cls)
        built.CODE = code
        built.NAME = symbol
        specs = dataclasses.fields(built)
        built.FIELDS = tuple(f.name for f in specs)
        built.DEFAULTS = {f.name: f.default for f in specs if f.default is not None}
        _BY_CODE[code] = built
        _BY_NAME[symbol] = built
        return built

    return register


# Fields without a declared AMQP type (``field_types`` below) are ``Any``: what the peer sent there
# (a terminus, a delivery state, capabilities) is narrowed where it is used.

# Transport performatives (spec 2.7)
@composite(0x10, "amqp:open:list")
class Open(Composite):
    container_id: str | None = None
    hostname: str | None = None
    max_frame_size: int = 0xFFFFFFFF
    channel_max: int = 0xFFFF
    idle_time_out: int | None = None
    outgoing_locales: Any = None
    incoming_locales: Any = None
    offered_capabilities: Any = None
    desired_capabilities: Any = None
    properties: dict[Any, Any] | None = None


@composite(0x11, "amqp:begin:list")
class Begin(Composite):
    remote_channel: int | None = None
    next_outgoing_id: int | None = None
    incoming_window: int | None = None
    outgoing_window: int | None = None
    handle_max: int = 0xFFFFFFFF
    offered_capabilities: Any = None
    desired_capabilities: Any = None
    properties: dict[Any, Any] | None = None


@composite(0x12, "amqp:attach:list")
class Attach(Composite):
    name: str | None = None
    handle: int | None = None
    role: bool | None = None
    snd_settle_mode: int | None = 2  # None: sent as null, which a receiver reads as the default
    rcv_settle_mode: int | None = 0
    source: Any = None
    target: Any = None
    unsettled: Any = None
    incomplete_unsettled: bool | None = False  # None: we send it as null
    initial_delivery_count: int | None = None
    max_message_size: int | None = None
    offered_capabilities: Any = None
    desired_capabilities: Any = None
    properties: dict[Any, Any] | None = None


@composite(0x13, "amqp:flow:list")
class Flow(Composite):
    next_incoming_id: int | None = None
    incoming_window: int | None = None
    next_outgoing_id: int | None = None
    outgoing_window: int | None = None
    handle: int | None = None
    delivery_count: int | None = None
    link_credit: int | None = None
    available: int | None = None
    drain: bool = False
    echo: bool = False
    properties: dict[Any, Any] | None = None


@composite(0x14, "amqp:transfer:list")
class Transfer(Composite):
    handle: int | None = None
    delivery_id: int | None = None
    delivery_tag: bytes | None = None
    message_format: int | None = None
    settled: bool | None = None
    more: bool = False
    rcv_settle_mode: int | None = None
    state: Any = None
    resume: bool = False
    aborted: bool = False
    batchable: bool = False


@composite(0x15, "amqp:disposition:list")
class Disposition(Composite):
    role: bool | None = None
    first: int | None = None
    last: int | None = None
    settled: bool = False
    state: Any = None
    batchable: bool = False


@composite(0x16, "amqp:detach:list")
class Detach(Composite):
    handle: int | None = None
    closed: bool = False
    error: Error | None = None


@composite(0x17, "amqp:end:list")
class End(Composite):
    error: Error | None = None


@composite(0x18, "amqp:close:list")
class Close(Composite):
    error: Error | None = None


@composite(0x1D, "amqp:error:list")
class Error(Composite):
    KEEP_ALL_FIELDS: ClassVar[bool] = True
    condition: str | None = None
    description: str | None = None
    info: dict[Any, Any] | None = None


# SASL (spec 5.3)
@composite(0x40, "amqp:sasl-mechanisms:list")
class SaslMechanisms(Composite):
    sasl_server_mechanisms: Any = None


@composite(0x41, "amqp:sasl-init:list")
class SaslInit(Composite):
    mechanism: str | None = None
    initial_response: bytes | None = None
    hostname: str | None = None


@composite(0x42, "amqp:sasl-challenge:list")
class SaslChallenge(Composite):
    challenge: bytes | None = None


@composite(0x43, "amqp:sasl-response:list")
class SaslResponse(Composite):
    response: bytes | None = None


@composite(0x44, "amqp:sasl-outcome:list")
class SaslOutcome(Composite):
    code: int | None = None
    additional_data: bytes | None = None


# Delivery states (spec 3.4)
@composite(0x23, "amqp:received:list")
class Received(Composite):
    section_number: int | None = None
    section_offset: int | None = None


@composite(0x24, "amqp:accepted:list")
class Accepted(Composite):
    pass


@composite(0x25, "amqp:rejected:list")
class Rejected(Composite):
    error: Any = None


@composite(0x26, "amqp:released:list")
class Released(Composite):
    pass


@composite(0x27, "amqp:modified:list")
class Modified(Composite):
    delivery_failed: Any = None
    undeliverable_here: Any = None
    message_annotations: Any = None


# Terminus (spec 3.5)
@composite(0x28, "amqp:source:list")
class Source(Composite):
    address: Any = None
    durable: Any = None
    expiry_policy: Any = None
    timeout: Any = None
    dynamic: Any = None
    dynamic_node_properties: Any = None
    distribution_mode: Any = None
    filter: Any = None
    default_outcome: Any = None
    outcomes: Any = None
    capabilities: Any = None


@composite(0x29, "amqp:target:list")
class Target(Composite):
    address: Any = None
    durable: Any = None
    expiry_policy: Any = None
    timeout: Any = None
    dynamic: Any = None
    dynamic_node_properties: Any = None
    capabilities: Any = None


# Message header and properties sections (spec 3.2)
@composite(0x70, "amqp:header:list")
class Header(Composite):
    durable: Any = None
    priority: Any = None
    ttl: Any = None
    first_acquirer: Any = None
    delivery_count: Any = None


@composite(0x73, "amqp:properties:list")
class Properties(Composite):
    message_id: Any = None
    user_id: Any = None
    to: Any = None
    subject: Any = None
    reply_to: Any = None
    correlation_id: Any = None
    content_type: Any = None
    content_encoding: Any = None
    absolute_expiry_time: Any = None
    creation_time: Any = None
    group_id: Any = None
    group_sequence: Any = None
    reply_to_group_id: Any = None


PERFORMATIVES = (Open, Begin, Attach, Flow, Transfer, Disposition, Detach, End, Close)


# ------------------------------------------------------------------ field types a peer must respect
def _unsigned(bits: int) -> Callable[[Any], bool]:
    top = (1 << bits) - 1
    return lambda v: type(v) is not bool and isinstance(v, int) and 0 <= v <= top


_CHECK_OF: dict[str, Callable[[Any], bool]] = {
    "ubyte": _unsigned(8),
    "ushort": _unsigned(16),
    "uint": _unsigned(32),
    "ulong": _unsigned(64),
    "boolean": lambda v: type(v) is bool,
    "string": lambda v: isinstance(v, str),
    "binary": lambda v: isinstance(v, (bytes, bytearray)),
    "map": lambda v: isinstance(v, dict),
    "error": lambda v: type(v) is Error,
}


def field_types(cls: type[Composite], **types: str) -> None:
    """Declare the AMQP type of fields of ``cls`` (spec 2.7 and 5.3); undeclared fields take anything
    (terminus, delivery states and capabilities are checked where they are used)."""
    unknown = set(types) - set(cls.FIELDS)
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
    cls.CHECKS = tuple(_CHECK_OF[types[name]] if name in types else None for name in cls.FIELDS)


field_types(Open, container_id="string", hostname="string", max_frame_size="uint", channel_max="ushort",
            idle_time_out="uint", properties="map")
field_types(Begin, remote_channel="ushort", next_outgoing_id="uint", incoming_window="uint",
            outgoing_window="uint", handle_max="uint", properties="map")
field_types(Attach, name="string", handle="uint", role="boolean", snd_settle_mode="ubyte", rcv_settle_mode="ubyte",
            incomplete_unsettled="boolean", initial_delivery_count="uint", max_message_size="ulong",
            properties="map")
field_types(Flow, next_incoming_id="uint", incoming_window="uint", next_outgoing_id="uint", outgoing_window="uint",
            handle="uint", delivery_count="uint", link_credit="uint", available="uint", drain="boolean",
            echo="boolean", properties="map")
field_types(Transfer, handle="uint", delivery_id="uint", delivery_tag="binary", message_format="uint",
            settled="boolean", more="boolean", rcv_settle_mode="ubyte", resume="boolean", aborted="boolean",
            batchable="boolean")
field_types(Disposition, role="boolean", first="uint", last="uint", settled="boolean", batchable="boolean")
field_types(Detach, handle="uint", closed="boolean", error="error")
field_types(End, error="error")
field_types(Close, error="error")
field_types(Error, condition="string", description="string", info="map")
SASL_FRAMES = (SaslMechanisms, SaslInit, SaslChallenge, SaslResponse, SaslOutcome)
field_types(SaslInit, mechanism="string", initial_response="binary", hostname="string")

ROLE_SENDER = False
ROLE_RECEIVER = True
SND_UNSETTLED, SND_SETTLED, SND_MIXED = 0, 1, 2
RCV_FIRST, RCV_SECOND = 0, 1


def from_described(value: Any) -> Any:
    """Turn a decoded described list into its composite class; other values pass through."""
    if not isinstance(value, Described):
        return value
    descriptor = value.descriptor
    cls = _BY_NAME.get(descriptor) if isinstance(descriptor, str) else _BY_CODE.get(descriptor)
    if cls is None or not isinstance(value.value, list):
        return value
    return cls.from_list(value.value)


def error(condition: str, description: str | None = None, info: dict | None = None) -> Error:
    """Build an AMQP error with a symbol condition (the only form peers accept)."""
    return Error(Symbol(condition), description, info)
