"""Errors of the management surface, carrying the HTTP status Service Bus answers with.

The Atom API renders them as ``<Error><Code>status</Code><Detail>...</Detail></Error>`` (what
``azure.servicebus.management`` reads into ``HttpResponseError.message``); the ARM API as
``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations


class AdminError(Exception):
    status = 400
    code = "BadRequest"

    def __init__(self, detail: str, status: int | None = None, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status
        if code is not None:
            self.code = code


class BadRequest(AdminError):
    status, code = 400, "BadRequest"


class Unauthorized(AdminError):
    status, code = 401, "Unauthorized"


class NotFound(AdminError):
    status, code = 404, "NotFound"


class Conflict(AdminError):
    status, code = 409, "Conflict"


class MethodNotAllowed(AdminError):
    status, code = 405, "MethodNotAllowed"
