"""The README's commands in a fresh clone: only the tracked files, none of a working copy's own
(.sbemulator/, local.settings.json, out/, build output). A command that works here only because of
something a developer's checkout happens to hold fails. The Python is the test run's (a fresh clone's
``make`` builds the same venv); the provisioning script runs from the clone, against an emulator whose
data directory is the clone's ``.sbemulator/``, so the README's relative CA path is used as written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sbemulator.runtime.launcher import start_emulator_process
from tests.fixtures.process import REPO_ROOT

from .test_readme_commands import readme_command

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files of this checkout (as they are now, committed or not) in a folder of their own."""
    target = tmp_path_factory.mktemp("clone") / "repo"
    listing = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=REPO_ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode()
    for name in filter(None, listing.split("\0")):
        source, copy = REPO_ROOT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working copy, not yet committed
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), copy)
        else:
            shutil.copy2(source, copy)
    return target


def test_the_clone_has_no_broken_link(clone: Path) -> None:
    broken = [str(path.relative_to(clone)) for path in clone.rglob("*") if path.is_symlink() and not path.exists()]
    assert broken == []


def test_the_readme_provision_commands_run_in_a_fresh_clone(clone: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(clone))  # the clone's own sources, not this checkout's
    dry = readme_command(".venv/bin/python infra/provision.py", "--dry-run")
    result = subprocess.run([sys.executable if arg == ".venv/bin/python" else arg for arg in dry], cwd=clone,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    emulator = start_emulator_process("--config", str(clone / "infra" / "servicebus.json"), "--data-dir",
                                      str(clone / ".sbemulator"), cwd=clone)
    try:
        command = readme_command(".venv/bin/python infra/provision.py", "--base-url")
        assert emulator.admin_url is not None
        given = {".venv/bin/python": sys.executable, "https://127.0.0.1:5300": emulator.admin_url}
        result = subprocess.run([given.get(arg, arg) for arg in command], cwd=clone, env=env, capture_output=True,
                                text=True, timeout=120)  # --ca-cert .sbemulator/tls/ca.pem, as written
    finally:
        emulator.terminate()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "applied" in result.stdout
