"""The Atom/XML format without sockets: requests serialized by azure.servicebus.management's own models are
parsed into the right spec/rule, and responses rendered here are read back by the SDK's deserializers."""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET

import pytest
from azure.servicebus.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    QueueProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    TopicProperties,
    TrueRuleFilter,
)
from azure.servicebus.management import _generated as gen
from azure.servicebus.management._models import QueueRuntimeProperties, TopicRuntimeProperties
from azure.servicebus.management._utils import deserialize_rule_key_values, serialize_rule_key_values

from sbemulator.admin import atom
from sbemulator.admin.backend import EXTRA_DEFAULTS, EntityInfo, RuleInfo
from sbemulator.admin.errors import BadRequest
from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

models = gen.models
T0 = 1_700_000_000.0
COUNTS = {"active": 3, "deferred": 1, "scheduled": 2, "dead_letter": 4, "transfer_dead_letter": 0}


def sdk_request(body_model) -> bytes:
    """What the SDK puts on the wire: its model serialized, then its XML workaround policy applied."""
    raw = ET.tostring(body_model.serialize(is_xml=True))
    return raw.replace(b"ns1:", b"").replace(b":ns1", b"")


def queue_body(**kwargs) -> bytes:
    props = dict.fromkeys(
        ["authorization_rules", "auto_delete_on_idle", "dead_lettering_on_message_expiration",
         "default_message_time_to_live", "duplicate_detection_history_time_window", "availability_status",
         "enable_batched_operations", "enable_express", "enable_partitioning", "lock_duration",
         "max_delivery_count", "max_size_in_megabytes", "requires_duplicate_detection", "requires_session",
         "status", "forward_to", "user_metadata", "forward_dead_lettered_messages_to",
         "max_message_size_in_kilobytes"])
    props.update(kwargs)
    queue = QueueProperties("q", **props)
    return sdk_request(models.CreateQueueBody(
        content=models.CreateQueueBodyContent(queue_description=queue._to_internal_entity("host"))))


def rule_body(rule: RuleProperties) -> bytes:
    element = models.CreateRuleBody(
        content=models.CreateRuleBodyContent(rule_description=rule._to_internal_entity())).serialize(is_xml=True)
    serialize_rule_key_values(element, rule)
    assert isinstance(element, ET.Element)
    return ET.tostring(element).replace(b"ns1:", b"").replace(b":ns1", b"")


@pytest.mark.parametrize(("seconds", "text"), [
    (60, "PT1M"), (14 * 86400, "P14D"), (0.5, "PT0.5S"), (3661, "PT1H1M1S"), (90061.25, "P1DT1H1M1.25S"),
    (None, atom.MAX_TIMESPAN), (0, "PT0S"),
])
def test_format_duration(seconds, text) -> None:
    assert atom.format_duration(seconds) == text


def test_sdk_queue_request_is_parsed_into_a_spec() -> None:
    body = queue_body(lock_duration=datetime.timedelta(seconds=30), max_delivery_count=5, requires_session=True,
                      forward_to="sb://host/target", user_metadata="meta", enable_batched_operations=False,
                      default_message_time_to_live=datetime.timedelta(days=2))
    kind, element = atom.description_kind(body)
    assert kind == "queue"
    assert atom.parse_description(element) == {
        "LockDuration": 30.0, "MaxDeliveryCount": 5, "RequiresSession": True, "ForwardTo": "sb://host/target",
        "UserMetadata": "meta", "EnableBatchedOperations": False, "DefaultMessageTimeToLive": 2 * 86400.0,
    }


def test_prefixed_and_default_namespace_bodies_read_the_same() -> None:
    prefixed = (b'<a:entry xmlns:a="http://www.w3.org/2005/Atom" xmlns:s="' + atom.SB_NS.encode() + b'">'
                b'<a:content type="application/xml"><s:TopicDescription><s:DefaultMessageTimeToLive>PT5M'
                b"</s:DefaultMessageTimeToLive></s:TopicDescription></a:content></a:entry>")
    kind, element = atom.description_kind(prefixed)
    assert kind == "topic"
    assert atom.parse_description(element) == {"DefaultMessageTimeToLive": 300.0}


