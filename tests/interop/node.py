"""Run the JavaScript SDK scenarios in tests/interop/js with Node and read the JSON they print.

Each scenario is a small ES module that takes the connection string from SB_CONNECTION_STRING, does
one end-to-end job with @azure/service-bus and prints a single JSON line. Keeping the scenarios in
real .mjs files (not strings in Python) means they can be run and debugged by hand with `node`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "js"
NODE = shutil.which("node")
JS_SDK = REPO_ROOT / "node_modules" / "@azure" / "service-bus" / "package.json"

# Skip (not fail) only when the JavaScript toolchain itself is absent; CI installs both.
requires_js_sdk = [
    pytest.mark.interop,
    pytest.mark.skipif(NODE is None, reason="node is not on PATH (interop tests need Node.js 18+)"),
    pytest.mark.skipif(
        not JS_SDK.exists(),
        reason="node_modules/@azure/service-bus is missing: run `npm ci` in the repository root",
    ),
]


class ScenarioFailed(AssertionError):
    """A scenario exited non-zero: its stderr carries the JS error (name, message, code, stack)."""


def run_js(script: str, connection_string: str, *args: str, timeout: float = 60.0,
           extra_env: dict[str, str] | None = None) -> Any:
    """Run tests/interop/js/<script> and return the JSON it printed on its last stdout line."""
    env = {**os.environ, "SB_CONNECTION_STRING": connection_string, **(extra_env or {})}
    proc = subprocess.run(
        [NODE or "node", str(SCRIPTS / script), *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode != 0:
        raise ScenarioFailed(f"{script} exited {proc.returncode}\n--- stderr ---\n{proc.stderr[-4000:]}"
                             f"\n--- stdout ---\n{proc.stdout[-2000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise ScenarioFailed(f"{script} printed nothing\n--- stderr ---\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])
