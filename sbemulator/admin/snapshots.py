"""The snapshot download, shared by ``GET /$admin/snapshot`` (SAS with Manage) and the console."""

from __future__ import annotations

import logging

from sbemulator.snapshot import SnapshotError, dump_snapshot, export_snapshot

from .backend import Namespace
from .errors import AdminError
from .http import Response

log = logging.getLogger("sbemulator.admin")


class SnapshotTooLarge(AdminError):
    status = 413
    code = "QuotaExceeded"


def snapshot_response(ns: Namespace) -> Response:
    """The snapshot as a JSON attachment named after the namespace and the broker's time."""
    try:
        snapshot = export_snapshot(ns.broker, ns.name)
        data = dump_snapshot(snapshot)
    except SnapshotError as exc:
        raise SnapshotTooLarge(str(exc)) from None
    stamp = (snapshot["exportedAtUtc"] or "").replace(":", "").replace("-", "").split(".")[0]
    log.info("snapshot of %s exported: %d entities, %d messages, %d bytes", ns.name, len(snapshot["entities"]),
             len(snapshot["messages"]), len(data))
    return Response(200, data, "application/json", [
        ("Content-Disposition", f'attachment; filename="{ns.name}-{stamp}.snapshot.json"'),
        ("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")])
