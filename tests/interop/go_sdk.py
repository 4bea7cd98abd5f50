"""Run the Go SDK suite in tests/interop/go against a real sbemulator and read its results.

The suite is an ordinary Go module (`go test`), so it can be run and debugged by hand; this module
starts an emulator with the suite's own topology (tests/interop/go/topology.json) on free ports, hands
the connection strings and the management endpoint's CA to `go test -json` through the environment, and
turns the JSON event stream into per-test outcomes. `go` downloads the modules named in go.sum on the
first run (into the module cache, reused afterwards); `make test` does that before the tests start.

By hand: `python -m tests.interop.go_sdk [-run Regexp] [-v]` prints go test's own output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sbemulator import Emulator

GO_SUITE = Path(__file__).resolve().parent / "go"
TOPOLOGY = GO_SUITE / "topology.json"
GO = shutil.which("go")

# Skip only when the Go toolchain is absent on a developer's machine; under CI (CI=true) a missing
# toolchain fails the test instead, so a green CI run always ran the Go suite.
requires_go = [
    pytest.mark.interop,
    pytest.mark.skipif(GO is None and os.environ.get("CI") != "true",
                       reason="go is not on PATH (the Go interop suite needs Go 1.26+)"),
]


@dataclass
class GoRun:
    """What one `go test -json` run reported: outcome and output per test, and the whole stream."""

    returncode: int
    outcomes: dict[str, str] = field(default_factory=dict)
    output: dict[str, list[str]] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for name, result in self.outcomes.items() if result == outcome and "/" not in name)

    def summary(self) -> str:
        return f"{self.count('pass')} passed, {self.count('fail')} failed, {self.count('skip')} skipped"

    def failures(self) -> str:
        parts = []
        for name, result in self.outcomes.items():
            if result == "fail":
                parts.append(f"--- {name}\n" + "".join(self.output.get(name, []))[-4000:])
        if self.returncode != 0 and not parts:
            parts.append("".join(self.stray)[-4000:])
        return "\n".join(parts)


def suite_env(emu: Emulator) -> dict[str, str]:
    """The environment the Go suite reads its emulator from (see tests/interop/go/helpers_test.go); the
    same variables as the Java suite's."""
    assert emu.admin_url is not None and emu.ca_path is not None
    return {
        "SB_CONNECTION_STRING": emu.connection_string,
        "SB_ADMIN_URL": emu.admin_url,
        "SB_CA_PATH": emu.ca_path,
    }


def go_env(extra: dict[str, str]) -> dict[str, str]:
    # -mod=readonly: go.mod and go.sum are committed; a test run must not rewrite them.
    flags = f"{os.environ.get('GOFLAGS', '')} -mod=readonly".strip()
    return {**os.environ, "GOFLAGS": flags, **extra}


def run_go_suite(emu: Emulator, *args: str, timeout: float = 420.0) -> GoRun:
    """`go test -json` over the whole suite; `-timeout` inside is shorter than ours, so Go reports a
    hung test (with every goroutine's stack) before this process gives up on it."""
    cmd = [GO or "go", "test", "-json", "-count=1", f"-timeout={int(timeout) - 60}s", *args, "./..."]
    proc = subprocess.run(cmd, cwd=GO_SUITE, env=go_env(suite_env(emu)), capture_output=True, text=True,
                          timeout=timeout, check=False)
    run = GoRun(returncode=proc.returncode)
    for line in proc.stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            run.stray.append(line + "\n")
            continue
        name = event.get("Test")
        action = event.get("Action")
        if name is None:
            if action == "output":
                run.stray.append(event.get("Output", ""))
            continue
        if action == "output":
            run.output.setdefault(name, []).append(event.get("Output", ""))
        elif action in ("pass", "fail", "skip"):
            run.outcomes[name] = action
    run.stray.append(proc.stderr)
    return run


def main(argv: list[str]) -> int:
    """Start an emulator with the suite's topology and run `go test -v` in the foreground."""
    with Emulator(config=str(TOPOLOGY), in_memory=True) as emu:
        env = suite_env(emu)
        for key, value in env.items():
            print(f"{key}={value}", flush=True)
        cmd = [GO or "go", "test", "-count=1", "-timeout=360s", *(argv or ["-v"]), "./..."]
        return subprocess.call(cmd, cwd=GO_SUITE, env=go_env(env))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
