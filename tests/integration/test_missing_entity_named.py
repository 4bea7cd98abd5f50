"""An entity missing from the topology, the commonest mistake, is named: in the emulator's log (one line,
entity and key name, at the default level) and in the failed test's report under the pytest plugin
(entity and topology file), though the Python SDK raises ServiceBusAuthenticationError ('amqp:client-
error') and keeps the put-token's 404 "could not be found" only in its inner exception. Service Bus
answers a put-token for an entity that does not exist with 404 (the SDK's TokenAuthFailure carries
that status); a namespace-wide token then reaches the attach, which Service Bus refuses with
amqp:not-found.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import ServiceBusError

from sbemulator import Emulator
from sbemulator.amqp.performatives import ROLE_RECEIVER, Attach, Begin, Detach, Source, Target
from sbemulator.amqp.types import UInt
from sbemulator.missing_entity import missing_entity
from tests.fixtures.emulator import queue, topology

from .test_malformed_input import RawClient


def test_a_put_token_for_a_missing_entity_logs_the_entity_and_the_key_name(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sbemulator")
    with Emulator(config=topology(queues=[queue("orders")]), in_memory=True) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
            with pytest.raises(ServiceBusError) as raised:
                with client.get_queue_sender("ordres") as sender:
                    sender.send_messages(ServiceBusMessage("x"))
    assert missing_entity(raised.value) == "ordres"  # the 404 is in the SDK's exception chain
    lines = [r.getMessage() for r in caplog.records if "ordres" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "RootManageSharedAccessKey" in lines[0] and "does not exist" in lines[0]


def test_an_attach_for_a_missing_entity_logs_the_entity_and_the_key_name(
        caplog: pytest.LogCaptureFixture) -> None:
    """A client authenticated for the whole namespace (SASL PLAIN with a key, as the JMS and .NET
    clients may) sends no put-token per entity: the attach is where the missing entity shows.
    Raw frames: no SDK skips the put-token."""
    caplog.set_level(logging.WARNING, logger="sbemulator")
    with Emulator(config=topology(queues=[queue("orders")]), in_memory=True) as emu:
        with RawClient(emu.port) as raw:
            raw.open("PLAIN", b"\x00" + emu.key_name.encode() + b"\x00" + emu.key.encode())
            raw.frame(Begin(None, UInt(0), UInt(5000), UInt(5000)))
            assert isinstance(raw.read_frame().body, Begin)
            raw.frame(Attach("r", UInt(0), ROLE_RECEIVER, UInt(0), UInt(1), Source("ordres"), Target("client")))
            frames = [raw.read_frame().body for _ in range(2)]  # the attach, then its detach with the error
    [detach] = [frame for frame in frames if isinstance(frame, Detach)]
    assert detach.error is not None and str(detach.error.condition) == "amqp:not-found"
    lines = [r.getMessage() for r in caplog.records if "ordres" in r.getMessage()]
    assert len(lines) == 1 and "attach refused" in lines[0] and "'RootManageSharedAccessKey'" in lines[0], lines


def test_the_plugin_names_the_missing_entity_and_the_topology_file(tmp_path: Path) -> None:
    (tmp_path / "Config.json").write_text(json.dumps(topology(queues=[queue("orders")])))
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nsbemulator_config = "Config.json"\n')
    (tmp_path / "test_typo.py").write_text(textwrap.dedent("""
        from azure.servicebus import ServiceBusClient, ServiceBusMessage


        def test_send(servicebus_emulator):
            with ServiceBusClient.from_connection_string(servicebus_emulator.connection_string,
                                                         retry_total=0) as client:
                with client.get_queue_sender("ordres") as sender:
                    sender.send_messages(ServiceBusMessage("x"))
    """))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "the entity 'ordres' does not exist" in output, output[-3000:]
    assert str((tmp_path / "Config.json").resolve()) in output
