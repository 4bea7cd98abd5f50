"""SAS token validation: signature, key name, expiry and scope, with the reasons Service Bus gives."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import urllib.parse

import pytest

from sbemulator.auth import AuthError, Resource, SasValidator, normalize_path, own_hosts, parse_resource, sign

KEYS = {"RootManageSharedAccessKey": "SAS_KEY_VALUE", "SendOnly": "other"}
NOW = 1_800_000_000


def token(resource: str = "sb://127.0.0.1/orders", key_name: str = "RootManageSharedAccessKey",
          key: str = "SAS_KEY_VALUE", expiry: int = NOW + 60) -> str:
    return sign(resource, key_name, key, expiry)


def test_valid_token_grants_its_resource_and_below():
    grant = SasValidator(KEYS).validate(token(), audience="sb://127.0.0.1/orders", now=NOW)
    assert grant.scope == "orders"
    assert grant.covers("orders", now=NOW)
    assert grant.covers("Orders/$DeadLetterQueue", now=NOW)
    assert grant.covers("orders/$management", now=NOW)
    assert not grant.covers("orders2", now=NOW)
    assert not grant.covers("orders", now=NOW + 61)


def test_second_key_from_the_config_is_accepted():
    grant = SasValidator(KEYS).validate(token(key_name="SendOnly", key="other"), now=NOW)
    assert grant.key_name == "SendOnly"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (lambda: token(key="wrong"), "invalid signature"),
        (lambda: token(key_name="Nope"), "unknown shared access key name 'Nope'"),
        (lambda: token(expiry=NOW - 1), "ExpiredToken"),
        (lambda: "Bearer abc", "not a SharedAccessSignature"),
        (lambda: "SharedAccessSignature sr=x&se=1", "lacks sig, skn"),
        (lambda: token().replace("se=", "se=x"), "not an integer"),
    ],
)
def test_bad_tokens_say_why(bad, reason):
    with pytest.raises(AuthError) as info:
        SasValidator(KEYS).validate(bad(), now=NOW)
    assert reason in str(info.value)


def test_token_for_another_entity_is_out_of_scope():
    with pytest.raises(AuthError) as info:
        SasValidator(KEYS).validate(token("sb://127.0.0.1/orders"), audience="sb://127.0.0.1/payments", now=NOW)
    assert "InvalidAudience" in str(info.value)


def test_tampered_resource_breaks_the_signature():
    tampered = token("sb://127.0.0.1/orders").replace("orders", "payments")
    with pytest.raises(AuthError, match="invalid signature"):
        SasValidator(KEYS).validate(tampered, now=NOW)


def test_paths_are_normalized_without_host_and_case():
    assert normalize_path("sb://host:5672/Queue/") == "queue"
    assert normalize_path("amqps://h/t/Subscriptions/S") == "t/subscriptions/s"
    assert normalize_path("sb%3A%2F%2Fh%2Fq") == "q"


def test_resources_are_taken_apart_into_scheme_host_and_path():
    assert parse_resource("sb://Host:5672/Queue/") == Resource("sb", "host", "queue")
    assert parse_resource("ns.servicebus.windows.net") == Resource(None, "ns.servicebus.windows.net", "")
    assert parse_resource("127.0.0.1%3a5672") == Resource(None, "127.0.0.1", "")
    assert parse_resource("https://[::1]:5300/t/Subscriptions/s?api-version=1") == Resource("https", "::1",
                                                                                           "t/subscriptions/s")
    assert parse_resource("amqps://h/") == Resource("amqps", "h", "")


def test_a_bare_namespace_host_is_the_whole_namespace():
    # The Go SDK's sas.CreateConnectionStringWithSASUsingExpiry signs the namespace's host[:port], lower-case
    # and query-escaped, without a scheme (client_test.go TestNewClientUsingSharedAccessSignature).
    sr, se = "127.0.0.1%3a5672", str(NOW + 60)
    sig = base64.b64encode(hmac.new(b"SAS_KEY_VALUE", f"{sr}\n{se}".encode(), hashlib.sha256).digest()).decode()
    go_token = f"SharedAccessSignature sr={sr}&sig={urllib.parse.quote_plus(sig)}&se={se}&skn=RootManageSharedAccessKey"
    validator = SasValidator(KEYS, hosts=own_hosts("127.0.0.1"))
    grant = validator.validate(go_token, audience="sb://127.0.0.1:5672/orders", now=NOW)
    assert grant.scope == ""
    assert grant.covers("orders/$DeadLetterQueue", now=NOW)


def test_only_the_emulators_own_hosts_and_the_sdks_schemes_are_accepted():
    validator = SasValidator(KEYS, hosts=own_hosts("10.1.2.3", ["sbemulator"]))
    for resource in ("sb://127.0.0.1/orders", "amqps://localhost/orders", "https://[::1]:443/orders",
                     "amqp://127.205.179.105/orders",  # every loopback address is this machine
                     "wss://10.1.2.3/$servicebus/websocket", "amqp://SBEMULATOR/orders", "http://localhost:8080/"):
        validator.validate(token(resource), now=NOW)
    for resource, reason in (("sb://other.servicebus.windows.net/orders", "is for the host"),
                             ("https://10.1.2.4/orders", "is for the host"), ("ftp://127.0.0.1/orders", "scheme"),
                             ("sb:///orders", "is for the host")):
        with pytest.raises(AuthError, match="InvalidAudience") as info:
            validator.validate(token(resource), now=NOW)
        assert reason in str(info.value)


def test_listening_on_every_address_accepts_the_machines_names():
    hosts = own_hosts("0.0.0.0")
    assert {"127.0.0.1", "localhost", "::1", socket.gethostname().lower()} <= hosts
    assert "0.0.0.0" not in hosts


def test_an_expired_token_says_so_as_service_bus_does():
    # The text the Go SDK's tests expect (client_test.go TestClientUnauthorizedCreds, "Expired SAS").
    with pytest.raises(AuthError) as info:
        SasValidator(KEYS).validate(token(expiry=NOW - 600), now=NOW)
    assert str(info.value) == "ExpiredToken: The token is expired. Expiration time: '2027-01-15 07:50:00Z'."
