"""A token that expires ends the links it authorized, as Service Bus ends them.

Follows "AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide", claims-based authorization: "The
client is subsequently responsible for keeping track of token expiration. When a token expires, Service
Bus promptly drops all links on the connection to the respective entity." The service detaches them with
``amqp:link:detach-forced`` and "The link '...' is force detached. Code: RenewToken. Details: Unauthorized
access. 'Listen' claim(s) are required to perform this operation. Resource: '...'" (the text users of the
Python SDK and of dapr reported: azure-sdk-for-python issue 23487, dapr components-contrib issue 809).
A token renewed in time keeps its links (tests/integration/test_dotnet_wire.py,
``test_token_refreshed_before_expiry_on_the_same_cbs_link_keeps_the_link_working``).

The frames are the .NET stack's (tests/fixtures/dotnet_wire.py): its ``AmqpConnectionScope`` refreshes a
token before it expires; a client that does not gets its links dropped and reconnects with a new token.
"""

from __future__ import annotations

import uuid

from sbemulator import Emulator
from sbemulator.amqp.message import encode_message
from sbemulator.amqp.performatives import Accepted, Detach, Error, Header, Properties
from tests.fixtures.dotnet_wire import DotNetWire

QUEUE = "orders"
SHORT_S = 2  # a token's life in these tests (whole seconds: a SAS token's expiry is in seconds)


def _message(body: bytes) -> bytes:
    return encode_message(header=Header(durable=True), properties=Properties(message_id=str(uuid.uuid4())),
                          data=body)


def _short_token(wire: DotNetWire, emu: Emulator, entity: str = QUEUE) -> None:
    reply = wire.put_token(wire.entity_uri(entity), emu.key_name, emu.key, expires_in=SHORT_S)
    assert reply.application_properties["status-code"] == 202, reply.application_properties


def _forced_detach(wire: DotNetWire, channel: int, handle: int) -> Error:
    """The error of the detach the emulator sends when the link's token expires."""
    detach: Detach = wire.wait_body(Detach, channel=channel, handle=handle, timeout=SHORT_S + 10)
    assert detach.closed
    assert detach.error is not None
    return detach.error


def test_a_sender_whose_token_expires_is_detached_with_renew_token(emulator: Emulator) -> None:
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        _short_token(wire, emulator)
        sender = wire.sender(QUEUE)
        assert isinstance(wire.send_message(sender, _message(b"before expiry")).state, Accepted)
        error = _forced_detach(wire, sender.channel, sender.handle)
        assert str(error.condition) == "amqp:link:detach-forced"
        description = str(error.description)
        assert f"The link '{sender.name}' is force detached. Code: RenewToken." in description
        assert "'Send' claim(s) are required" in description and QUEUE in description


def test_a_receiver_whose_token_expires_is_detached_and_a_new_token_lets_it_attach_again(
        emulator: Emulator) -> None:
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        _short_token(wire, emulator)
        receiver = wire.receiver(QUEUE)
        error = _forced_detach(wire, receiver.channel, receiver.handle)
        assert str(error.condition) == "amqp:link:detach-forced"
        assert "'Listen' claim(s) are required" in str(error.description)
        # What the SDKs do next: a new token, a new link.
        reply = wire.put_token(wire.entity_uri(QUEUE), emulator.key_name, emulator.key, expires_in=3600)
        assert reply.application_properties["status-code"] == 202
        sender = wire.sender(QUEUE)
        assert isinstance(wire.send_message(sender, _message(b"after renewal")).state, Accepted)
        again = wire.receiver(QUEUE, peek_lock=False)
        wire.flow(again, 1)
        assert wire.receive(again).message.body_value() == b"after renewal"


def test_only_the_links_of_the_expired_token_are_dropped(emulator: Emulator) -> None:
    """The token of ``orders`` expires; the link of ``retry3``, whose token lasts, stays."""
    lasting = "retry3"
    with DotNetWire(emulator.port) as wire:
        wire.connect()
        _short_token(wire, emulator)
        reply = wire.put_token(wire.entity_uri(lasting), emulator.key_name, emulator.key, expires_in=3600)
        assert reply.application_properties["status-code"] == 202
        short = wire.sender(QUEUE)
        long = wire.sender(lasting)
        _forced_detach(wire, short.channel, short.handle)
        assert isinstance(wire.send_message(long, _message(b"still authorized")).state, Accepted)
