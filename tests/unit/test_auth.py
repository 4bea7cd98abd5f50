"""SAS token validation: signature, key name, expiry and scope, with the reasons Service Bus gives."""

from __future__ import annotations

import pytest

from sbemulator.auth import AuthError, SasValidator, normalize_path, sign

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
