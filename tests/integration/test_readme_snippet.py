"""README, "Use sbemulator in your own tests": the three files it shows (Config.json, pyproject.toml,
test_orders.py), copied as written into an empty folder and run with plain ``pytest`` there, nothing
added around them. If the README's example stops working as copied, this fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_blocks() -> dict[str, str]:
    """The section's code blocks by language (one each of json, toml and python)."""
    text = README.read_text()
    section = text.split("## Use sbemulator in your own tests", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, list[str]] = {}
    for language, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        blocks.setdefault(language, []).append(body)
    assert {language: len(bodies) for language, bodies in blocks.items() if language != "bash"} == {
        "json": 1, "toml": 1, "python": 1}, blocks.keys()
    return {language: bodies[0] for language, bodies in blocks.items()}


def test_the_readme_example_project_runs_as_written(tmp_path: Path) -> None:
    blocks = readme_blocks()
    (tmp_path / "Config.json").write_text(blocks["json"])
    (tmp_path / "pyproject.toml").write_text(blocks["toml"])
    (tmp_path / "test_orders.py").write_text(blocks["python"])
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "2 passed" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]
