"""``pip install ./sbemulator`` (README, "Use sbemulator in your own tests") leaves the checkout as it
was: the package's build backend builds on a copy (sbemulator/_backend/out_of_tree.py), so no
``build/`` or ``*.egg-info`` appears next to the sources. Building the wheel is what an install does
first; this builds it from the checkout itself with the same backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _untracked() -> set[str]:
    """Untracked and ignored entries under sbemulator/ (an editable install's egg-info may be there)."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "sbemulator"],
                         cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout
    return {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!") and "__pycache__" not in line}


def test_building_the_package_from_the_checkout_leaves_no_build_output(tmp_path: Path) -> None:
    before = _untracked()
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                             "-w", str(tmp_path), "./sbemulator"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [wheel] = tmp_path.glob("sbemulator-*.whl")
    assert wheel.stat().st_size > 0
    assert _untracked() - before == set()
    assert not (ROOT / "sbemulator" / "build").exists()
