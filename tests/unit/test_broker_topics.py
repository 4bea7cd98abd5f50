"""Topic fan-out through subscription rules (SQL, correlation, actions), per-subscription copies,
subscription TTL/DLQ/forwarding."""

from __future__ import annotations

from sbemulator.broker import ReceiveMode
from tests.fixtures.broker import bodies, make_broker, msg, receiver


def sql(name: str, expr: str, action: str | None = None) -> dict:
    props: dict = {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expr}}
    if action:
        props["Action"] = {"SqlExpression": action}
    return {"Name": name, "Properties": props}


PRIORITY_TOPIC = {
    "Name": "messages",
    "Subscriptions": [
        {"Name": "highPriority", "Rules": [sql("high", "Priority = 'High'")]},
        {"Name": "lowPriority", "Rules": [sql("low", "Priority = 'Low'")]},
        {"Name": "all"},
        {"Name": "none", "Rules": [sql("never", "1=0")]},
        {
            "Name": "corr",
            "Rules": [
                {
                    "Name": "c",
                    "Properties": {
                        "FilterType": "Correlation",
                        "CorrelationFilter": {"Label": "invoice", "Properties": {"Priority": "High"}},
                    },
                }
            ],
        },
    ],
}


def test_fan_out_by_rules():
    b, _ = make_broker(topics=[PRIORITY_TOPIC])
    b.send(
        "messages",
        [
            msg(b"h", application_properties={"Priority": "High"}, subject="invoice"),
            msg(b"l", application_properties={"Priority": "Low"}),
            msg(b"n"),
        ],
    )

    def content(sub: str) -> list[bytes]:
        return [m.body_raw for m in b.peek(f"messages/Subscriptions/{sub}", 0, 10)]

    assert content("highPriority") == [b"h"]
    assert content("lowPriority") == [b"l"]
    assert content("all") == [b"h", b"l", b"n"]
    assert content("none") == []
    assert content("corr") == [b"h"]
    # every subscription numbers its own copies
    assert [m.sequence_number for m in b.peek("messages/Subscriptions/all", 0, 10)] == [1, 2, 3]
    assert b.peek("messages/Subscriptions/lowPriority", 0, 10)[0].sequence_number == 1
    b.send("messages", [msg(b"l2", application_properties={"Priority": "Low"})])
    assert [m.sequence_number for m in b.peek("messages/Subscriptions/lowPriority", 0, 10)] == [1, 2]
    assert [m.sequence_number for m in b.peek("messages/Subscriptions/all", 0, 10)] == [1, 2, 3, 4]


def test_message_matching_no_subscription_is_dropped_successfully():
    b, _ = make_broker(topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [sql("r", "1=0")]}]}])
    b.send("t", [msg()])
    assert b.peek("t/Subscriptions/s", 0, 10) == []


def test_each_subscription_gets_its_own_copy_and_actions():
    b, _ = make_broker(
        topics=[
            {
                "Name": "t",
                "Subscriptions": [
                    {
                        "Name": "a",
                        "Rules": [sql("r", "1=1", "SET tagged = 'a'; SET sys.Label = 'relabelled'")],
                    },
                    {"Name": "b"},
                ],
            }
        ]
    )
    b.send("t", [msg(application_properties={"x": 1}, subject="orig")])
    (ma,) = b.peek("t/Subscriptions/a", 0, 1)
    (mb,) = b.peek("t/Subscriptions/b", 0, 1)
    assert ma is not mb
    # a rule with an action makes its own copy, named by RuleName ("Topic filters and actions")
    assert ma.application_properties == {"x": 1, "tagged": "a", "RuleName": "r"}
    assert mb.application_properties == {"x": 1}
    assert ma.subject == "relabelled" and ma.properties_changed is True
    assert mb.subject == "orig" and mb.properties_changed is False
    ra = receiver(b, "t/Subscriptions/a")
    ra.complete(ra.take(1)[0].lock_token)
    assert len(b.peek("t/Subscriptions/b", 0, 1)) == 1


def test_subscription_lock_and_max_delivery_and_dlq():
    b, clock = make_broker(
        topics=[
            {
                "Name": "t",
                "Subscriptions": [
                    {"Name": "s", "Properties": {"MaxDeliveryCount": 2, "LockDuration": "PT10S"}}
                ],
            }
        ]
    )
    b.send("t", [msg(b"p")])
    r = receiver(b, "t/Subscriptions/s")
    r.abandon(r.take(1)[0].lock_token)
    r.take(1)
    clock.advance(10)
    b.tick()
    (m,) = b.peek("t/Subscriptions/s/$DeadLetterQueue", 0, 5)
    assert m.dead_letter_reason == "MaxDeliveryCountExceeded" and m.body_raw == b"p"
    dlq = receiver(b, "T/subscriptions/S/$deadletterqueue", ReceiveMode.RECEIVE_AND_DELETE)
    assert bodies(dlq.take(5)) == [b"p"]


