"""The README's "Use sbemulator in your own tests" snippet (a clock you move and a fault you inject),
run as written: the code block is read from README.md and run by pytest with the sbemulator plugin
(``--sbemulator-clock manual``), with only what its comment names supplied around it (``sender``: a
ServiceBusSender on "orders") and its two imports. If the README's snippet stops working, this fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.fixtures.emulator import queue, topology

README = Path(__file__).resolve().parents[2] / "README.md"

CONFTEST = textwrap.dedent("""
    import pytest
    from azure.servicebus import ServiceBusClient


    @pytest.fixture
    def sender(servicebus_emulator):
        # the SDK's retry policy with a short backoff (the snippet tests that it rides out ServerBusy)
        with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string, retry_total=3,
                                                     retry_backoff_factor=0.01) as client:
            with client.get_queue_sender("orders") as sender:
                yield sender
""")


def readme_snippet() -> str:
    text = README.read_text()
    section = text.split("## Use sbemulator in your own tests", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    [snippet] = [b for b in blocks if ".advance(" in b and ".inject(" in b]
    return snippet


def test_the_readme_snippet_runs_as_written(tmp_path: Path) -> None:
    snippet = readme_snippet()
    assert len([line for line in snippet.splitlines() if line.strip()]) <= 5  # a five-line test
    (tmp_path / "Config.json").write_text(json.dumps(topology(queues=[queue("orders")])))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_readme.py").write_text(
        "from datetime import timedelta\nfrom azure.servicebus import ServiceBusMessage\n\n\n" + snippet)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--sbemulator-config", "Config.json", "--sbemulator-clock", "manual", "test_readme.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 passed" in result.stdout, result.stdout + result.stderr
