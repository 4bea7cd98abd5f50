"""Which protocol a connection speaks, from its first bytes: a pure function, no I/O.

Every protocol served here is one where the client speaks first, so the first bytes decide:

* AMQP 1.0: the protocol header ``AMQP`` + protocol id + ``1 0 0`` (id 0 plain AMQP, 2 TLS, 3 SASL;
  AMQP 1.0 part 5, 5.1 and 5.2). The four letters decide; the AMQP layer checks the rest and answers
  with its own header when it does not support the one asked for.
* TLS: a handshake record, content type 22 (``0x16``) and a major version of 3 (``0x03``, SSL 3.0 to
  TLS 1.3 all write it; RFC 8446 5.1), which is how every ClientHello starts.
* HTTP/1.x: a request line, i.e. a method token and a space (RFC 9112 3). Only the methods the
  endpoints here answer, plus the other standard ones so that they get an HTTP error rather than a
  dropped connection.

At most :data:`SNIFF_BYTES` bytes are ever needed: the longest prefix that still decides is
``OPTIONS `` (8 bytes), as long as the AMQP header.
"""

from __future__ import annotations

import enum


class Protocol(enum.Enum):
    AMQP = "amqp"
    TLS = "tls"
    HTTP = "http"
    UNKNOWN = "unknown"  # none of them: the connection is closed


SNIFF_BYTES = 8
AMQP_PREFIX = b"AMQP"
HTTP_METHODS = (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"CONNECT", b"TRACE")
_HTTP_PREFIXES = tuple(method + b" " for method in HTTP_METHODS)


def classify(head: bytes | bytearray | memoryview) -> Protocol | None:
    """The protocol ``head`` (a connection's first bytes, any number) starts, or None when it is a
    prefix of more than one outcome and more bytes are needed (never with :data:`SNIFF_BYTES` or more)."""
    data = bytes(head[:SNIFF_BYTES])
    if not data:
        return None
    first = data[0]
    if first == 0x16:  # a TLS handshake record
        if len(data) < 2:
            return None
        return Protocol.TLS if data[1] == 0x03 else Protocol.UNKNOWN
    if first == 0x41:  # 'A': only AMQP starts so
        if len(data) < len(AMQP_PREFIX):
            return None if AMQP_PREFIX.startswith(data) else Protocol.UNKNOWN
        return Protocol.AMQP if data.startswith(AMQP_PREFIX) else Protocol.UNKNOWN
    for prefix in _HTTP_PREFIXES:
        if data.startswith(prefix):
            return Protocol.HTTP
    if any(prefix.startswith(data) for prefix in _HTTP_PREFIXES):
        return None  # "GE", "POS", "PUT" without its space yet
    return Protocol.UNKNOWN
