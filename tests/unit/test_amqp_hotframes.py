"""The hand-written per-message frames are byte for byte what the generic codec writes.

Peers must not be able to tell the fast path from the general one, so every shape it covers is
compared with ``codec.encode`` of the equivalent performative, over the boundaries of each encoding
(uint0 / smalluint / uint, binary8 / binary32, list8 / list32).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sbemulator.amqp import codec, hotframes
from sbemulator.amqp.framing import build_frame
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Disposition,
    Modified,
    Rejected,
    Released,
    Transfer,
    error,
)
from sbemulator.amqp.types import Symbol, UInt

UINTS = st.one_of(st.sampled_from([0, 1, 255, 256, 65535, 0xFFFFFFFF]), st.integers(0, 0xFFFFFFFF))
STATES = [
    None,
    Accepted(),
    Released(),
    Rejected(),
    Rejected(error("com.microsoft:dead-letter", "why", {Symbol("DeadLetterReason"): "r"})),
    Modified(True, False),
    Modified(True, True, {Symbol("x"): 1}),
]


@given(UINTS, UINTS, st.binary(max_size=300), UINTS, st.booleans(), st.booleans())
def test_transfer_matches_the_codec(handle: int, delivery_id: int, tag: bytes, fmt: int, settled: bool,
                                    more: bool) -> None:
    expected = codec.encode(Transfer(UInt(handle), UInt(delivery_id), tag, UInt(fmt), settled, more))
    assert hotframes.transfer(handle, delivery_id, tag, fmt, settled, more) == expected


@pytest.mark.parametrize("state", STATES, ids=lambda s: type(s).__name__)
@given(role=st.booleans(), first=UINTS, last=st.one_of(st.none(), UINTS), settled=st.booleans())
def test_disposition_matches_the_codec(state, role: bool, first: int, last: int | None, settled: bool) -> None:
    role_value = ROLE_RECEIVER if role else ROLE_SENDER
    expected = codec.encode(Disposition(role_value, UInt(first), None if last is None else UInt(last), settled,
                                        state))
    assert hotframes.disposition(role_value, first, last, settled, state) == expected


def test_frame_matches_build_frame() -> None:
    performative = hotframes.transfer(3, 7, b"t" * 16, 0, False)
    assert hotframes.frame(5, performative, b"payload") == build_frame(
        5, Transfer(UInt(3), UInt(7), b"t" * 16, UInt(0), False), b"payload"
    )


def _generic_disposition(body: bytes) -> Disposition:
    values, _ = codec.decode(body, 3)
    return Disposition.from_list(values)


# The disposition azure-servicebus sends for every complete (bool8 role and settled, batchable null).
SDK_COMPLETE = bytes.fromhex("005315c00d06560152014056000053244540")


def test_the_sdks_complete_is_read_as_the_generic_decoder_reads_it() -> None:
    fast = hotframes.parse_disposition(SDK_COMPLETE)
    assert fast is not None
    assert fast == _generic_disposition(SDK_COMPLETE)
    assert (fast.role, fast.first, fast.last, fast.settled, type(fast.state), fast.batchable) == (
        True, 1, None, False, Accepted, False)


@pytest.mark.parametrize("state", STATES, ids=lambda s: type(s).__name__)
@given(role=st.booleans(), first=UINTS, last=st.one_of(st.none(), UINTS), settled=st.booleans(),
       batchable=st.booleans())
def test_a_parsed_disposition_equals_the_generic_decoders(state, role: bool, first: int, last: int | None,
                                                          settled: bool, batchable: bool) -> None:
    body = codec.encode(Disposition(role, UInt(first), None if last is None else UInt(last), settled, state,
                                    batchable))
    fast = hotframes.parse_disposition(body)
    if type(state) in (Accepted, Released) or state is None:
        assert fast == _generic_disposition(body)
    else:  # outcomes with fields (rejected, modified) are left to the generic decoder
        assert fast is None or fast == _generic_disposition(body)


@pytest.mark.parametrize("body", [SDK_COMPLETE[:cut] for cut in range(3, len(SDK_COMPLETE))] + [SDK_COMPLETE + b"\x40"])
def test_a_truncated_or_padded_disposition_is_left_to_the_generic_decoder(body: bytes) -> None:
    assert hotframes.parse_disposition(body) is None


# The same with a delivery id past 255 (uint instead of smalluint).
SDK_COMPLETE_UINT = bytes.fromhex("005315c010065601700000010040560000532445" "40")


def test_the_sdks_complete_with_a_large_delivery_id_is_read_as_the_generic_decoder_reads_it() -> None:
    fast = hotframes.parse_disposition(SDK_COMPLETE_UINT)
    assert fast is not None and fast.first == 256
    assert fast == _generic_disposition(SDK_COMPLETE_UINT)


@given(channel=st.integers(0, 65535), delivery_id=UINTS)
def test_the_accepted_echo_frame_is_the_generic_frame_of_that_disposition(channel: int, delivery_id: int) -> None:
    expected = build_frame(channel, Disposition(ROLE_SENDER, UInt(delivery_id), None, True, Accepted()))
    assert hotframes.accepted_echo_frame(channel, delivery_id) == expected


@given(role=st.booleans(), first=UINTS, last=st.one_of(st.none(), UINTS), settled=st.booleans(),
       batchable=st.one_of(st.none(), st.booleans()), state=st.sampled_from(STATES))
def test_only_the_sdks_exact_complete_has_a_complete_id(role, first, last, settled, batchable, state) -> None:
    # sdk_complete_id must not take any other disposition for a plain complete of one delivery; bool8 /
    # null encodings are what the SDK writes, so the body is built as it does (0x56 for booleans).
    def boolean(value):
        return b"\x40" if value is None else b"\x56" + bytes((int(value),))

    fields = (boolean(role) + hotframes.uint(first) + (b"\x40" if last is None else hotframes.uint(last))
              + boolean(settled) + hotframes.state_bytes(state) + boolean(batchable))
    body = b"\x00\x53\x15\xc0" + bytes((len(fields) + 1, 6)) + fields
    is_sdk_complete = (role is True and last is None and settled is False and type(state) is Accepted
                       and batchable is None and first > 0)  # id 0 (uint0) takes the general parser
    assert hotframes.sdk_complete_id(body) == (first if is_sdk_complete else None)
    if is_sdk_complete:
        assert _generic_disposition(body).first == first
