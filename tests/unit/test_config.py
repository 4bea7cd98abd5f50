"""Config.json loading: the official emulator's schema, defaults, durations and every kind of error
(the message must name the file, the JSON path and the problem)."""

from __future__ import annotations

import copy
import json

import pytest

from sbemulator.config import (
    ConfigError,
    QueueConfig,
    load_config,
    load_namespaces,
    parse_config,
    parse_duration,
    parse_namespaces,
)

OFFICIAL_SAMPLE = {
    "UserConfig": {
        "Namespaces": [
            {
                "Name": "sbemulatorns",
                "Queues": [
                    {
                        "Name": "queue.1",
                        "Properties": {
                            "DeadLetteringOnMessageExpiration": False,
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "ForwardDeadLetteredMessagesTo": "",
                            "ForwardTo": "",
                            "LockDuration": "PT1M",
                            "MaxDeliveryCount": 3,
                            "RequiresDuplicateDetection": False,
                            "RequiresSession": False,
                        },
                    }
                ],
                "Topics": [
                    {
                        "Name": "topic.1",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT1H",
                            "DuplicateDetectionHistoryTimeWindow": "PT20S",
                            "RequiresDuplicateDetection": False,
                        },
                        "Subscriptions": [
                            {
                                "Name": "subscription.1",
                                "Properties": {
                                    "DeadLetteringOnMessageExpiration": False,
                                    "DefaultMessageTimeToLive": "PT1H",
                                    "LockDuration": "PT1M",
                                    "MaxDeliveryCount": 3,
                                    "ForwardDeadLetteredMessagesTo": "",
                                    "ForwardTo": "",
                                    "RequiresSession": False,
                                },
                                "Rules": [
                                    {
                                        "Name": "app-prop-filter-1",
                                        "Properties": {
                                            "FilterType": "Correlation",
                                            "CorrelationFilter": {
                                                "ContentType": "application/text",
                                                "CorrelationId": "id1",
                                                "Label": "subject1",
                                                "MessageId": "msgid1",
                                                "ReplyTo": "someQueue",
                                                "ReplyToSessionId": "sessionId",
                                                "SessionId": "session1",
                                                "To": "xyz",
                                                "Properties": {"prop1": "value1"},
                                            },
                                        },
                                    },
                                    {
                                        "Name": "sql-filter-1",
                                        "Properties": {
                                            "FilterType": "Sql",
                                            "SqlFilter": {"SqlExpression": "sys.MessageId = '123456'"},
                                            "Action": {"SqlExpression": "SET sys.To = 'Entity'"},
                                        },
                                    },
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
        "Logging": {"Type": "File"},
    }
}


def parse(data, source="cfg.json"):
    return parse_config(data, source)


def mutated(fn):
    data = copy.deepcopy(OFFICIAL_SAMPLE)
    fn(data["UserConfig"]["Namespaces"][0])
    return data


def test_official_sample_parses():
    ns = parse(OFFICIAL_SAMPLE)
    assert ns.name == "sbemulatorns"
    (q,) = ns.queues
    assert q == QueueConfig(
        name="queue.1",
        lock_duration=60.0,
        max_delivery_count=3,
        default_message_ttl=3600.0,
        duplicate_detection_window=20.0,
    )
    (t,) = ns.topics
    (s,) = t.subscriptions
    corr, sql = s.rules
    assert corr.filter_type == "Correlation" and corr.correlation["Label"] == "subject1"
    assert corr.correlation["Properties"] == {"prop1": "value1"}
    assert (
        sql.sql_expression == "sys.MessageId = '123456'" and sql.action_expression == "SET sys.To = 'Entity'"
    )
    assert ns.logging == {"Type": "File"}


def test_defaults_follow_the_official_emulator():
    ns = parse(
        {
            "UserConfig": {
                "Namespaces": [
                    {
                        "Name": "ns",
                        "Queues": [{"Name": "q"}],
                        "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s"}]}],
                    }
                ]
            }
        }
    )
    q = ns.queues[0]
    assert (q.lock_duration, q.max_delivery_count, q.default_message_ttl, q.duplicate_detection_window) == (
        60.0,
        3,
        3600.0,
        20.0,
    )
    assert q.max_message_size_kb == 256 and q.forward_to is None and not q.requires_session
    s = ns.topics[0].subscriptions[0]
    assert s.rules == () and s.dead_lettering_on_filter_evaluation_exceptions is True


def test_extensions_sas_keys_and_message_size():
    ns = parse(
        mutated(
            lambda n: (
                n.__setitem__("SasKeys", [{"KeyName": "k", "Key": "secret"}]),
                n["Queues"][0]["Properties"].__setitem__("MaxMessageSizeInKilobytes", 1024),
            )
        )
    )
    assert ns.sas_keys[0].key_name == "k" and ns.sas_keys[0].key == "secret"
    assert ns.queues[0].max_message_size_kb == 1024


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("PT1H", 3600),
        ("P14D", 14 * 86400),
        ("PT20S", 20),
        ("PT1M30S", 90),
        ("PT0.5S", 0.5),
        ("P1DT2H", 93600),
        ("P1W", 7 * 86400),
        ("00:01:00", 60),
        ("1.00:00:00", 86400),
        ("00:00:00.250", 0.25),
        ("pt5m", 300),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1X", "00:61:00", "abc", "P1H"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def q_prop(key, value):
    return lambda n: n["Queues"][0]["Properties"].__setitem__(key, value)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        (q_prop("LockDuration", "PT10M"), "Queues[0].Properties.LockDuration", "5 minutes"),
        (q_prop("LockDuration", "soon"), "Queues[0].Properties.LockDuration", "invalid duration"),
        (
            q_prop("DefaultMessageTimeToLive", 5),
            "Queues[0].Properties.DefaultMessageTimeToLive",
            "expected a string",
        ),
        (q_prop("MaxDeliveryCount", 0), "Queues[0].Properties.MaxDeliveryCount", "at least 1"),
        (q_prop("MaxDeliveryCount", "3"), "Queues[0].Properties.MaxDeliveryCount", "expected an integer"),
        (q_prop("RequiresSession", "yes"), "Queues[0].Properties.RequiresSession", "true or false"),
        (q_prop("LockDurationz", "PT1M"), "Queues[0].Properties.LockDurationz", "unknown property"),
        (q_prop("ForwardTo", "missing"), "Queues[0].Properties.ForwardTo", "not a queue or topic"),
        (q_prop("ForwardTo", "QUEUE.1"), "Queues[0].Properties.ForwardTo", "itself"),
        (lambda n: n["Queues"].append({"Name": "Queue.1"}), "Queues[1].Name", "duplicate entity name"),
        (
            lambda n: n["Topics"].append({"Name": "QUEUE.1", "Subscriptions": []}),
            "Topics[1].Name",
            "duplicate",
        ),
        (lambda n: n["Queues"].append({"Name": "-bad"}), "Queues[1].Name", "invalid name"),
        (lambda n: n["Queues"].append({"Name": "x" * 261}), "Queues[1].Name", "invalid name"),
        (lambda n: n["Queues"].append({"Nmae": "q"}), "Queues[1].Nmae", "unknown property"),
        (
            lambda n: n["Topics"][0]["Subscriptions"].append({"Name": "a/b"}),
            "Subscriptions[1].Name",
            "invalid name",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"].append({"Name": "Subscription.1"}),
            "Subscriptions[1].Name",
            "duplicate subscription",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"].append(
                {"Name": "r", "Properties": {"FilterType": "Sql"}}
            ),
            "Subscriptions[0].Rules[2].Properties",
            "SqlFilter",
        ),
        (lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"].append({"Name": "r"}), "Rules[2]", "filter"),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"].append(
                {"Name": "r", "Properties": {"FilterType": "Correlation"}}
            ),
            "Rules[2].Properties",
            "CorrelationFilter",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"].append(
                {"Name": "r", "Properties": {"FilterType": "Regex"}}
            ),
            "Rules[2].Properties.FilterType",
            "'Sql'",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"].append(
                {"Name": "r", "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = = 1"}}}
            ),
            "Rules[2].Properties.SqlFilter.SqlExpression",
            "invalid rule",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Rules"][0]["Properties"][
                "CorrelationFilter"
            ].__setitem__("Lable", "x"),
            "CorrelationFilter.Lable",
            "unknown property",
        ),
        (
            lambda n: n["Topics"][0]["Subscriptions"][0]["Properties"].__setitem__("LockDuration", "PT6M"),
            "Subscriptions[0].Properties.LockDuration",
            "5 minutes",
        ),
        (lambda n: n.__setitem__("Queues", {}), "Namespaces[0].Queues", "expected an array"),
        (lambda n: n.__setitem__("SasKeys", [{"KeyName": "k"}]), "SasKeys[0]", "'Key'"),
    ],
)
def test_errors_name_file_path_and_problem(change, path, words):
    with pytest.raises(ConfigError) as err:
        parse(mutated(change), "infra/servicebus.json")
    text = str(err.value)
    assert all(line.startswith("infra/servicebus.json: UserConfig.Namespaces[0].") for line in err.value.problems)
    assert path in text, text
    assert words in text, text


