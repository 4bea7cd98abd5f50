"""The name clients use to reach an emulator that listens beyond loopback.

With ``--host 127.0.0.1`` (the default) clients dial 127.0.0.1 and the generated certificate covers
it. With ``--host 0.0.0.0`` a client on another machine or in a container cannot use 127.0.0.1: the
printed connection string names ``--public-host`` when given, else this machine's host name, and the
generated certificate covers that name, the host name and the machine's own addresses too, so an SDK
that checks the certificate's names against the Endpoint accepts it.
"""

from __future__ import annotations

import socket

WILDCARDS = ("0.0.0.0", "::", "")


def shown_host(host: str, public_host: str | None) -> str:
    """The host the printed connection string and URLs name."""
    if public_host:
        return public_host
    if host in WILDCARDS:
        return socket.gethostname() or "127.0.0.1"
    return host


def certificate_hosts(host: str, public_host: str | None) -> tuple[str, ...]:
    """Names and addresses beyond localhost/127.0.0.1/::1 the generated certificate must cover."""
    names: list[str] = []
    if public_host:
        names.append(public_host)
    if host not in WILDCARDS and host not in ("127.0.0.1", "::1", "localhost"):
        names.append(host)
    if host in WILDCARDS:
        hostname = socket.gethostname()
        if hostname:
            names.append(hostname)
            try:  # the addresses this machine's name resolves to (bounded: a local lookup)
                for *_, address in socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP):
                    names.append(str(address[0]))
            except OSError:
                pass
    unique: list[str] = []
    for name in names:
        if name not in unique and name not in ("127.0.0.1", "::1", "localhost"):
            unique.append(name)
    return tuple(unique)
