"""Every code block of README.md is run by a test, or says why it cannot be run here.

The README is what a new user goes by, so each of its commands and snippets is either run as written
(here, or by the test named for it below) or listed as not runnable on a machine without an Azure
subscription or the Functions host, with the reason. A command added to the README without a test
fails :func:`test_every_readme_command_is_run_by_a_test_or_says_why_not`.

Run here: ``make emulator ARGS="..."`` as a user types it (its ``--port 5673`` moved to a free port,
``--port 0``, so parallel runs never collide), with its ready line, ``/health`` over plain HTTP on the
management port and a clean exit on Ctrl-C, as the README promises; and Azurite started with the
Core Tools section's flags (the ports moved to free ones, the data folder to the test's own).
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures.process import REPO_ROOT

pytestmark = pytest.mark.timeout(180)

README = REPO_ROOT / "README.md"

#: Each README command (its words up to the first option that varies), and where it is run.
RUN_BY = {
    "make test": "not run by a test: it is the whole suite (tests/README.md)",
    "make demo DEMO_ARGS=": "tests/integration/test_devhost_demo.py (python -m devhost.demo, shortened)",
    "make demo": "tests/integration/test_devhost_demo.py (python -m devhost.demo, shortened)",
    "make emulator ARGS=": "here: test_make_emulator_with_args_runs_as_written",
    "make emulator": "here: test_make_emulator_with_args_runs_as_written (the default ports are the machine's)",
    "make .venv/.installed node_modules/.installed": "every test run: the venv and Azurite it installs run the suite",
    ".venv/bin/python infra/provision.py --subscription-id 00000000-0000-0000-0000-000000000000 "
    "--resource-group local": "tests/integration/test_readme_commands.py, test_readme_fresh_clone.py",
    ".venv/bin/python infra/provision.py --subscription-id 00000000-0000-0000-0000-000000000000 "
    "--resource-group rg-pipeline-dev": "tests/integration/test_readme_commands.py, test_readme_fresh_clone.py",
    "pip install ./sbemulator azure-servicebus pytest": "tests/integration/test_package.py (a fresh venv), "
    "tests/integration/test_build_leaves_checkout_clean.py (the checkout stays clean)",
    "cp local.settings.json.example local.settings.json": "tests/integration/test_devhost_local_settings.py",
    ".venv/bin/python -m sbemulator --config infra/servicebus.json": "tests/integration/test_cli.py "
    "(ready line, SIGTERM)",
    "npx azurite --silent --disableTelemetry --location .azurite --skipApiVersionCheck": "here: "
    "test_the_core_tools_azurite_command_starts_azurite",
    "func start": "not runnable here: Core Tools' installer downloads the Functions host (README says so)",
    ".venv/bin/python -m devhost --settings local.settings.json": "tests/integration/test_devhost_local_settings.py, "
    "test_devhost_beside_emulator.py (beside a user-started emulator)",
    "azd ": "not runnable here: no Azure subscription (README, Deploy to Azure, says so); "
    "the Bicep is checked offline by tests/unit/test_infra_bicep.py",
    "az functionapp list-flexconsumption-locations": "not runnable here: no Azure subscription",
}

#: Non-shell blocks and where they are run.
SNIPPETS_RUN_BY = {
    "mermaid": "a diagram, not run",
    "kusto": "not runnable here: an Application Insights query (no Azure subscription)",
    "json": "tests/integration/test_readme_snippet.py (the own-tests project's Config.json)",
    "toml": "tests/integration/test_readme_snippet.py",
    "python": "tests/integration/test_readme_commands.py (the Emulator snippet), test_readme_snippet.py",
    "": "the connection string and the repository layout: text, not commands",
}


def readme_blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced block in the README."""
    return re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(), re.S | re.M)


def readme_commands() -> list[str]:
    """Every command of the README's bash blocks: continuation lines joined, comments and ``&`` dropped."""
    commands = []
    for language, body in readme_blocks():
        if language != "bash":
            continue
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            command = " ".join(line.split(" #")[0].strip().removesuffix("&").split())
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def where_run(command: str) -> str | None:
    matches = [key for key in RUN_BY if command == key or command.startswith(key)]
    return RUN_BY[max(matches, key=len)] if matches else None


def test_every_readme_command_is_run_by_a_test_or_says_why_not() -> None:
    commands = readme_commands()
    assert len(commands) >= 10, commands  # the parser found the blocks
    assert [command for command in commands if where_run(command) is None] == []


