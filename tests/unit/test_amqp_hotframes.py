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