@pytest.mark.parametrize("body", [b"", b"<entry", b"<entry xmlns='http://www.w3.org/2005/Atom'/>",
                                  b"<QueueDescription><LockDuration>1 minute</LockDuration></QueueDescription>",
                                  b"<QueueDescription><MaxDeliveryCount>many</MaxDeliveryCount></QueueDescription>",
                                  b"<QueueDescription><LockDuration>PT0S</LockDuration></QueueDescription>"])
def test_bad_bodies_are_bad_requests(body: bytes) -> None:
    with pytest.raises(BadRequest):
        atom.parse_description(atom.description_kind(body)[1])


@pytest.mark.parametrize(("rule", "expected"), [
    (RuleProperties("r", filter=TrueRuleFilter(), action=None, created_at_utc=None),
     RuleConfig("r", "Sql", sql_expression="1=1")),
    (RuleProperties("r", filter=FalseRuleFilter(), action=None, created_at_utc=None),
     RuleConfig("r", "Sql", sql_expression="1=0")),
    (RuleProperties("r", filter=SqlRuleFilter("a > 1"), action=SqlRuleAction("SET b = 2"), created_at_utc=None),
     RuleConfig("r", "Sql", sql_expression="a > 1", action_expression="SET b = 2")),
    (RuleProperties("r", filter=CorrelationRuleFilter(correlation_id="c", label="L",
                                                      properties={"s": "x", "i": 7, "f": 1.5, "b": True}),
                    action=None, created_at_utc=None),
     RuleConfig("r", "Correlation", correlation={"CorrelationId": "c", "Label": "L",
                                                  "Properties": {"s": "x", "i": 7, "f": 1.5, "b": True}})),
])
def test_sdk_rule_requests_are_parsed(rule: RuleProperties, expected: RuleConfig) -> None:
    assert atom.parse_rule(rule_body(rule), "r") == expected


def test_sql_filter_and_action_parameters_are_parsed_with_their_types() -> None:
    when = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    rule = RuleProperties(
        "r", filter=SqlRuleFilter("a = @p AND d < @when AND t < @span",
                                  parameters={"@p": 1, "@when": when, "@span": datetime.timedelta(minutes=5)}),
        action=SqlRuleAction("SET b = @s", parameters={"@s": "x", "@flag": True}), created_at_utc=None)
    parsed = atom.parse_rule(rule_body(rule), "r")
    assert parsed.filter_parameters == {"@p": 1, "@when": when, "@span": datetime.timedelta(minutes=5)}
    assert parsed.action_parameters == {"@s": "x", "@flag": True}


def info(kind: str, config, **extra) -> EntityInfo:
    return EntityInfo(kind=kind, name=config.name, topic=extra.pop("topic", None), config=config,
                      extras={**EXTRA_DEFAULTS, "UserMetadata": "m"}, counts=COUNTS, size_in_bytes=321,
                      created_at=T0, updated_at=T0 + 1, accessed_at=T0 + 2, **extra)


def sdk_entry(data: bytes, entry_class):
    return entry_class.deserialize(ET.fromstring(data))


def test_queue_entry_reads_back_through_the_sdk() -> None:
    config = QueueConfig("orders", lock_duration=45, max_delivery_count=4, requires_session=True,
                         forward_to="other", default_message_ttl=600)
    data = atom.render_entity(info("queue", config), "https://h:1", "h:1", "ns")
    entry = sdk_entry(data, models.QueueDescriptionEntry)
    props = QueueProperties._from_internal_entity("orders", entry.content.queue_description)
    assert props.lock_duration == datetime.timedelta(seconds=45)
    assert (props.max_delivery_count, props.requires_session, props.user_metadata) == (4, True, "m")
    assert props.forward_to == "sb://h:1/other"
    assert props.default_message_time_to_live == datetime.timedelta(minutes=10)
    assert isinstance(props.auto_delete_on_idle, datetime.timedelta)
    assert props.auto_delete_on_idle > datetime.timedelta(days=10_000)
    runtime = QueueRuntimeProperties._from_internal_entity("orders", entry.content.queue_description)
    assert (runtime.active_message_count, runtime.scheduled_message_count, runtime.dead_letter_message_count) == (
        3, 2, 4)
    assert runtime.total_message_count == 10 and runtime.size_in_bytes == 321
    assert runtime.created_at_utc == datetime.datetime.fromtimestamp(T0, datetime.UTC)
    assert runtime.accessed_at_utc == datetime.datetime.fromtimestamp(T0 + 2, datetime.UTC)


