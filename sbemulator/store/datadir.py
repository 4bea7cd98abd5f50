"""The data directory a durable store lives in: who holds it (a PID file beside the database), and the
one-line error that says why it cannot serve and what to do."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .base import store_error

PID_FILE = "sbemulator.pid"  # beside the database: who holds the data directory, for the next one's error


def _write_pid(db_path: Path) -> None:
    try:
        db_path.with_name(PID_FILE).write_text(f"{os.getpid()}\n")
    except OSError:
        pass  # only a hint for another process's error message


class DataDirError(Exception):
    """The data directory cannot serve as the store: one line that says why and what to do."""

    @classmethod
    def of(cls, directory: Path, exc: BaseException) -> DataDirError:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        err = getattr(exc, "errno", None)
        what = f"data directory {directory}"
        if code == _SQLITE_BUSY or "locked" in str(exc):
            holder = _holder(directory)
            return cls(f"{what} is in use by {holder}: use --data-dir or --in-memory")
        if (code == _SQLITE_READONLY or err in (errno.EROFS, errno.EACCES, errno.EPERM) or "readonly" in str(exc)
                or (code == _SQLITE_CANTOPEN and not _writable(directory))):
            return cls(f"{what} is read-only ({exc}): make it writable, or use --data-dir or --in-memory")
        if store_error(exc).full:
            return cls(f"{what} is on a full file system ({exc}): free space there, or use --data-dir or "
                       "--in-memory")
        return cls(f"{what} cannot hold the store ({exc}): use --data-dir or --in-memory")


_SQLITE_BUSY, _SQLITE_READONLY, _SQLITE_CANTOPEN = 5, 8, 14


def _writable(directory: Path) -> bool:
    try:
        return os.access(directory, os.W_OK) and not os.statvfs(directory).f_flag & os.ST_RDONLY
    except OSError:
        return False


def _holder(directory: Path) -> str:
    try:
        pid = int((directory / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return "another process"
    return f"process {pid}"
