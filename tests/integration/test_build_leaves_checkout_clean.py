"""``pip install ./sbemulator`` (README, "Use sbemulator in your own tests") leaves the checkout as it
was: the package's build backend runs setuptools on a copy (sbemulator/_backend/out_of_tree.py), so no
``build/`` or ``*.egg-info`` appears or changes next to the sources. The install is the README's
command as a user runs it (an isolated build, which first asks the backend what the build requires:
setuptools answers that by writing an egg-info), into a venv of the test's own; ``--no-deps`` only
spares it the dependencies' download. A checkout with an editable install already holds an egg-info
(git-ignored), so what is compared is every file that is not tracked, with its modification time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _untracked() -> dict[str, int]:
    """Untracked and ignored files under sbemulator/ (outside __pycache__), with their modification times."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "sbemulator"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout
    found = {}
    for line in out.splitlines():
        if line[:2] not in ("??", "!!") or "__pycache__" in line:
            continue
        entry = ROOT / line[3:]
        paths = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        for path in paths:
            found[str(path.relative_to(ROOT))] = path.stat().st_mtime_ns
    return found


def test_pip_install_of_the_package_folder_leaves_the_checkout_as_it_was(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    before = _untracked()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_NO_BUILD_ISOLATION")}
    result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
                             "--disable-pip-version-check", "./sbemulator"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    after = _untracked()
    assert {path: when for path, when in after.items() if before.get(path) != when} == {}
    assert not (ROOT / "sbemulator" / "build").exists()
