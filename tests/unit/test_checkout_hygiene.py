"""A clone works on any machine: no tracked file or symbolic link names a path of the machine it was
made on (a link to an absolute path is broken in every other clone)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Home and work folders of Linux, macOS and Windows machines (the work folder spelled in two pieces, so
# this file does not name one itself).
_WORK = "/" + "work/"
MACHINE_PATH = re.compile(r"(?<![\w.])(/home/[a-z_][\w-]*/|/Users/[A-Za-z][\w.-]*/|/root/|" + _WORK
                          + r"|[A-Z]:\\Users\\)")


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture(scope="module")
def tracked() -> list[tuple[str, str]]:
    """(mode, path) of every tracked file; skips outside a git checkout (an unpacked archive)."""
    try:
        listing = _git("ls-files", "-s", "-z")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    rows = []
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        rows.append((meta.split()[0], path))
    return rows


def test_no_tracked_link_points_at_an_absolute_path(tracked: list[tuple[str, str]]) -> None:
    links = [path for mode, path in tracked if mode == "120000"]
    targets = {path: os.readlink(ROOT / path) for path in links if (ROOT / path).is_symlink()}
    assert {path: target for path, target in targets.items() if Path(target).is_absolute()} == {}


def test_no_tracked_file_names_a_machine_path(tracked: list[tuple[str, str]]) -> None:
    found = []
    for mode, path in tracked:
        if mode == "120000" or not (ROOT / path).is_file() or ROOT / path == Path(__file__):  # its own pattern
            continue
        data = (ROOT / path).read_bytes()
        if b"\0" in data[:8000]:  # binary (images)
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE_PATH.search(line):
                found.append(f"{path}:{number}: {line.strip()[:120]}")
    assert found == []
