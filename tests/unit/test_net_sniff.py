"""The first-bytes decision (sbemulator/net/sniff.py): which protocol a connection speaks.

Follows the protocols' own definitions of their first bytes: AMQP 1.0 part 5, 5.1 and 5.2 (the protocol
headers ``AMQP 0 1 0 0``, ``AMQP 2 1 0 0``, ``AMQP 3 1 0 0``), RFC 8446 5.1 (a TLS record: content type 22
for a handshake, legacy version 0x0301 or 0x0303) and RFC 9112 3 (an HTTP request line: method SP ...).
"""

from __future__ import annotations

import pytest

from sbemulator.net.sniff import SNIFF_BYTES, Protocol, classify

AMQP_HEADERS = [b"AMQP\x00\x01\x00\x00", b"AMQP\x02\x01\x00\x00", b"AMQP\x03\x01\x00\x00"]
# The first bytes of real ClientHellos: Python's ssl (TLS 1.0 record version), OpenSSL 3 / Go / .NET (1.2).
CLIENT_HELLOS = [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", b"\x16\x03\x03\x00\xa5\x01\x00\x00\xa1\x03\x03"]
REQUEST_LINES = [b"GET /health HTTP/1.1\r\n", b"PUT /orders?api-version=2021-05 HTTP/1.1\r\n",
                 b"DELETE /orders HTTP/1.1\r\n", b"POST /$admin/purge HTTP/1.1\r\n", b"HEAD / HTTP/1.1\r\n",
                 b"OPTIONS * HTTP/1.1\r\n", b"PATCH /x HTTP/1.1\r\n"]


@pytest.mark.parametrize("data, expected", [
    *[(header, Protocol.AMQP) for header in AMQP_HEADERS],
    *[(hello, Protocol.TLS) for hello in CLIENT_HELLOS],
    *[(line, Protocol.HTTP) for line in REQUEST_LINES],
])
def test_each_protocol_is_told_by_its_first_bytes(data: bytes, expected: Protocol) -> None:
    assert classify(data) is expected
    assert classify(data[:SNIFF_BYTES]) is expected  # never more than SNIFF_BYTES needed


@pytest.mark.parametrize("data", [*AMQP_HEADERS, *CLIENT_HELLOS, *REQUEST_LINES])
def test_a_prefix_asks_for_more_bytes_until_it_decides(data: bytes) -> None:
    """Bytes may arrive one at a time: every prefix either asks for more (None) or gives the final answer,
    and once decided the answer does not change."""
    final = classify(data)
    decided = False
    for n in range(1, len(data) + 1):
        answer = classify(data[:n])
        if decided:
            assert answer is final
        elif answer is not None:
            assert answer is final
            decided = True
    assert decided


@pytest.mark.parametrize("data", [
    b"\x00\x00\x00\x08\x02\x00\x00\x00",  # an AMQP frame with no protocol header first
    b"AMQX\x00\x01\x00\x00", b"AB", b"\x16\x02\x00", b"\x80\x2e\x01\x00\x02",  # not AMQP; SSL 2 hello
    b"GET/ HTTP/1.1", b"get / HTTP/1.1", b"BREW /pot HTTP/1.1", b"\r\n\r\n", b"SSH-2.0-OpenSSH",
    b"PRI * HTTP/2.0\r\n",  # HTTP/2's preface: not served
])
def test_anything_else_is_unknown(data: bytes) -> None:
    assert classify(data) is Protocol.UNKNOWN


def test_nothing_yet_decides_nothing() -> None:
    assert classify(b"") is None
    assert classify(b"A") is None and classify(b"AMQ") is None
    assert classify(b"\x16") is None
    assert classify(b"GE") is None and classify(b"OPTIONS") is None  # the space decides


def test_the_decision_reads_at_most_SNIFF_BYTES() -> None:
    """What follows the first SNIFF_BYTES bytes never changes the answer (the listener peeks no more)."""
    assert SNIFF_BYTES == 8
    assert classify(b"AMQP\x00\x01\x00\x00" + b"\xff" * 100) is Protocol.AMQP
    assert classify(b"OPTIONS " + b"\x00" * 100) is Protocol.HTTP