def test_structural_errors():
    for data, words in [
        ({}, "UserConfig"),
        ([], "expected an object"),
        ({"UserConfig": {"Namespaces": []}}, "at least one namespace"),
        ({"UserConfig": {"Namespaces": [{"Name": "a"}, {"Name": "A"}]}}, r"Namespaces\[1\]\.Name: duplicate namespace"),
        ({"UserConfig": {"Namespaces": [{"Queues": []}]}}, "'Name'"),
    ]:
        with pytest.raises(ConfigError, match=words):
            parse(data)


def test_load_config_file_errors(tmp_path):
    good = tmp_path / "Config.json"
    good.write_text(json.dumps(OFFICIAL_SAMPLE), encoding="utf-8")
    assert load_config(good).queues[0].name == "queue.1"
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "UserConfig": ,\n}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json: invalid JSON at line 2"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")


def test_several_namespaces_each_with_its_own_entities_and_keys(tmp_path):
    """docs/emulator.md, "Several namespaces": every entry of UserConfig.Namespaces is a namespace of its
    own; entity names and forwarding targets are checked within each one; the first is what the
    one-namespace loaders return."""
    data = {"UserConfig": {"Namespaces": [
        {"Name": "orders", "Queues": [{"Name": "q", "Properties": {}},
                                      {"Name": "fwd", "Properties": {"ForwardTo": "q"}}]},
        {"Name": "billing", "Queues": [{"Name": "q", "Properties": {}}],
         "Topics": [{"Name": "t", "Subscriptions": [{"Name": "s"}]}],
         "SasKeys": [{"KeyName": "RootManageSharedAccessKey", "Key": "billing-key"}]},
    ]}}
    first, second = parse_namespaces(data)
    assert (first.name, [q.name for q in first.queues]) == ("orders", ["q", "fwd"])
    assert (second.name, [q.name for q in second.queues], second.topics[0].name) == ("billing", ["q"], "t")
    assert [(k.key_name, k.key) for k in second.sas_keys] == [("RootManageSharedAccessKey", "billing-key")]
    assert parse_config(data) == first
    path = tmp_path / "Config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_namespaces(path) == (first, second) and load_config(path) == first


