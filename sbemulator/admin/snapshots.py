"""The snapshot download, shared by ``GET /$admin/snapshot`` (SAS with Manage) and the console. The
runtime makes the file (runtime/snapshot.py) and hands the management plane a function for it
(``Controls.snapshot``), so this layer needs nothing of the broker's internals."""

from __future__ import annotations

import logging

from .control import Controls
from .errors import AdminError, NotFound
from .http import Response

log = logging.getLogger("sbemulator.admin")


class SnapshotTooLarge(AdminError):
    status = 413
    code = "QuotaExceeded"


def snapshot_response(controls: Controls) -> Response:
    """The snapshot as a JSON attachment named after the namespace and the broker's time."""
    if controls.snapshot is None:
        raise NotFound("This emulator does not export snapshots.")
    try:
        data, filename = controls.snapshot()
    except ValueError as exc:  # the runtime's SnapshotError: above the size limit
        raise SnapshotTooLarge(str(exc)) from None
    log.info("snapshot exported: %s, %d bytes", filename, len(data))
    return Response(200, data, "application/json", [
        ("Content-Disposition", f'attachment; filename="{filename}"'),
        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
