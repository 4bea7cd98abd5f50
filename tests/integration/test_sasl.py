"""SASL against a running emulator over a raw socket (AMQP 1.0 part 5).

The SDKs use ANONYMOUS plus a CBS token; other AMQP clients (Qpid, RabbitMQ shovels, the official
emulator's users) authenticate with PLAIN, user = SAS key name and password = key. A PLAIN-authenticated
connection may use entities without a token; a wrong key gets sasl-outcome code 1 (auth) and the socket
is closed (spec 5.3.3.6).
"""

from __future__ import annotations

import time

import pytest
from azure.servicebus import ServiceBusClient

from sbemulator.amqp.framing import AMQP_HEADER
from sbemulator.amqp.message import encode_message, parse_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Accepted,
    Attach,
    Begin,
    Detach,
    Disposition,
    Flow,
    Properties,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import UInt
from sbemulator.auth import sign

from .test_malformed_input import RawClient


def _plain(user: str, password: str) -> bytes:
    return b"\x00" + user.encode() + b"\x00" + password.encode()


def _attach_sender(raw: RawClient, address: str) -> list:
    """Begin a session and attach a sending link; returns the frames the server answered with."""
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    assert isinstance(raw.read_frame().body, Begin)
    raw.frame(Attach("plain-sender", UInt(0), ROLE_SENDER, None, None,
                     Source("plain-client"), Target(address), initial_delivery_count=UInt(0)))
    attach = raw.read_frame()
    assert isinstance(attach.body, Attach) and attach.body.role is ROLE_RECEIVER
    return [attach, raw.read_frame()]


def test_plain_with_the_namespace_key_authenticates_and_can_send_without_a_token(emulator) -> None:
    with RawClient(emulator.port) as raw:
        open_ = raw.open("PLAIN", _plain(emulator.key_name, emulator.key))
        assert open_.container_id
        _, flow = _attach_sender(raw, "orders")
        assert isinstance(flow.body, Flow) and (flow.body.link_credit or 0) > 0
        payload = encode_message(properties=Properties(message_id="plain-1"), data=b"sent with PLAIN")
        raw.frame(Transfer(UInt(0), UInt(0), b"tag-1", UInt(0), False), payload=payload)
        disposition = raw.read_frame().body
        assert isinstance(disposition, Disposition) and disposition.role is ROLE_RECEIVER
        assert disposition.settled is True and isinstance(disposition.state, Accepted)
    with ServiceBusClient.from_connection_string(emulator.connection_string) as client:
        with client.get_queue_receiver("orders") as receiver:
            [message] = receiver.receive_messages(max_message_count=1, max_wait_time=5)
            assert message.message_id == "plain-1" and b"".join(message.body) == b"sent with PLAIN"
            receiver.complete_message(message)


@pytest.mark.parametrize(
    "credentials",
    [("RootManageSharedAccessKey", "wrong-key"), ("NoSuchKeyName", "SAS_KEY_VALUE"), ("", "")],
    ids=["wrong-key", "wrong-key-name", "empty"],
)
def test_plain_with_wrong_credentials_gets_outcome_auth_and_the_socket_closes(emulator, credentials) -> None:
    with RawClient(emulator.port) as raw:
        assert raw.sasl("PLAIN", _plain(*credentials)) == 1
        try:
            raw.send(AMQP_HEADER)  # the server has closed (or is closing): no answer may come
            rest = raw.read_until_eof()
        except ConnectionError:
            return  # reset: the socket was already closed when the header arrived
        assert rest == b""


def test_unknown_mechanism_gets_outcome_auth(emulator) -> None:
    with RawClient(emulator.port) as raw:
        assert raw.sasl("SCRAM-SHA-256", b"n,,n=user,r=abc") == 1
        assert raw.read_until_eof() == b""


def test_anonymous_without_a_token_cannot_attach_to_an_entity(emulator) -> None:
    with RawClient(emulator.port) as raw:
        raw.open()
        attach, detach = _attach_sender(raw, "orders")
        assert attach.body.target is None  # refused: null terminus on the server's side (spec 2.6.3)
        assert isinstance(detach.body, Detach) and detach.body.error is not None
        assert str(detach.body.error.condition) == "amqp:unauthorized-access"


