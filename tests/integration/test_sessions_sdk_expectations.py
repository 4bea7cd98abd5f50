"""Session behaviours the SDKs' own tests expect of Service Bus: listing sessions by the time their state
changed, and the empty string as a session id.

- azure-servicebus's list_queue_sessions / list_subscription_sessions(state_updated_after=...) send
  get-message-sessions with last-updated-time; without it the SDK sends DateTime.MaxValue
  (253402300800000 ms), which asks for every session with messages or state. With a time, Service Bus
  lists the sessions whose state was set or updated after it (the SDK's docstring; its live tests in
  tests/test_list_sessions.py).
- An empty SessionId is a session id ("Message sessions": any string up to 128 characters): the SDK
  sends it as the group-id and a receiver of session "" gets those messages.
- A session id that is not a string is refused: azure-servicebus's live
  test_session_by_session_client_conn_str_receive_handler_peeklock (and its async twin) opens
  ``get_queue_receiver(queue, session_id=1)`` and expects ServiceBusError; the SDK puts the int into the
  session filter as it is.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import time
from pathlib import Path

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import ServiceBusError

from sbemulator import Emulator
from tests.fixtures.emulator import STANDARD_TOPOLOGY, receive


def _set_state(client: ServiceBusClient, session_id: str, state: bytes | None) -> None:
    with client.get_queue_receiver("sessions", session_id=session_id) as receiver:
        receiver.session.set_state(state)


def _after_now() -> dt.datetime:
    """A time strictly before anything that happens from here on (the clock moves past it first)."""
    cut = dt.datetime.now(dt.UTC)
    deadline = time.monotonic() + 1
    while dt.datetime.now(dt.UTC) - cut < dt.timedelta(milliseconds=2) and time.monotonic() < deadline:
        time.sleep(0.001)
    return cut


def test_list_sessions_by_state_update_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=False, data_dir=data) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            with client.get_queue_sender("sessions") as sender:
                sender.send_messages([ServiceBusMessage("a", session_id="with-messages"),
                                      ServiceBusMessage("b", session_id="old-state")])
            _set_state(client, "old-state", b"before")
            cut = _after_now()
            _set_state(client, "new-state", b"after")
            _set_state(client, "cleared", b"set")
            _set_state(client, "cleared", None)
            # the SDK's sentinel: every session with messages or state, as before
            assert sorted(client.list_queue_sessions("sessions")) == ["new-state", "old-state", "with-messages"]
            # a time: the sessions whose state was set after it (a cleared state was set too)
            assert sorted(client.list_queue_sessions("sessions", state_updated_after=cut)) == ["cleared", "new-state"]
            assert list(client.list_queue_sessions("sessions", state_updated_after=_after_now())) == []
    # when a session's state changed is kept with the store
    with Emulator(config=copy.deepcopy(STANDARD_TOPOLOGY), in_memory=False, data_dir=data) as emu:
        with ServiceBusClient.from_connection_string(emu.connection_string) as client:
            assert sorted(client.list_queue_sessions("sessions", state_updated_after=cut)) == ["cleared", "new-state"]


def test_the_empty_string_is_a_session_id(emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_sender("sessions") as sender:
            sender.send_messages([ServiceBusMessage("empty 1", session_id=""),
                                  ServiceBusMessage("named", session_id="x"),
                                  ServiceBusMessage("empty 2", session_id="")])
        with client.get_queue_receiver("sessions", session_id="",
                                       receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert receiver.session.session_id == ""
            got = receive(receiver, 2)
            assert [str(m) for m in got] == ["empty 1", "empty 2"]
            assert all(m.session_id == "" for m in got)
        with client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION,
                                       receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as receiver:
            assert receiver.session.session_id == "x"


def test_the_empty_session_id_with_the_async_client_and_next_available(emulator: Emulator) -> None:
    async def scenario() -> None:
        async with AsyncServiceBusClient.from_connection_string(emulator.connection_string) as client:
            async with client.get_queue_sender("sessions") as sender:
                await sender.send_messages(ServiceBusMessage("only", session_id=""))
            async with client.get_queue_receiver("sessions", session_id=NEXT_AVAILABLE_SESSION,
                                                 max_wait_time=5) as receiver:
                assert receiver.session.session_id == ""
                [message] = await receiver.receive_messages(max_message_count=1, max_wait_time=5)
                await receiver.session.set_state(b"empty-named")
                assert await receiver.session.get_state() == b"empty-named"
                await receiver.complete_message(message)

    asyncio.run(scenario())


def test_a_session_id_that_is_not_a_string_is_refused(emulator: Emulator) -> None:
    async def open_async() -> None:
        async with AsyncServiceBusClient.from_connection_string(emulator.connection_string) as client:
            receiver = client.get_queue_receiver("sessions", session_id=1)  # type: ignore[arg-type]
            with pytest.raises(ServiceBusError):
                async with receiver:
                    pass

    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        receiver = client.get_queue_receiver("sessions", session_id=1)  # type: ignore[arg-type]
        with pytest.raises(ServiceBusError) as info:
            with receiver:
                pass
        assert "session filter must be a string" in str(info.value)
        with client.get_queue_sender("sessions") as sender:  # the queue and its sessions work as before
            sender.send_messages(ServiceBusMessage("one", session_id="1"))
        with client.get_queue_receiver("sessions", session_id="1") as receiver:
            assert [str(m) for m in receive(receiver, 1)] == ["one"]
    asyncio.run(open_async())
