"""AMQP 1.0 composite types: performatives, SASL frames, delivery states, terminus and sections.

Each composite is a small slotted class built from a field list, so the wire encoding (a described
list) and the Python view stay in one place. Trailing null fields are trimmed on encoding, as the
specification allows and as peers expect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .codec import DecodeError
from .types import Described, Symbol, ULong

_BY_CODE: dict[int, type[Composite]] = {}
_BY_NAME: dict[str, type[Composite]] = {}


class Composite:
    """Base of every described-list type."""

    __slots__ = ()
    CODE: ClassVar[int]
    NAME: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]]
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    # Per field, a check of what a peer may send in it (None: anything): see ``field_types``.
    CHECKS: ClassVar[tuple[Callable[[Any], bool] | None, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self.FIELDS
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes at most {len(fields)} fields")
        for name, value in zip(fields, args, strict=False):
            object.__setattr__(self, name, value)
        for name in fields[len(args):]:
            object.__setattr__(self, name, kwargs.pop(name, self.DEFAULTS.get(name)))
        if kwargs:
            raise TypeError(f"unknown fields for {type(self).__name__}: {sorted(kwargs)}")

    # Some clients index into certain lists (the SDK reads error[2] without a length check), so
    # those types keep every field on the wire instead of trimming trailing nulls.
    KEEP_ALL_FIELDS: ClassVar[bool] = False

    def to_described(self) -> Described:
        values = [getattr(self, name) for name in self.FIELDS]
        if not self.KEEP_ALL_FIELDS:
            while values and values[-1] is None:
                values.pop()
        return Described(ULong(self.CODE), values)

    @classmethod
    def from_list(cls, values: list) -> Composite:
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


def _field_init(name: str, field_names: tuple[str, ...], defaults: dict) -> Any:
    """An ``__init__`` with one parameter per field (like ``namedtuple`` builds): a frame or a section
    is built for every message, and the generic loop over ``*args``/``**kwargs`` cost more than the
    rest of building it."""
    if not field_names:
        return Composite.__init__
    params = ", ".join(f"{f}=_d[{f!r}]" for f in field_names)
    body = "\n".join(f"    self.{f} = {f}" for f in field_names)
    namespace: dict[str, Any] = {"_d": {f: defaults.get(f) for f in field_names}}
    exec(f"def __init__(self, {params}):\n{body}\n", namespace)  # the field names are our own constants
    init = namespace["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init


def _composite(name: str, code: int, symbol: str, fields: str, defaults: dict | None = None) -> type:
    field_names = tuple(fields.split())
    cls = type(
        name,
        (Composite,),
        {
            "__slots__": field_names,
            "__init__": _field_init(name, field_names, defaults or {}),
            "CODE": code,
            "NAME": symbol,
            "FIELDS": field_names,
            "DEFAULTS": defaults or {},
        },
    )
    _BY_CODE[code] = cls
    _BY_NAME[symbol] = cls
    return cls


# Transport performatives (spec 2.7)
Open = _composite(
    "Open", 0x10, "amqp:open:list",
    "container_id hostname max_frame_size channel_max idle_time_out outgoing_locales incoming_locales "
    "offered_capabilities desired_capabilities properties",
    {"max_frame_size": 0xFFFFFFFF, "channel_max": 0xFFFF},
)
Begin = _composite(
    "Begin", 0x11, "amqp:begin:list",
    "remote_channel next_outgoing_id incoming_window outgoing_window handle_max offered_capabilities "
    "desired_capabilities properties",
    {"handle_max": 0xFFFFFFFF},
)
Attach = _composite(
    "Attach", 0x12, "amqp:attach:list",
    "name handle role snd_settle_mode rcv_settle_mode source target unsettled incomplete_unsettled "
    "initial_delivery_count max_message_size offered_capabilities desired_capabilities properties",
    {"snd_settle_mode": 2, "rcv_settle_mode": 0, "incomplete_unsettled": False},
)
Flow = _composite(
    "Flow", 0x13, "amqp:flow:list",
    "next_incoming_id incoming_window next_outgoing_id outgoing_window handle delivery_count "
    "link_credit available drain echo properties",
    {"drain": False, "echo": False},
)
Transfer = _composite(
    "Transfer", 0x14, "amqp:transfer:list",
    "handle delivery_id delivery_tag message_format settled more rcv_settle_mode state resume aborted "
    "batchable",
    {"more": False, "resume": False, "aborted": False, "batchable": False},
)
Disposition = _composite(
    "Disposition", 0x15, "amqp:disposition:list",
    "role first last settled state batchable",
    {"settled": False, "batchable": False},
)
Detach = _composite("Detach", 0x16, "amqp:detach:list", "handle closed error", {"closed": False})
End = _composite("End", 0x17, "amqp:end:list", "error")
Close = _composite("Close", 0x18, "amqp:close:list", "error")
Error = _composite("Error", 0x1D, "amqp:error:list", "condition description info")
Error.KEEP_ALL_FIELDS = True

# SASL (spec 5.3)
SaslMechanisms = _composite("SaslMechanisms", 0x40, "amqp:sasl-mechanisms:list", "sasl_server_mechanisms")
SaslInit = _composite("SaslInit", 0x41, "amqp:sasl-init:list", "mechanism initial_response hostname")
SaslChallenge = _composite("SaslChallenge", 0x42, "amqp:sasl-challenge:list", "challenge")
SaslResponse = _composite("SaslResponse", 0x43, "amqp:sasl-response:list", "response")
SaslOutcome = _composite("SaslOutcome", 0x44, "amqp:sasl-outcome:list", "code additional_data")

# Delivery states (spec 3.4)
Received = _composite("Received", 0x23, "amqp:received:list", "section_number section_offset")
Accepted = _composite("Accepted", 0x24, "amqp:accepted:list", "")
Rejected = _composite("Rejected", 0x25, "amqp:rejected:list", "error")
Released = _composite("Released", 0x26, "amqp:released:list", "")
Modified = _composite(
    "Modified", 0x27, "amqp:modified:list", "delivery_failed undeliverable_here message_annotations"
)

# Terminus (spec 3.5)
Source = _composite(
    "Source", 0x28, "amqp:source:list",
    "address durable expiry_policy timeout dynamic dynamic_node_properties distribution_mode filter "
    "default_outcome outcomes capabilities",
)
Target = _composite(
    "Target", 0x29, "amqp:target:list",
    "address durable expiry_policy timeout dynamic dynamic_node_properties capabilities",
)

# Message header and properties sections (spec 3.2)
Header = _composite(
    "Header", 0x70, "amqp:header:list", "durable priority ttl first_acquirer delivery_count"
)
Properties = _composite(
    "Properties", 0x73, "amqp:properties:list",
    "message_id user_id to subject reply_to correlation_id content_type content_encoding "
    "absolute_expiry_time creation_time group_id group_sequence reply_to_group_id",
)

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
