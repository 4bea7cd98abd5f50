"""One composition root (sbemulator/runtime/composition.py): the command line and ``Emulator`` fill the
same typed ``NamespaceOptions`` and build every namespace with it, so an option means the same on both
paths and a namespace built by one is the namespace built by the other.

The behaviours asserted are documented ones: the README's option table and docs/emulator.md ("Running
it", "Several namespaces"); the key test follows "Service Bus authentication and authorization with
Shared Access Signatures" (a connection string signs its tokens with the rule's key).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from pathlib import Path

from azure.servicebus import ServiceBusClient, ServiceBusMessage

from sbemulator import Emulator
from sbemulator.config import NamespaceConfig
from sbemulator.gateway.limits import Limits
from sbemulator.runtime.cli import options_from, parse_args
from sbemulator.runtime.composition import AdminOptions, ListenError, NamespaceOptions, WebSocketOptions
from sbemulator.runtime.namespace_group import NamespaceGroup

ROOT_KEY_IN_FILE = {"UserConfig": {"Namespaces": [
    {"Name": "keyed-ns", "Queues": [{"Name": "work", "Properties": {}}],
     "SasKeys": [{"KeyName": "RootManageSharedAccessKey", "Key": "from-the-file"}]},
]}}


def test_the_command_line_and_emulator_fill_the_same_options(tmp_path: Path) -> None:
    """The flags of a durable, limited, multi-host emulator give the options the equivalent keywords give."""
    args = parse_args(["--config", "x.json", "--data-dir", str(tmp_path), "--port", "0", "--page-window", "7",
                       "--durability", "full", "--sas-key", "k", "--hostname", "sb.example", "--amqp-port-only",
                       "--max-connections", "3", "--admin-port", "0", "--websocket-port", "0"])
    cli = options_from(args)
    emulator = Emulator(config=None, in_memory=False, data_dir=str(tmp_path), page_window=7, durability="full",
                        sas_key="k", hostnames=["sb.example"], one_port=False, limits=Limits(max_connections=3),
                        websocket_port=0).options
    same = ("in_memory", "data_dir", "durability", "page_window", "sas_key", "host", "port", "client_host",
            "hostnames", "one_port", "limits", "directory")
    assert {name: getattr(cli, name) for name in same} == {name: getattr(emulator, name) for name in same}
    assert cli.admin is not None and emulator.admin is not None and cli.admin.port == emulator.admin.port == 0
    assert cli.websocket == emulator.websocket == WebSocketOptions(0, required=True)


def test_another_namespace_gets_its_own_directory_and_free_ports(tmp_path: Path) -> None:
    """docs/emulator.md, "Several namespaces": a store under namespaces/<name>/, free ports, no snapshot."""
    first = NamespaceOptions(in_memory=False, data_dir=tmp_path, port=5672, admin=AdminOptions(port=5300),
                             websocket=WebSocketOptions(443), snapshot={"format": "sbemulator-snapshot"})
    other = first.for_namespace("Billing-NS", "its-key")
    assert other.directory == tmp_path / "namespaces" / "billing-ns"
    assert (other.port, other.admin, other.websocket, other.snapshot) == (0, AdminOptions(port=0), None, None)
    assert other.sas_key == "its-key" and other.clock is first.clock and other.limits is first.limits


def test_a_root_key_set_in_the_file_is_the_one_in_the_connection_string() -> None:
    """A file that sets RootManageSharedAccessKey's key: the printed connection string (CLI) and
    ``emu.connection_string`` (Python) carry that key, and the SDK's tokens signed with it are accepted."""
    with Emulator(config=ROOT_KEY_IN_FILE, in_memory=True, admin_port=None) as emu:
        assert "SharedAccessKey=from-the-file;" in emu.connection_string
        assert emu.connection_string == emu.namespace().connection_string
        with ServiceBusClient.from_connection_string(emu.connection_string, retry_total=0) as client:
            with client.get_queue_sender("work") as sender:
                sender.send_messages(ServiceBusMessage("signed with the file's key"))
            with client.get_queue_receiver("work", max_wait_time=5) as receiver:
                received = receiver.receive_messages(max_message_count=1, max_wait_time=5)
                assert [str(message) for message in received] == ["signed with the file's key"]
                receiver.complete_message(received[0])


def test_a_websocket_port_that_is_not_required_is_reported_and_the_rest_serves() -> None:
    """The command line's default WebSocket port (443, privileged and often taken) only warns: the
    namespace still starts, AMQP accepts connections, and the refusal names the port (README, --websocket-port)."""
    async def start_beside(taken: int) -> tuple[ListenError | None, bool]:
        group = NamespaceGroup()
        first = await group.start([NamespaceConfig()], NamespaceOptions(
            websocket=WebSocketOptions(taken, required=False)))
        try:
            _reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", first.port), 5)
            writer.close()
            return first.websocket_refused, first.websocket is None
        finally:
            await group.stop()

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused, no_listener = asyncio.run(start_beside(port))
    assert no_listener and refused is not None and refused.errno == errno.EADDRINUSE
    assert f"cannot listen on 127.0.0.1:{port} (AMQP over WebSockets)" in str(refused.strerror)
