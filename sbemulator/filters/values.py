"""Runtime value semantics: kinds, comparisons and arithmetic, following the documented rules.

The docs say operators "follow C# implicit conversion semantics whenever possible": integers and
floating-point numbers mix (the integer is promoted), and otherwise both sides must be of the same
kind. Unknown (a missing property, or NULL) is ``None`` everywhere; every operator here is only
called with two known values, the compiled closures handle unknown before calling in.

Choices where the docs are silent, kept consistent:
- ``=`` between different kinds (``'1' = 1``, ``TRUE = 1``) is false and ``<>`` true, as C#
  ``object.Equals`` would say; ordering (``<`` etc.) between different kinds, or of booleans, is
  unknown, so neither the predicate nor its NOT matches.
- Strings compare ordinally (case-sensitive), as C# ``string`` equality does.
- Arithmetic on non-numbers raises FilterEvaluationError, except ``+`` with a string (concatenation,
  as in C#) and date/duration arithmetic. Integer arithmetic is 64-bit and wraps like C# unchecked
  code; integer division truncates toward zero and integer division by zero is an error, while
  floating-point division by zero gives infinity or NaN.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sbemulator.amqp.types import Described, Long, Symbol, Timestamp

from .errors import FilterEvaluationError

NUM = "number"
STR = "string"
BOOL = "boolean"
BYTES = "binary"
UUID = "uuid"
DATETIME = "datetime"
TIMESPAN = "timespan"
OTHER = "other"

_KINDS: dict[type, str] = {int: NUM, float: NUM, str: STR, bool: BOOL, bytes: BYTES, uuid.UUID: UUID,
                           datetime: DATETIME, timedelta: TIMESPAN}
ORDERED = frozenset({NUM, STR, DATETIME, TIMESPAN})


def kind(value: Any) -> str:
    """The comparison kind of a (non-None) value; subclasses (AMQP Symbol, Int, ...) map to their base."""
    t = type(value)
    k = _KINDS.get(t)
    if k is None:
        if isinstance(value, bool):
            k = BOOL
        elif isinstance(value, int | float):
            k = NUM
        elif isinstance(value, str):
            k = STR
        elif isinstance(value, bytes | bytearray):
            k = BYTES
        elif isinstance(value, uuid.UUID):
            k = UUID
        elif isinstance(value, datetime):
            k = DATETIME
        elif isinstance(value, timedelta):
            k = TIMESPAN
        else:
            k = OTHER
        _KINDS[t] = k
    return k


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_amqp_timestamp(value: Timestamp) -> datetime:
    """An AMQP timestamp application property as the UTC date/time it stands for.

    The SDKs send a date/time property (Python ``datetime``, .NET ``DateTime``, JS ``Date``) as an
    AMQP timestamp, and Service Bus evaluates it as a DateTime: it compares with
    ``sys.EnqueuedTimeUtc`` and with date/time parameters, not with numbers.
    """
    return _EPOCH + timedelta(milliseconds=int(value))


def to_amqp_timestamp(value: datetime) -> Timestamp:
    """A date/time computed by an action, as the AMQP timestamp the message carries."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return Timestamp((value - _EPOCH) // timedelta(milliseconds=1))


TIMESPAN_DESCRIPTOR = Symbol("com.microsoft:timespan")
_TICKS_PER_MICROSECOND = 10


