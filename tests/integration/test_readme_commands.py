"""The README's commands, run as written (with the emulator's own port and CA path put in): a new user
has nothing else to go by. The README's test snippet has its own test (test_readme_snippet.py), its CLI
options theirs (test_errors_that_help.py), devhost's example settings theirs
(test_devhost_local_settings.py) and the sample project its (test_package.py)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from sbemulator import Emulator
from tests.fixtures.process import REPO_ROOT


def readme_command(starting: str, containing: str = "") -> list[str]:
    """The README's shell command that starts with ``starting`` (and has ``containing``), its
    continuation lines joined."""
    text = (REPO_ROOT / "README.md").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)
    [line] = [line.strip() for line in joined.splitlines()
              if line.strip().startswith(starting) and containing in line]
    return shlex.split(line.split("#")[0])


def test_the_readme_provision_command_runs_against_the_emulator_as_written() -> None:
    """README, "Run against the emulator": infra/provision.py over the emulator's ARM surface with the
    SAS bearer credential (the same code path as against Azure)."""
    command = readme_command(".venv/bin/python infra/provision.py", "--base-url")
    with Emulator(config=str(REPO_ROOT / "infra" / "servicebus.json"), in_memory=True) as emu:
        assert emu.admin_url is not None and emu.ca_path is not None
        given = {".venv/bin/python": sys.executable, "https://127.0.0.1:5300": emu.admin_url.rstrip("/"),
                 ".sbemulator/tls/ca.pem": str(emu.ca_path)}
        result = subprocess.run([given.get(arg, arg) for arg in command], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "applied" in result.stdout and "messages/highPriority" in result.stdout, result.stdout


def test_the_readme_dry_run_provision_command_runs_as_written() -> None:
    """README, "Deploy to Azure": provision.py --dry-run with the example values prints the planned PUTs
    (no Azure needed); it runs with the venv's Python, which has the Azure SDK."""
    command = readme_command(".venv/bin/python infra/provision.py", "--dry-run")
    assert "--dry-run" in command
    result = subprocess.run([sys.executable if arg == ".venv/bin/python" else arg for arg in command], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PUT /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/" in result.stdout


def test_the_readme_python_snippet_runs_as_written() -> None:
    """README, "Run against the emulator": the in-process Emulator snippet, its imports included."""
    text = (REPO_ROOT / "README.md").read_text()
    [snippet] = [block for block in re.findall(r"```python\n(.*?)```", text, re.S)
                 if "from sbemulator import Emulator" in block]
    snippet += "    with client:\n        found.append(client.get_queue_sender('leveling'))\n"
    found: list = []
    exec(compile(snippet, "README.md", "exec"), {"found": found, "__name__": "readme"})
    assert len(found) == 1