def test_several_namespaces_report_every_problem_with_its_namespace():
    """A forwarding target of another namespace is not a target (auto-forwarding stays within a
    namespace), and problems in several namespaces are reported together."""
    data = {"UserConfig": {"Namespaces": [
        {"Name": "a", "Queues": [{"Name": "qa", "Properties": {}}]},
        {"Name": "b", "Queues": [{"Name": "qb", "Properties": {"ForwardTo": "qa"}}]},
        {"Name": "c", "Queues": [{"Name": "qc", "Properties": {"LockDuration": "nope"}}]},
    ]}}
    with pytest.raises(ConfigError) as err:
        parse_namespaces(data, "cfg.json")
    text = str(err.value)
    assert "2 problems" in text, text
    assert "UserConfig.Namespaces[1].Queues[0].Properties.ForwardTo: forwarding target 'qa'" in text, text
    assert "UserConfig.Namespaces[2].Queues[0].Properties.LockDuration" in text, text


def test_a_bad_name_does_not_hide_the_entitys_other_mistakes():
    """Every mistake at once (issue #19): an entity, subscription or rule whose name breaks the naming
    rules is still checked property by property, and every unknown key is reported, not only the first."""
    data = {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [
        {"Name": "bad name!", "Extra": 1, "Other": 2, "Properties": {"LockDuration": "yy"}},
    ], "Topics": [{"Name": "t!", "Subscriptions": [
        {"Name": "s s", "Properties": {"MaxDeliveryCount": 0}, "Rules": [
            {"Name": "r r", "Properties": {"FilterType": "Correlation",
                                           "CorrelationFilter": {"Label": "x", "Bogus": 3}}}]},
    ]}]}]}}
    with pytest.raises(ConfigError) as err:
        parse_namespaces(data, "cfg.json")
    problems = err.value.problems
    where = [line.split(": ")[1] for line in problems]
    assert where == [
        "UserConfig.Namespaces[0].Queues[0].Extra",
        "UserConfig.Namespaces[0].Queues[0].Other",
        "UserConfig.Namespaces[0].Queues[0].Name",
        "UserConfig.Namespaces[0].Queues[0].Properties.LockDuration",
        "UserConfig.Namespaces[0].Topics[0].Name",
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Name",
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Properties.MaxDeliveryCount",
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Name",
        "UserConfig.Namespaces[0].Topics[0].Subscriptions[0].Rules[0].Properties.CorrelationFilter.Bogus",
    ], problems


@pytest.mark.parametrize(("size_kb", "accepted"), [(102400, True), (102401, False)])
def test_the_file_takes_message_sizes_up_to_premiums_100_mb(size_kb, accepted):
    """'Service Bus quotas': 256 KB on Standard, up to 100 MB on Premium ('Large messages support'); the
    file may ask for any size Service Bus has, not more."""
    data = mutated(lambda n: n["Queues"][0]["Properties"].__setitem__("MaxMessageSizeInKilobytes", size_kb))
    if accepted:
        assert parse(data).queues[0].max_message_size_kb == size_kb
    else:
        with pytest.raises(ConfigError, match=r"MaxMessageSizeInKilobytes 102401 exceeds the maximum.*100 MB"):
            parse(data)