def test_subscription_ttl_is_min_of_topic_subscription_and_message():
    b, clock = make_broker(
        topics=[
            {
                "Name": "t",
                "Properties": {"DefaultMessageTimeToLive": "PT1M"},
                "Subscriptions": [
                    {
                        "Name": "short",
                        "Properties": {
                            "DefaultMessageTimeToLive": "PT10S",
                            "DeadLetteringOnMessageExpiration": True,
                        },
                    },
                    {"Name": "long", "Properties": {"DefaultMessageTimeToLive": "PT1H"}},
                ],
            }
        ]
    )
    b.send("t", [msg()])
    clock.advance(10)
    b.tick()
    assert b.peek("t/Subscriptions/short", 0, 5) == []
    assert (
        b.peek("t/Subscriptions/short/$DeadLetterQueue", 0, 5)[0].dead_letter_reason == "TTLExpiredException"
    )
    assert len(b.peek("t/Subscriptions/long", 0, 5)) == 1
    clock.advance(50)
    b.tick()
    assert b.peek("t/Subscriptions/long", 0, 5) == []


def test_subscription_forward_to_queue():
    b, _ = make_broker(
        queues=[{"Name": "leveling"}],
        topics=[{"Name": "t", "Subscriptions": [{"Name": "fwd", "Properties": {"ForwardTo": "leveling"}}]}],
    )
    b.send("t", [msg(b"1")])
    assert b.peek("t/Subscriptions/fwd", 0, 5) == []
    (m,) = b.peek("leveling", 0, 5)
    assert m.body_raw == b"1" and m.enqueue_sequence_number == 1


def test_session_subscription_dead_letters_messages_without_session_id():
    b, _ = make_broker(
        topics=[
            {
                "Name": "t",
                "Subscriptions": [
                    {"Name": "sess", "Properties": {"RequiresSession": True}},
                    {"Name": "plain"},
                ],
            }
        ]
    )
    b.send("t", [msg(b"nosession"), msg(b"withsession", session_id="g1")])
    (dl,) = b.peek("t/Subscriptions/sess/$DeadLetterQueue", 0, 5)
    assert dl.body_raw == b"nosession" and dl.dead_letter_reason == "Session ID is null."
    assert [m.body_raw for m in b.peek("t/Subscriptions/sess", 0, 5)] == [b"withsession"]
    assert len(b.peek("t/Subscriptions/plain", 0, 5)) == 2


def test_filter_evaluation_error_dead_letters_when_enabled():
    b, _ = make_broker(
        topics=[
            {
                "Name": "t",
                "Subscriptions": [
                    {"Name": "bad", "Rules": [sql("r", "x / 0 = 1")]},
                    {
                        "Name": "quiet",
                        "Properties": {"DeadLetteringOnFilterEvaluationExceptions": False},
                        "Rules": [sql("r", "x / 0 = 1")],
                    },
                ],
            }
        ]
    )
    b.send("t", [msg(application_properties={"x": 1})])
    (dl,) = b.peek("t/Subscriptions/bad/$DeadLetterQueue", 0, 5)
    assert dl.dead_letter_reason == "FilterEvaluationException"
    assert b.peek("t/Subscriptions/bad", 0, 5) == []
    assert b.peek("t/Subscriptions/quiet/$DeadLetterQueue", 0, 5) == []


def test_scheduled_message_on_topic_fans_out_when_due():
    b, clock = make_broker(topics=[{"Name": "t", "Subscriptions": [{"Name": "a"}, {"Name": "b"}]}])
    b.send("t", [msg(b"now")])
    (seq,) = b.schedule("t", [msg(b"later", scheduled_enqueue_time_ms=int((clock.now + 30) * 1000))])
    assert seq == 2  # numbered by the topic (its counter also saw "now"), which holds it until due
    assert [m.body_raw for m in b.peek("t/Subscriptions/a", 0, 5)] == [b"now"]
    clock.advance(30)
    b.tick()
    for sub in ("a", "b"):
        assert [(m.body_raw, m.sequence_number) for m in b.peek(f"t/Subscriptions/{sub}", 0, 5)] == [
            (b"now", 1),
            (b"later", 2),
        ]
    (seq2,) = b.schedule("t", [msg(scheduled_enqueue_time_ms=int((clock.now + 30) * 1000))])
    b.cancel_scheduled("t", [seq2])
    clock.advance(30)
    b.tick()
    assert len(b.peek("t/Subscriptions/a", 0, 5)) == 2


def test_topic_duplicate_detection():
    b, _ = make_broker(
        topics=[
            {
                "Name": "t",
                "Properties": {"RequiresDuplicateDetection": True},
                "Subscriptions": [{"Name": "s"}],
            }
        ]
    )
    b.send("t", [msg(message_id="a")])
    b.send("t", [msg(message_id="a")])
    assert len(b.peek("t/Subscriptions/s", 0, 5)) == 1


def test_add_rule_by_keywords_and_bad_rule():
    import pytest

    from sbemulator.broker import EntityAlreadyExistsError, RuleError

    b, _ = make_broker(
        topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [sql("never", "1=0")]}]}]
    )
    b.add_rule(
        "t/Subscriptions/s", "vip", filter_type="Correlation", correlation={"Properties": {"vip": True}}
    )
    with pytest.raises(RuleError) as err:
        b.add_rule("t/Subscriptions/s", "broken", sql_expression="a = = 1")
    assert err.value.condition == "com.microsoft:argument-error"
    with pytest.raises(EntityAlreadyExistsError):
        b.add_rule("t/Subscriptions/s", "VIP", sql_expression="1=1")
    b.send("t", [msg(b"v", application_properties={"vip": True}), msg(b"n")])
    assert [m.body_raw for m in b.peek("t/Subscriptions/s", 0, 5)] == [b"v"]
    assert [r.name for r in b.list_rules("t/Subscriptions/s")] == ["never", "vip"]
