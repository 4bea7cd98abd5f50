"""The official Go SDK (azservicebus + admin) against sbemulator: the suite in tests/interop/go.

One emulator with the suite's topology, one `go test` run over all Go tests (building the test binary
is the expensive part, so it is done once); this test passes when every Go test passed, and its
report lists each failing Go test with its output. The counts show in pytest's summary
("sdk suites" section, from the ``sdk_suite`` user property).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sbemulator import Emulator
from tests.interop.go_sdk import TOPOLOGY, requires_go, run_go_suite

# The run takes about a minute on an idle machine (go test builds the test binary, then 22 tests);
# under a loaded `make test` it needs more than the suite-wide 120 s, and run_go_suite bounds it at 420 s.
pytestmark = [*requires_go, pytest.mark.slow, pytest.mark.timeout(480)]


def test_go_sdk_suite(record_property: Callable[[str, object], None]) -> None:
    with Emulator(config=str(TOPOLOGY), in_memory=True) as emu:
        run = run_go_suite(emu)
    record_property("sdk_suite", f"Go SDK suite: {run.summary()}")
    assert run.outcomes, f"go test ran no test (exit {run.returncode}):\n{run.failures()}"
    assert run.returncode == 0 and run.count("fail") == 0, f"{run.summary()}\n{run.failures()}"
    assert run.count("skip") == 0, f"Go tests skipped: {[n for n, r in run.outcomes.items() if r == 'skip']}"