def test_every_readme_block_of_another_language_is_accounted_for() -> None:
    assert sorted({language for language, _ in readme_blocks()} - {"bash"} - set(SNIPPETS_RUN_BY)) == []


def test_the_tests_named_for_readme_commands_exist() -> None:
    named = set(re.findall(r"tests/[\w/]+\.py", " ".join([*RUN_BY.values(), *SNIPPETS_RUN_BY.values()])))
    assert named and [name for name in named if not (REPO_ROOT / name).is_file()] == []


#: Files the README names that a command writes, and which command.
WRITTEN_BY = {"out/demo/demo.png": "make demo", "docs/conformance.md": "make conformance"}


def test_every_path_the_readme_names_exists_or_is_written_by_a_command_it_names() -> None:
    text = README.read_text()
    named = set(re.findall(r"(?<![\w/.])((?:docs|tests|infra|shared|devhost|sbemulator|functions|consumers|bench|sender"
                           r"|out)/[\w./*-]*[\w*])", text))
    assert len(named) >= 10, named
    missing = [name for name in sorted(named) if not any(REPO_ROOT.glob(name)) and name not in WRITTEN_BY]
    assert missing == []
    for name, command in WRITTEN_BY.items():
        assert name in named and command in text, (name, command)


def _stop_group(process: subprocess.Popen[str], sig: int) -> int | None:
    """Send ``sig`` to the command's process group (as a terminal's Ctrl-C does); its exit code, or None."""
    try:
        os.killpg(process.pid, sig)
        return process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)
        return None
    except ProcessLookupError:
        return process.wait(timeout=20)


def _lines_until(process: subprocess.Popen[str], wanted: str, timeout: float) -> list[str]:
    """The command's output lines up to the first holding ``wanted`` (bounded by ``timeout``); a thread
    reads them, so a command that prints nothing cannot hold the test past it."""
    assert process.stdout is not None
    stream = process.stdout
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if wanted in line:
            return seen
    raise AssertionError(f"no line with {wanted!r} within {timeout} s:\n" + "\n".join(seen))


def test_make_emulator_with_args_runs_as_written(tmp_path: Path) -> None:
    """README, "Run against the emulator": ``make emulator ARGS="--port 5673 --in-memory"`` prints a line
    with ``ready`` and the connection string, serves ``/health`` over plain HTTP on the management port
    it prints (as the official emulator does on 5300) and exits cleanly on Ctrl-C."""
    [command] = [c for c in readme_commands() if c.startswith("make emulator ARGS=")]
    args = [arg.replace("--port 5673", "--port 0") for arg in shlex.split(command)]
    # the Python this test runs on (make's own venv under `make test`), never rebuilt from within a test
    args[1:1] = ["-o", ".venv/.installed", f"BIN={Path(sys.executable).parent}"]
    process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True, env=dict(os.environ, SBEMULATOR_RUN_DIR=str(tmp_path)))
    try:
        lines = _lines_until(process, "admin on", 60)
        [ready] = [line for line in lines if " ready " in f" {line} "]
        assert "Endpoint=sb://127.0.0.1:" in ready and "UseDevelopmentEmulator=true;" in ready, ready
        [admin] = [line for line in lines if "admin on" in line]
        port = int(re.search(r"https://127\.0\.0\.1:(\d+)", admin).group(1))  # type: ignore[union-attr]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert response.status == 200
            assert b'"status": "ok"' in response.read()
    finally:
        code = _stop_group(process, signal.SIGINT)
    assert code is not None, "make emulator did not stop on Ctrl-C"


def test_the_core_tools_azurite_command_starts_azurite(tmp_path: Path) -> None:
    """README, "Run the Functions locally", with Core Tools: the Azurite command's options are ones Azurite
    takes (its ports moved to free ones, its data folder into the test's own)."""
    [command] = [c for c in readme_commands() if c.startswith("npx azurite")]
    args = shlex.split(command)
    args[args.index("--location") + 1] = str(tmp_path / ".azurite")
    args += ["--blobPort", "0", "--queuePort", "0", "--tablePort", "0", "--blobHost", "127.0.0.1",
             "--queueHost", "127.0.0.1", "--tableHost", "127.0.0.1"]
    args.remove("--silent")  # so it prints where it listens
    process = subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        lines = _lines_until(process, "Table service is successfully listening", 60)
    finally:
        _stop_group(process, signal.SIGTERM)
    assert any("Blob service is successfully listening" in line for line in lines), lines