def _put_token(raw: RawClient, audience: str, token: str) -> int:
    """The CBS exchange on channel 0 as Azure.Messaging.ServiceBus's CbsTokenProvider drives it through
    Microsoft.Azure.Amqp (AmqpCbsLink): a sender and a receiver on ``$cbs``, one put-token request with
    ``type`` ``servicebus.windows.net:sastoken`` and the audience as ``name``; returns its status code."""
    raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
    assert isinstance(raw.read_frame().body, Begin)
    raw.frame(Attach("cbs-sender", UInt(0), ROLE_SENDER, None, None,
                     Source("cbs-client"), Target("$cbs"), initial_delivery_count=UInt(0)))
    raw.frame(Attach("cbs-receiver", UInt(1), ROLE_RECEIVER, None, None, Source("$cbs"), Target("cbs-client")))
    frames = [raw.read_frame() for _ in range(3)]  # two attaches and the credit for our sender
    assert sum(isinstance(f.body, Attach) for f in frames) == 2
    raw.frame(Flow(UInt(0), UInt(100), UInt(0), UInt(100), handle=UInt(1), delivery_count=UInt(0),
                   link_credit=UInt(10)))
    request = encode_message(
        properties=Properties(message_id="cbs-1", reply_to="cbs-client"),
        application_properties={"operation": "put-token", "type": "servicebus.windows.net:sastoken",
                                 "name": audience, "expiration": None},
        value=token,
    )
    raw.frame(Transfer(UInt(0), UInt(0), b"cbs-tag", UInt(0), True), payload=request)
    while True:
        frame = raw.read_frame()
        if isinstance(frame.body, Transfer):
            reply = parse_message(frame.payload)
            assert reply.application_properties is not None
            return int(reply.application_properties["status-code"])


def test_the_dotnet_sdks_mssbcbs_mechanism_is_offered_and_a_cbs_token_then_authorizes(emulator) -> None:
    """Azure.Messaging.ServiceBus registers one SASL handler, an anonymous one named MSSBCBS
    (src/Amqp/AmqpConnectionScope.cs, CbsSaslHandlerName); Microsoft.Azure.Amqp refuses a server whose
    sasl-server-mechanisms lack it (Sasl/SaslNegotiator.cs). Service Bus offers it first."""
    with RawClient(emulator.port) as raw:
        raw.send(b"AMQP\x03\x01\x00\x00")
        assert raw.read(8) == b"AMQP\x03\x01\x00\x00"
        mechanisms = raw.read_frame().body
        assert next(iter(mechanisms.sasl_server_mechanisms)) == "MSSBCBS"
    with RawClient(emulator.port) as raw:
        raw.open("MSSBCBS")
        attach, detach = _attach_sender(raw, "orders")  # no token yet: refused like ANONYMOUS
        assert attach.body.target is None and str(detach.body.error.condition) == "amqp:unauthorized-access"
    with RawClient(emulator.port) as raw:
        raw.open("MSSBCBS", hostname="127.0.0.1")
        # .NET signs the namespace (amqps://host/) and names the entity as amqp://host/<entity>
        token = _sas_token(emulator, "amqps://127.0.0.1/")
        assert 200 <= _put_token(raw, "amqp://127.0.0.1/orders", token) < 300
        raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)), channel=1)
        assert isinstance(raw.read_frame().body, Begin)
        raw.frame(Attach("dotnet-sender", UInt(0), ROLE_SENDER, None, None,
                         Source("dotnet-sender"), Target("amqp://127.0.0.1/orders"),
                         initial_delivery_count=UInt(0)), channel=1)
        attach = raw.read_frame().body
        assert isinstance(attach, Attach) and attach.target is not None
        flow = raw.read_frame().body
        assert isinstance(flow, Flow) and (flow.link_credit or 0) > 0


def _sas_token(emulator, resource: str) -> str:
    return sign(resource, emulator.key_name, emulator.key, int(time.time()) + 3600)
