"""How the broker keeps an entity's settings in the store and in snapshots: its configuration as JSON
(durations in seconds; the date/time and duration values of rule parameters and correlation properties
tagged, so that they keep their type across a restart) and back.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

from sbemulator.config import AuthorizationRuleConfig, QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

from .entity import QUEUE, TOPIC


def _typed_to_json(value: Any) -> Any:
    """Date/time and duration values of rule parameters and correlation properties keep their type
    across a restart (a date/time stored as text would no longer compare with a date/time); anything
    else JSON cannot hold (an AMQP UUID) is kept as text."""
    if isinstance(value, datetime.datetime):
        return {_DATETIME_TAG: value.isoformat()}
    if isinstance(value, datetime.timedelta):
        return {_TIMESPAN_TAG: value.total_seconds()}
    return str(value)


def typed_from_json(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        if _DATETIME_TAG in obj:
            return datetime.datetime.fromisoformat(obj[_DATETIME_TAG])
        if _TIMESPAN_TAG in obj:
            return datetime.timedelta(seconds=obj[_TIMESPAN_TAG])
    return obj


_DATETIME_TAG = "$datetime"
_TIMESPAN_TAG = "$timespan"


def dumps_typed(data: Any) -> str:
    return json.dumps(data, default=_typed_to_json)


def description_json(config: QueueConfig | TopicConfig | SubscriptionConfig) -> dict[str, Any]:
    """An entity's settings as a JSON object, as the store keeps them (config fields, durations in
    seconds, a subscription's rules; date/time and duration values of rules tagged so that they keep
    their type): what a snapshot carries for each entity."""
    data: dict[str, Any] = json.loads(dumps_typed(dataclasses.asdict(config)))
    return data


def config_from(kind: str, desc: dict[str, Any]) -> Any:
    """The configuration a stored description of an entity of ``kind`` stands for."""
    desc = dict(desc)
    if "authorization_rules" in desc:
        desc["authorization_rules"] = tuple(
            AuthorizationRuleConfig(**{**r, "rights": tuple(r.get("rights", ()))}) for r in desc["authorization_rules"]
        )
    if kind == QUEUE:
        return QueueConfig(**desc)
    if kind == TOPIC:
        desc.pop("subscriptions", None)
        return TopicConfig(**desc)
    desc.pop("topic", None)
    desc["rules"] = tuple(RuleConfig(**r) for r in desc.get("rules", ()))
    return SubscriptionConfig(**desc)
