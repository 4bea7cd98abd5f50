"""Snapshots over HTTPS, shared by ``/$admin/snapshot`` (SAS with Manage) and the console: ``GET``
downloads the namespace as a file, ``POST`` (the file as the body) replaces the namespace with it. The
runtime makes and reads the file (runtime/snapshot.py) and hands the management plane functions for
both (``Controls.snapshot``, ``Controls.import_snapshot``), so this layer needs nothing of the broker's
internals."""

from __future__ import annotations

import json
import logging

from .control import Controls
from .errors import AdminError, BadRequest, NotFound
from .http import Request, Response

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


def import_response(controls: Controls, request: Request) -> Response:
    """Replace the namespace with the snapshot in the request's body: 200 with what was imported, or
    400 naming what is wrong with the file (nothing changed then)."""
    if controls.import_snapshot is None:
        raise NotFound("This emulator does not import snapshots.")
    try:
        result = controls.import_snapshot(bytes(request.body))
    except ValueError as exc:  # the runtime's SnapshotError: what is wrong, and where
        raise BadRequest(str(exc)) from None
    log.info("snapshot imported: %s", result)
    return Response(200, json.dumps({"imported": result}).encode(), "application/json; charset=utf-8")