def to_amqp_timespan(value: timedelta) -> Described:
    """A duration computed by an action (``SET Age = sys.ExpiresAtUtc - sys.EnqueuedTimeUtc``), the way
    the Service Bus AMQP guide's type mapping gives a TimeSpan: ``com.microsoft:timespan`` described
    long, TimeSpan.Ticks (100 ns)."""
    return Described(TIMESPAN_DESCRIPTOR, Long(value // timedelta(microseconds=1) * _TICKS_PER_MICROSECOND))


def from_amqp(value: Any) -> Any:
    """An application property value as filters see it: an AMQP timestamp is a date/time and a
    ``com.microsoft:timespan`` a duration; anything else is itself."""
    if value.__class__ is Timestamp:
        return from_amqp_timestamp(value)
    if value.__class__ is Described and value.descriptor == TIMESPAN_DESCRIPTOR and isinstance(value.value, int):
        return timedelta(microseconds=value.value // _TICKS_PER_MICROSECOND)
    return value


def to_amqp(value: Any) -> Any:
    """The AMQP form of a date/time or duration (the inverse of ``from_amqp``); anything else is itself."""
    if isinstance(value, datetime):
        return to_amqp_timestamp(value)
    if isinstance(value, timedelta):
        return to_amqp_timespan(value)
    return value


def equals(a: Any, b: Any) -> bool:
    if kind(a) != kind(b):
        return False
    try:
        return bool(a == b)
    except TypeError:  # e.g. naive vs aware datetimes
        return False


def not_equals(a: Any, b: Any) -> bool:
    return not equals(a, b)


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool | None]:
    def compare(a: Any, b: Any) -> bool | None:
        ka = kind(a)
        if ka != kind(b) or ka not in ORDERED:
            return None
        try:
            return bool(op(a, b))
        except TypeError:
            return None

    return compare


less = _ordered(lambda a, b: a < b)
less_equal = _ordered(lambda a, b: a <= b)
greater = _ordered(lambda a, b: a > b)
greater_equal = _ordered(lambda a, b: a >= b)

COMPARATORS = {"=": equals, "<>": not_equals, "<": less, "<=": less_equal, ">": greater, ">=": greater_equal}


# ---- arithmetic ---------------------------------------------------------------------------------
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


def wrap64(value: int) -> int:
    if _I64_MIN <= value <= _I64_MAX:
        return value
    return ((value - _I64_MIN) % 2**64) + _I64_MIN


def to_text(value: Any) -> str:
    """How C# would render a value in string concatenation."""
    k = kind(value)
    if k == STR:
        return str(value)
    if k == BOOL:
        return "True" if value else "False"
    if k == NUM and isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value).replace("e+", "E+").replace("e-", "E-")
    return str(value)


def _bad(op: str, a: Any, b: Any | None = None) -> FilterEvaluationError:
    if b is None:
        return FilterEvaluationError(f"operator '{op}' cannot be applied to a {kind(a)}")
    return FilterEvaluationError(f"operator '{op}' cannot be applied to a {kind(a)} and a {kind(b)}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def add(a: Any, b: Any) -> Any:
    ka, kb = kind(a), kind(b)
    if ka == NUM and kb == NUM:
        r = a + b
        return wrap64(r) if type(r) is int else r
    if ka == STR or kb == STR:
        if ka in (STR, NUM, BOOL, UUID) and kb in (STR, NUM, BOOL, UUID):
            return to_text(a) + to_text(b)
        raise _bad("+", a, b)
    if (ka, kb) in ((DATETIME, TIMESPAN), (TIMESPAN, DATETIME), (TIMESPAN, TIMESPAN)):
        try:
            return a + b
        except OverflowError as e:
            raise FilterEvaluationError(f"'+' overflowed: {e}")
    raise _bad("+", a, b)


def subtract(a: Any, b: Any) -> Any:
    ka, kb = kind(a), kind(b)
    if ka == NUM and kb == NUM:
        r = a - b
        return wrap64(r) if type(r) is int else r
    if (ka, kb) in ((DATETIME, DATETIME), (DATETIME, TIMESPAN), (TIMESPAN, TIMESPAN)):
        try:
            return a - b
        except (OverflowError, TypeError) as e:
            raise FilterEvaluationError(f"'-' failed: {e}")
    raise _bad("-", a, b)


def multiply(a: Any, b: Any) -> Any:
    if kind(a) == NUM and kind(b) == NUM:
        r = a * b
        return wrap64(r) if type(r) is int else r
    raise _bad("*", a, b)


def divide(a: Any, b: Any) -> Any:
    if kind(a) != NUM or kind(b) != NUM:
        raise _bad("/", a, b)
    if _is_int(a) and _is_int(b):
        if b == 0:
            raise FilterEvaluationError("integer division by zero")
        q = abs(a) // abs(b)
        return wrap64(q if (a >= 0) == (b >= 0) else -q)
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def modulo(a: Any, b: Any) -> Any:
    if kind(a) != NUM or kind(b) != NUM:
        raise _bad("%", a, b)
    if _is_int(a) and _is_int(b):
        if b == 0:
            raise FilterEvaluationError("integer division by zero")
        r = abs(a) % abs(b)
        return r if a >= 0 else -r
    if float(b) == 0.0:
        return math.nan
    return math.fmod(float(a), float(b))


ARITHMETIC = {"+": add, "-": subtract, "*": multiply, "/": divide, "%": modulo}


def negate(a: Any) -> Any:
    k = kind(a)
    if k == NUM:
        return -a if isinstance(a, float) else wrap64(-a)
    if k == TIMESPAN:
        return -a
    raise _bad("-", a)


def plus(a: Any) -> Any:
    if kind(a) in (NUM, TIMESPAN):
        return a
    raise _bad("+", a)
