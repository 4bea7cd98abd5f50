"""Name the entity behind the SDKs' least helpful error: a link to an entity that is not in the topology.

Service Bus answers the put-token for an entity that does not exist with 404 ("The messaging entity
'sb://host/NAME' could not be found."). The Python SDK retries, then raises
``ServiceBusAuthenticationError: ... Error condition: amqp:client-error.``, naming no entity; the 404
and its text survive only in its ``inner_exception`` (a ``TokenAuthFailure``) or its ``__context__``.
:func:`missing_entity` digs it out so the pytest plugin can say which entity and which topology file.
Pure: no SDK import, it reads attributes.
"""

from __future__ import annotations

import re

_NOT_FOUND = re.compile(r"The messaging entity '(?:[a-z]+://[^/']*/)?([^']*)' could not be found")
_MAX_DEPTH = 8  # exception chains are short; bound the walk anyway (a cycle cannot loop forever)


def missing_entity(error: BaseException) -> str | None:
    """The entity path a 404 "could not be found" anywhere in ``error``'s chain names, or None."""
    seen: set[int] = set()
    pending: list[object] = [error]
    while pending and len(seen) < _MAX_DEPTH:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        for text in _texts(current):
            match = _NOT_FOUND.search(text)
            if match:
                return match.group(1).strip("/")
        pending.extend(getattr(current, name, None) for name in ("inner_exception", "__cause__", "__context__"))
    return None


def _texts(error: object) -> list[str]:
    texts = [str(error)]
    for name in ("status_description", "description", "message"):
        value = getattr(error, name, None)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            texts.append(value)
    return texts


def explain(entity: str, topology: str | None) -> str:
    """The message the plugin adds to a failed test's report."""
    where = f"the topology file {topology}" if topology else "the emulator's topology (no topology file was given)"
    return (f"sbemulator: the entity {entity!r} does not exist in the emulator's namespace: it is not in {where}. "
            "The SDK reports this as an authentication error (the put-token for a missing entity is answered "
            "with 404 'could not be found'). Add the queue or topic (and subscription) to the file, or create it "
            "in the test through the admin client (servicebus_emulator.admin_connection_string).")
