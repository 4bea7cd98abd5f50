"""`$management` requests over a raw socket: the rights each operation needs, and an answer to every
request, even one the emulator cannot decode.

The SDKs only send requests they can build and only over a connection whose token also opened the
entity link, so neither case can be provoked through them; a raw client signs in with SASL PLAIN as a
key with given rights (its rights are the key's) and speaks the request/response protocol itself.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sbemulator import Emulator
from sbemulator.amqp import codec
from sbemulator.amqp.message import encode_message, parse_message
from sbemulator.amqp.performatives import (
    ROLE_RECEIVER,
    ROLE_SENDER,
    Attach,
    Begin,
    Flow,
    Properties,
    Source,
    Target,
    Transfer,
)
from sbemulator.amqp.types import Described, Symbol, UInt, ULong
from tests.fixtures.emulator import STANDARD_TOPOLOGY
from tests.integration.test_malformed_input import RawClient

MGMT = "orders/$management"
REPLY_TO = "raw-reply-1"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    raw = copy.deepcopy(STANDARD_TOPOLOGY)
    raw["UserConfig"]["Namespaces"][0]["SasKeys"] = [
        {"KeyName": "Listener", "Key": "listen-secret", "Rights": ["Listen"]},
        {"KeyName": "Sender", "Key": "send-secret", "Rights": ["Send"]},
    ]
    with Emulator(config=raw, in_memory=True) as emulator:
        yield emulator


def _frames_until(raw: RawClient, kind: type, timeout: float = 5.0) -> list:
    bodies = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = raw.read_frame()
        bodies.append(frame)
        if isinstance(frame.body, kind):
            return bodies
    raise TimeoutError(f"no {kind.__name__} within {timeout} s")


class MgmtClient:
    """One connection signed in as a key, with the `$management` link pair of `orders`."""

    def __init__(self, emu: Emulator, key_name: str, key: str) -> None:
        self.raw = RawClient(emu.port)
        self.raw.open("PLAIN", b"\x00" + key_name.encode() + b"\x00" + key.encode())
        self.raw.frame(Begin(None, UInt(0), UInt(100), UInt(100)))
        _frames_until(self.raw, Begin)
        self.raw.frame(Attach("mgmt-send", UInt(0), ROLE_SENDER, None, None, Source(REPLY_TO), Target(MGMT),
                              initial_delivery_count=UInt(0)))
        _frames_until(self.raw, Flow)  # the attach, then the credit
        self.raw.frame(Attach("mgmt-recv", UInt(1), ROLE_RECEIVER, None, None, Source(MGMT), Target(REPLY_TO)))
        _frames_until(self.raw, Attach)
        self.raw.frame(Flow(UInt(100), UInt(0), UInt(100), UInt(100), UInt(1), UInt(0), UInt(10)))
        self.delivery = 0

    def close(self) -> None:
        self.raw.close()

    def request(self, payload: bytes) -> Any:
        self.raw.frame(Transfer(UInt(0), UInt(self.delivery), uuid.uuid4().bytes, UInt(0), settled=True),
                       payload=payload)
        self.delivery += 1
        transfer = next(f for f in _frames_until(self.raw, Transfer) if isinstance(f.body, Transfer))
        return parse_message(transfer.payload)


def _request(operation: str, body: Any, message_id: str = "req-1") -> bytes:
    return encode_message(
        properties=Properties(message_id=message_id, reply_to=REPLY_TO),
        application_properties={"operation": operation, "type": "entity-mgmt"},
        value=body,
    )


@pytest.fixture
def listener(emu: Emulator) -> Iterator[MgmtClient]:
    client = MgmtClient(emu, "Listener", "listen-secret")
    yield client
    client.close()


def test_an_undecodable_request_gets_a_400_reply_with_a_description(listener: MgmtClient) -> None:
    """Issue item 13: answered as Service Bus answers a malformed request, never left unanswered."""
    head = encode_message(properties=Properties(message_id="broken-1", reply_to=REPLY_TO),
                          application_properties={"operation": "com.microsoft:renew-lock"}, value=None)
    head = head[: -len(codec.encode(Described(ULong(0x77), None)))]
    # an amqp-value holding an array whose size field claims more bytes than follow
    broken = head + b"\x00\x53\x77" + b"\xe0\x40\x03\x98"
    reply = listener.request(broken)
    assert reply.properties.correlation_id == "broken-1"
    assert reply.application_properties["statusCode"] == 400
    assert "could not be decoded" in reply.application_properties["statusDescription"]
    assert reply.application_properties["errorCondition"] == Symbol("amqp:decode-error")


def test_a_request_the_key_may_make_is_answered(listener: MgmtClient) -> None:
    reply = listener.request(_request("com.microsoft:peek-message",
                                      {"from-sequence-number": 1, "message-count": 1}))
    assert reply.application_properties["statusCode"] == 204


def test_scheduling_needs_send_and_a_listen_key_is_refused(listener: MgmtClient) -> None:
    reply = listener.request(_request("com.microsoft:cancel-scheduled-message", {"sequence-numbers": []}))
    props = reply.application_properties
    assert props["statusCode"] == 401
    assert props["errorCondition"] == Symbol("amqp:unauthorized-access")
    assert props["statusDescription"].startswith("Unauthorized access. 'Send' claim(s) are required")


def test_receive_side_operations_need_listen_and_a_send_key_is_refused(emu: Emulator) -> None:
    client = MgmtClient(emu, "Sender", "send-secret")
    try:
        for operation, body in (("com.microsoft:peek-message", {"from-sequence-number": 1, "message-count": 1}),
                                ("com.microsoft:renew-lock", {"lock-tokens": []}),
                                ("com.microsoft:enumerate-rules", {"top": 10, "skip": 0})):
            props = client.request(_request(operation, body)).application_properties
            assert props["statusCode"] == 401, operation
            assert "'Listen' claim(s) are required" in props["statusDescription"]
        props = client.request(_request("com.microsoft:cancel-scheduled-message",
                                        {"sequence-numbers": []})).application_properties
        assert props["statusCode"] == 200
    finally:
        client.close()


def test_a_required_field_sent_as_null_is_a_400_that_names_it(listener: MgmtClient) -> None:
    """A request the SDKs could not build (disposition-status null): the client's mistake, answered 400
    with the field's name, not a failure of the emulator's."""
    reply = listener.request(_request("com.microsoft:update-disposition",
                                      {"disposition-status": None, "lock-tokens": [uuid.uuid4()]}))
    props = reply.application_properties
    assert props["statusCode"] == 400
    assert "disposition-status" in props["statusDescription"]
