"""A connection's grants stay bounded: the SDKs put a token again for every link before the last one
expires ("AMQP 1.0 in Azure Service Bus": claims-based authorization, token renewal), so a connection
that lives for days must not keep every token it was ever given."""

from __future__ import annotations

from typing import Any

from sbemulator.auth import Grant, SasValidator
from sbemulator.gateway.core import Gateway


class _Timer:
    def cancel(self) -> None:
        pass


def _gateway(now: list[float]) -> Gateway:
    def call_later(_delay: float, _callback: Any) -> _Timer:
        return _Timer()

    return Gateway(broker=None, validator=SasValidator({}), request_flush=lambda _g: None,  # type: ignore[arg-type]
                   call_later=call_later, wall_clock=lambda: now[0])


def test_a_renewed_token_replaces_the_one_for_the_same_scope_and_expired_ones_go() -> None:
    now = [1000.0]
    gateway = _gateway(now)
    for _ in range(500):  # a link's token renewed 500 times
        gateway.add_grant(Grant("orders", expires_at=now[0] + 3600, key_name="Root"))
        now[0] += 60
    gateway.add_grant(Grant("billing", expires_at=now[0] + 3600, key_name="Root"))
    assert sorted(g.scope for g in gateway.grants) == ["billing", "orders"]
    assert gateway.is_authorized("orders") and gateway.is_authorized("billing")
    # A token that ends sooner than the one held for its scope does not shorten it.
    held = next(g for g in gateway.grants if g.scope == "orders").expires_at
    gateway.add_grant(Grant("orders", expires_at=now[0] + 10, key_name="Root"))
    assert next(g for g in gateway.grants if g.scope == "orders").expires_at == held
    # Once expired, a grant is dropped at the next put-token.
    now[0] += 7200
    gateway.add_grant(Grant("events", expires_at=now[0] + 3600, key_name="Root"))
    assert [g.scope for g in gateway.grants] == ["events"]
