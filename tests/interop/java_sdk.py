"""Run the Java SDK suite in tests/interop/java with Maven and read Surefire's reports.

The suite is a Maven project (azure-messaging-servicebus with JUnit 5) that takes the emulator's
connection string, admin URL and CA certificate from the environment, so it can be run by hand against
any emulator. One ``mvn test`` runs every class in one JVM; the first run on a machine downloads the
dependencies into ``~/.m2``, later runs resolve them from there (``--offline`` once a build succeeded,
so a run does not ask the remote repository for metadata again).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent / "java"
MVN = shutil.which("mvn")
JAVA = shutil.which("java")
# Written after a build that resolved everything: later runs need no network (Maven's own marker is
# per artifact and does not say "all of them").
RESOLVED_MARKER = PROJECT / "target" / ".resolved"

requires_java_sdk = [
    pytest.mark.interop,
    # Skipped only off CI: on CI (CI=true) a missing JDK or Maven fails the run instead.
    pytest.mark.skipif((MVN is None or JAVA is None) and not os.environ.get("CI"),
                       reason="mvn and a JDK (17+) are needed for the Java SDK suite"),
]


@dataclass
class SurefireResult:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)  # "Class.method: message" for each failure or error
    passed_names: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    def summary(self) -> str:
        return (f"Java SDK suite: {self.passed} passed, {self.failures + self.errors} failed, "
                f"{self.skipped} skipped")


def read_reports(reports: Path) -> SurefireResult:
    result = SurefireResult()
    for path in sorted(reports.glob("TEST-*.xml")):
        suite = ET.parse(path).getroot()
        for case in suite.iter("testcase"):
            name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
            result.tests += 1
            failure = case.find("failure")
            error = case.find("error")
            if case.find("skipped") is not None:
                result.skipped += 1
            elif failure is not None or error is not None:
                node = failure if failure is not None else error
                assert node is not None
                if failure is not None:
                    result.failures += 1
                else:
                    result.errors += 1
                text = (node.get("message") or "") + "\n" + (node.text or "")[:3000]
                result.problems.append(f"{name}: {text.strip()}")
            else:
                result.passed_names.append(name)
    return result


def _mvn(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=PROJECT, env={**os.environ, **env}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def run_maven(env: dict[str, str], *, timeout: float, tests: str | None = None) -> tuple[SurefireResult, str]:
    """``mvn -B test`` in tests/interop/java with ``env`` added; Surefire's counts and Maven's output tail."""
    reports = PROJECT / "target" / "surefire-reports"
    if reports.exists():
        shutil.rmtree(reports)
    command = [MVN or "mvn", "-B", "-q", "test", "-Dsurefire.printSummary=true", "-DtrimStackTrace=true"]
    if tests:
        command.append(f"-Dtest={tests}")
    started = time.monotonic()
    offline = RESOLVED_MARKER.exists()
    proc = _mvn([*command, "--offline"] if offline else command, env, timeout)
    if offline and not reports.exists():
        # Nothing ran offline: the local repository lost what an earlier run resolved. Resolve again.
        RESOLVED_MARKER.unlink(missing_ok=True)
        proc = _mvn(command, env, max(60.0, timeout - (time.monotonic() - started)))
    output = (proc.stdout + proc.stderr)[-6000:]
    result = read_reports(reports)
    if result.tests and not RESOLVED_MARKER.exists():
        RESOLVED_MARKER.touch()
    if result.tests == 0:
        raise AssertionError(f"mvn test ran no test (exit {proc.returncode}):\n{output}")
    return result, output
