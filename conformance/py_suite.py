"""azure-servicebus's live tests, unchanged, against a fresh sbemulator.

The tests build ``<namespace>.servicebus.windows.net`` and dial it on 5671 (AMQP over TLS) and 443
(HTTPS, WebSockets) with a credential from ``get_credential()``. The runner listens on those ports on
a loopback address of its own (environment.py) and the plugin in pyshim/ resolves the host name to
it; preparers and credentials are mapped onto the emulator's management API and keys. Files run side
by side, a few at a time, each against a fresh emulator of its own, each test bounded by pytest-timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

from .environment import HERE, HOST_SUFFIX, NAMESPACE, RULES, Running
from .results import Outcome

SKIP_DIRS = ("perf_tests",)


def test_files(root: Path) -> list[Path]:
    files = sorted(p for p in (root / "tests").rglob("test_*.py")
                   if not any(part in SKIP_DIRS for part in p.relative_to(root / "tests").parts))
    # Longest first, so the slow files do not finish last.
    return sorted(files, key=lambda p: -p.stat().st_size)


def environment(run: Running, address: str, tests: Path) -> dict[str, str]:
    emu = run.emulator
    host = f"{NAMESPACE}{HOST_SUFFIX}"
    env = {
        "SBCONF_ADDRESS": address, "SBCONF_NAMESPACE": NAMESPACE,
        "SBCONF_KEY_NAME": emu.key_name, "SBCONF_KEY": emu.key,
        "SSL_CERT_FILE": str(run.bundle), "REQUESTS_CA_BUNDLE": str(run.bundle),
        "AZURE_TEST_RUN_LIVE": "true", "AZURE_SKIP_LIVE_RECORDING": "true",
        "PYTHONPATH": os.pathsep.join([str(HERE / "pyshim"), str(tests)]),
        # What the tests' ServiceBusPreparer reads (New-TestResources.ps1's outputs).
        "SERVICEBUS_CONNECTION_STR": run.connection_string(host, emu.key_name, emu.key, False),
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": host,
        "SERVICEBUS_QUEUE_NAME": "testQueue", "SERVICEBUS_SESSION_QUEUE_NAME": "testQueueWithSessions",
        "SERVICEBUS_TOPIC_NAME": "testTopic", "SERVICEBUS_SUBSCRIPTION_NAME": "testSubscription",
        "SERVICEBUS_SAS_POLICY": emu.key_name, "SERVICEBUS_SAS_KEY": emu.key,
        "SERVICEBUS_SESSION_QUEUE_SAS_POLICY": emu.key_name, "SERVICEBUS_SESSION_QUEUE_SAS_KEY": emu.key,
    }
    for variable, (name, key) in RULES.items():
        env[variable], env[f"{variable}_NAME"] = key, name
    return env


def run(root: Path, fresh: Callable[[], AbstractContextManager[Running]], out: Path, jobs: int,
        test_timeout_s: int, file_timeout_s: int, only: Sequence[str] = ()) -> list[Outcome]:
    """Every test file (or ``only`` these, relative to tests/, their earlier results replaced), each
    against an emulator of its own from ``fresh()``: the management tests list, clear and re-create
    the namespace's entities, as a live run's files do one after the other in their namespace, so files
    run side by side must not share one."""
    out.mkdir(parents=True, exist_ok=True)
    files = [root / "tests" / name for name in only] if only else test_files(root)
    stale_files = ([out / (name.replace("/", "__") + ext) for name in only for ext in (".xml", ".log")] if only
                   else [*out.glob("*.xml"), *out.glob("*.log")])  # a report holds one run's files
    for stale in stale_files:
        stale.unlink(missing_ok=True)

    def one(path: Path) -> list[Outcome]:
        rel = path.relative_to(root / "tests").as_posix()
        xml = out / (rel.replace("/", "__") + ".xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sbconf_plugin",
               "-o", "asyncio_mode=auto", f"--timeout={test_timeout_s}", f"--junitxml={xml}",
               "--rootdir", str(root), str(path)]
        started = time.monotonic()
        with fresh() as running:
            env = {**os.environ, **environment(running, running.address, root / "tests")}
            try:
                proc = subprocess.run(cmd, cwd=root / "tests", env=env, capture_output=True, text=True,
                                      timeout=file_timeout_s, check=False)
                log = proc.stdout + proc.stderr
            except subprocess.TimeoutExpired as exc:
                log = f"file timed out after {file_timeout_s} s\n{exc.stdout!r}"
        (out / (rel.replace("/", "__") + ".log")).write_text(log)
        print(f"  {rel}: {time.monotonic() - started:.0f} s", flush=True)
        return parse(xml, rel) if xml.exists() else [Outcome("python", rel, "(file)", "failed", log[-3000:])]

    with ThreadPoolExecutor(jobs) as pool:
        return [o for batch in pool.map(one, files) for o in batch]


def parse(xml: Path, rel: str) -> list[Outcome]:
    results = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        result, detail = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                result, detail = "failed", f"{child.get('message', '')}\n{child.text or ''}"
            elif child.tag == "skipped":
                result, detail = "skipped", child.get("message", "")
        results.append(Outcome("python", rel, name, result, detail[-3000:]))
    return results


def load(out: Path) -> list[Outcome]:
    """The outcomes of the run whose files ``out`` holds (``--report-only``): each file's JUnit XML, or a
    failure of the whole file where only its log is there (it timed out)."""
    results: list[Outcome] = []
    for log in sorted(out.glob("*.log")):
        rel = log.name.removesuffix(".log").replace("__", "/")
        xml = log.with_name(log.name.removesuffix(".log") + ".xml")
        results += parse(xml, rel) if xml.exists() else [
            Outcome("python", rel, "(file)", "failed", log.read_text()[-3000:])]
    return results