def test_topic_and_subscription_entries_read_back_through_the_sdk() -> None:
    data = atom.render_entity(info("topic", TopicConfig("t", max_message_size_kb=1024), subscription_count=3),
                              "https://h", "h", "ns")
    desc = sdk_entry(data, models.TopicDescriptionEntry).content.topic_description
    assert TopicProperties._from_internal_entity("t", desc).max_message_size_in_kilobytes == 1024
    assert TopicRuntimeProperties._from_internal_entity("t", desc).subscription_count == 3
    data = atom.render_entity(info("subscription", SubscriptionConfig("s", max_delivery_count=9), topic="t"),
                              "https://h", "h", "ns")
    desc = sdk_entry(data, models.SubscriptionDescriptionEntry).content.subscription_description
    props = SubscriptionProperties._from_internal_entity("s", desc)
    assert props.max_delivery_count == 9 and props.dead_lettering_on_filter_evaluation_exceptions is True


@pytest.mark.parametrize("rule", [
    RuleConfig("r", "Sql", sql_expression="1=1"),
    RuleConfig("r", "Sql", sql_expression="1=0"),
    RuleConfig("r", "Sql", sql_expression="a < 'x & y'", action_expression="SET z = 1"),
    RuleConfig("r", "Correlation", correlation={"MessageId": "m", "Properties": {"k": "v", "n": 3, "big": 2**40}}),
])
def test_rule_entries_round_trip_through_the_sdk(rule: RuleConfig) -> None:
    data = atom.render_rule(RuleInfo("t", "s", rule, T0), "https://h", "ns")
    element = ET.fromstring(data)
    entry = models.RuleDescriptionEntry.deserialize(element)
    assert entry.content is not None
    props = RuleProperties._from_internal_entity("r", entry.content.rule_description)
    deserialize_rule_key_values(element, props)
    # What the SDK read, sent back, parses into the same rule.
    assert atom.parse_rule(rule_body(props), "r") == rule


def test_feed_has_a_next_link_only_when_more_pages_exist() -> None:
    entries = [atom.entity_entry(info("queue", QueueConfig(f"q{i}")), "https://h", "h", "ns") for i in range(2)]
    last = ET.fromstring(atom.render_feed("Queues", "/$Resources/queues?$skip=0&$top=5", entries, "https://h", T0))
    feed = models.QueueDescriptionFeed.deserialize(last)
    assert feed.entry is not None and feed.link is not None
    assert [e.title for e in feed.entry] == ["q0", "q1"] and len(feed.link) == 1
    more = ET.fromstring(atom.render_feed("Queues", "/x", entries, "https://h", T0, "/x?$skip=2&$top=2"))
    links = models.QueueDescriptionFeed.deserialize(more).link
    assert links is not None and links[1].href == "https://h/x?$skip=2&$top=2"


def test_error_body_is_what_the_sdk_reads() -> None:
    error = models.ServiceBusManagementError.deserialize(ET.fromstring(atom.render_error(409, "exists <here>")))
    assert (error.code, error.detail) == (409, "exists <here>")


def test_namespace_info_reads_back() -> None:
    entry = models.NamespacePropertiesEntry.deserialize(ET.fromstring(atom.render_namespace("ns", "https://h", T0,
                                                                                            T0 + 5)))
    assert entry.title == "ns" and entry.content is not None
    assert entry.content.namespace_properties.messaging_sku == "Standard"


def test_subscription_with_a_default_rule_description() -> None:
    body = (f'<entry xmlns="{atom.ATOM_NS}"><content type="application/xml"><SubscriptionDescription '
            f'xmlns="{atom.SB_NS}" xmlns:i="{atom.XSI_NS}"><LockDuration>PT10S</LockDuration>'
            '<DefaultRuleDescription><Filter i:type="SqlFilter"><SqlExpression>a = 1</SqlExpression></Filter>'
            '<Action i:type="EmptyRuleAction"/><Name>first</Name></DefaultRuleDescription>'
            "</SubscriptionDescription></content></entry>").encode()
    element = atom._find_description(body, ("SubscriptionDescription",))
    assert atom.parse_description(element) == {
        "LockDuration": 10.0, "DefaultRuleDescription": RuleConfig("first", "Sql", sql_expression="a = 1")}
