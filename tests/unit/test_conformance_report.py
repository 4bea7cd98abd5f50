"""The conformance report (conformance/): kept results render again (``--report-only``), each suite under
the command and time of its own latest run, and a test lands among the not applicable only by a listed
reason. No SDK suite runs here: the results are the files a run leaves (pytest's JUnit XML, its log)."""

from __future__ import annotations

from pathlib import Path

from conformance import py_suite, runs
from conformance.report import render
from conformance.results import Outcome, classify

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test_queues.TestServiceBusQueue" name="test_queue_send[pyamqp]" time="1.0"/>
<testcase classname="test_queues.TestServiceBusQueue" name="test_queue_peek[pyamqp]" time="1.0">
<failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="unittests.test_pyamqp_decode" name="test_pyamqp_copies_are_byte_identical[_decode.py]">
<failure message="could not locate the repo root">trace</failure></testcase>
</testsuite></testsuites>"""


def test_kept_results_render_again_under_their_own_run(tmp_path: Path) -> None:
    out = tmp_path / "python-results"
    out.mkdir()
    (out / "test_queues.py.xml").write_text(JUNIT)
    (out / "test_queues.py.log").write_text("3 tests")
    (out / "test_sessions.py.log").write_text("file timed out after 2400 s")  # no XML: the file as a failure
    run = runs.save(out, "python", "python -m conformance --suite python", 90.0)
    assert runs.load(out) == run
    outcomes = [classify(o) for o in py_suite.load(out)]
    results = {(o.group, o.name): o.result for o in outcomes}
    assert results == {
        ("test_queues.py", "TestServiceBusQueue::test_queue_send[pyamqp]"): "passed",
        ("test_queues.py", "TestServiceBusQueue::test_queue_peek[pyamqp]"): "failed",
        ("test_queues.py", "test_pyamqp_decode::test_pyamqp_copies_are_byte_identical[_decode.py]"): "n/a",
        ("test_sessions.py", "(file)"): "failed",
    }
    page = render(outcomes, [run])
    assert "`python -m conformance --suite python`, finished " in page
    assert "| `test_queues.py` | 1 | 1 | 1 | 0 |" in page
    assert "- `test_queues.py::TestServiceBusQueue::test_queue_peek[pyamqp]`: assert 1 == 2" in page


def test_a_failure_without_a_listed_reason_stays_a_failure() -> None:
    assert classify(Outcome("go", "azservicebus", "TestSender_SendMessages", "failed", "boom")).result == "failed"
    assert classify(Outcome("go", "azservicebus", "TestReceiveWithDifferentWaitTime", "failed")).result == "n/a"
    assert classify(Outcome("go", "azservicebus", "TestReceiveWithDifferentWaitTimeX", "failed")).result == "failed"
    assert classify(Outcome("go", "azservicebus", "TestReceiveWithDifferentWaitTime", "passed")).result == "passed"
    for name in ("test_next_available_session_timeout_value", "test_async_next_available_session_timeout_value"):
        python = Outcome("python", "test_sessions.py", f"TestServiceBusSession::{name}[pyamqp]", "failed")
        assert classify(python).result == "n/a"  # the sync test and its async twin fail for one reason


def test_a_missing_run_record_is_no_run(tmp_path: Path) -> None:
    assert runs.load(tmp_path) is None


def test_the_page_keeps_to_the_docs_line_length(tmp_path: Path) -> None:
    """docs/conformance.md is one of docs/*.md: a long reason or command wraps as a list item does
    (tests/unit/test_doc_line_length.py), and a test id too long for a line keeps a line of its own."""
    from tests.unit.test_doc_line_length import LIMIT, ONE_CODE_SPAN

    long_id = "async_tests/test_queues_async.py::TestServiceBusQueueAsync::" + "test_" + "x" * 80 + "[pyamqp]"
    outcomes = [classify(Outcome("python", "unittests/test_pyamqp_decode.py",
                                 "test_pyamqp_copies_are_byte_identical[_decode.py]", "failed")),
                Outcome("python", long_id, "t", "failed", "because " * 40)]
    run = runs.save(tmp_path, "python", "make conformance, then `python -m conformance --suite python --files "
                    + " ".join(f"test_{n}.py" for n in range(12)) + "`", 45.0)
    page = render(outcomes, [run])
    long_lines = [line for line in page.splitlines()
                  if len(line) > LIMIT and not line.lstrip().startswith("|") and not ONE_CODE_SPAN.match(line)]
    assert long_lines == []
    assert " ".join(outcomes[0].reason.split()) in " ".join(page.split())  # wrapped, nothing lost
    assert any(line.startswith(f"- `{long_id}::t`") for line in page.splitlines())


def test_files_run_again_are_named_once_after_the_runs_own_command() -> None:
    once = runs.with_reruns("make conformance", ["test_tracing.py"])
    assert once == "make conformance, then python -m conformance --suite python --files test_tracing.py"
    twice = runs.with_reruns(once, ["test_topic.py", "test_tracing.py"])
    assert twice == ("make conformance, then python -m conformance --suite python --files test_tracing.py "
                     "test_topic.py")
    assert "`" not in twice  # the report puts the command in one code span
