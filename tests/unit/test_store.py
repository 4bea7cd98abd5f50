"""SQLite store: group commit, restart recovery through the broker (messages, sequence numbers, DLQ,
scheduled and deferred messages, session state, duplicate history intact; locks dropped)."""

from __future__ import annotations

import json
import pickle
import struct
import uuid

from sbemulator.amqp.types import Symbol, Timestamp, UInt
from sbemulator.broker import MessageState, ReceiveMode
from sbemulator.model import BrokerMessage
from sbemulator.store import SqliteStore
from sbemulator.store.serialize import decode_message, encode_message
from sbemulator.store.sqlite import stored_rows
from tests.fixtures.broker import FakeClock, bodies, make_broker, msg, receiver

QUEUES = [
    {"Name": "q", "Properties": {"MaxDeliveryCount": 2, "RequiresDuplicateDetection": True}},
    {"Name": "sq", "Properties": {"RequiresSession": True}},
]
TOPICS = [{"Name": "t", "Subscriptions": [{"Name": "s"}]}]


def open_broker(path, clock):
    return make_broker(QUEUES, TOPICS, clock=clock, store=SqliteStore(path))[0]


def test_message_blob_roundtrip_keeps_amqp_types():
    m = BrokerMessage.from_incoming(
        msg(
            b"\x00body",
            properties_raw=b"\x00\x53\x73props",
            message_id="id",
            session_id="s",
            subject="label",
            time_to_live_ms=1000,
            application_properties={
                "u": UInt(7),
                "sym": Symbol("x"),
                "ts": Timestamp(5),
                "id": uuid.uuid4(),
                "b": b"\x01",
                "f": 1.5,
                "n": None,
            },
        )
    )
    m.dead_letter_reason, m.hops, m.properties_changed = "r", 2, True
    m.annotations = {Symbol("x-app-trace"): "abc", Symbol("x-count"): UInt(3)}
    back = decode_message(encode_message(m))
    assert back.annotations == m.annotations and type(back.annotations[Symbol("x-count")]) is UInt
    assert back.application_properties == m.application_properties
    assert type(back.application_properties["u"]) is UInt
    assert type(back.application_properties["sym"]) is Symbol
    assert (back.body_raw, back.properties_raw, back.message_id, back.session_id, back.subject) == (
        m.body_raw,
        m.properties_raw,
        "id",
        "s",
        "label",
    )
    assert (back.time_to_live_ms, back.dead_letter_reason, back.hops, back.properties_changed) == (
        1000,
        "r",
        2,
        True,
    )


def test_a_message_stored_with_a_json_head_still_loads():
    # Rows written before the head was pickled (store/serialize.py) hold it as JSON: same fields.
    m = BrokerMessage.from_incoming(msg(b"body", properties_raw=b"\x00\x53\x73p", message_id="id", session_id="s",
                                        time_to_live_ms=1000, application_properties={"u": UInt(7)}))
    m.dead_letter_reason, m.hops, m.header_fields = "r", 2, (True, 4, None)
    data = encode_message(m)
    lh, lp, la, ln = struct.unpack_from(">IIII", data, 0)
    head = pickle.loads(data[16:16 + lh])
    assert data[16:17] == b"\x80" and head[0] == "id"  # written as a pickle now
    old_head = json.dumps(head, separators=(",", ":")).encode()  # as encode_message wrote it before
    old = struct.pack(">IIII", len(old_head), lp, la, ln) + old_head + data[16 + lh:]
    for back in (decode_message(data), decode_message(old)):
        assert (back.message_id, back.session_id, back.time_to_live_ms, back.dead_letter_reason, back.hops,
                back.header_fields, back.body_raw, back.properties_raw, back.application_properties) == (
            "id", "s", 1000, "r", 2, (True, 4, None), b"body", b"\x00\x53\x73p", {"u": UInt(7)})


def test_the_senders_delivery_annotations_survive_the_store():
    # Service Bus passes a sender's delivery annotations on (the Go SDK's
    # TestSender_SendAMQPMessageWithMultipleByteSlicesInData): a durable store keeps them, with their AMQP types.
    m = BrokerMessage.from_incoming(msg(b"body", message_id="id"))
    m.delivery_annotations = {Symbol("x-opt-delivery-annotation-test"): "test-value", Symbol("n"): UInt(3)}
    back = decode_message(encode_message(m))
    assert back.delivery_annotations == m.delivery_annotations
    assert type(back.delivery_annotations[Symbol("n")]) is UInt
    plain = BrokerMessage.from_incoming(msg(b"body", message_id="id"))
    assert len(pickle.loads(encode_message(plain)[16:16 + struct.unpack_from(">I", encode_message(plain))[0]])) == 19
    assert decode_message(encode_message(plain)).delivery_annotations == {}


def test_restart_keeps_everything_but_locks(tmp_path):
    db = tmp_path / "data" / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    b.send(
        "q",
        [
            msg(b"locked", message_id="1"),
            msg(b"deferred", message_id="2"),
            msg(b"dead", message_id="3"),
            msg(b"plain", message_id="4"),
        ],
    )
    b.schedule("q", [msg(b"scheduled", scheduled_enqueue_time_ms=int((clock.now + 60) * 1000))])
    b.send("t", [msg(b"topic")])
    b.send("sq", [msg(b"s1", session_id="g")])
    r = receiver(b, "q")
    _locked, deferred, dead = r.take(3)
    r.defer(deferred.lock_token)
    r.dead_letter(dead.lock_token, "why", "desc")
    sr = receiver(b, "sq", session_id="g")
    b.set_session_state("sq", "g", b"state")
    sr.take(1)
    b.commit()
    b.send("q", [msg(b"uncommitted")])  # never committed: lost with the process
    b.store._db.close()  # simulate a crash: no final commit

    b2 = open_broker(db, clock)
    peeked = b2.peek("q", 0, 10)
    assert [(m.body_raw, m.state) for m in peeked] == [
        (b"locked", MessageState.ACTIVE),
        (b"deferred", MessageState.DEFERRED),
        (b"plain", MessageState.ACTIVE),
        (b"scheduled", MessageState.SCHEDULED),
    ]
    assert [m.sequence_number for m in peeked] == [1, 2, 4, 5]
    assert peeked[0].delivery_count == 1  # the delivery before the crash counted
    assert all(m.lock_token is None for m in peeked)
    (dl,) = b2.peek("q/$DeadLetterQueue", 0, 10)
    assert (dl.body_raw, dl.sequence_number, dl.dead_letter_reason) == (b"dead", 3, "why")
    assert dl.application_properties["DeadLetterErrorDescription"] == "desc"
    assert [m.body_raw for m in b2.peek("t/Subscriptions/s", 0, 10)] == [b"topic"]

    r2 = receiver(b2, "q")
    got = r2.take(5)
    assert bodies(got) == [b"locked", b"plain"]  # the lock of the dead process is gone
    assert got[0].header_delivery_count == 1
    for d in got:
        r2.complete(d.lock_token)
    (d,) = b2.receive_deferred("q", [2], ReceiveMode.PEEK_LOCK)
    b2.update_disposition("q", [d.lock_token], "completed")
    b2.send("q", [msg(b"next", message_id="5")])
    assert b2.peek("q", 6, 1)[0].sequence_number == 6  # counter survived (5 was scheduled)
    b2.send("q", [msg(b"dup", message_id="4")])  # duplicate history survived
    assert [m.body_raw for m in b2.peek("q", 7, 5)] == []
    sr2 = receiver(b2, "sq", session_id="g")  # session lock not persisted
    assert b2.get_session_state("sq", "g") == b"state"
    assert bodies(sr2.take(5)) == [b"s1"]
    clock.advance(60)
    b2.tick()
    # activated with a new sequence number, after "next" ("Message sequencing and timestamps")
    assert bodies(r2.take(5)) == [b"next", b"scheduled"]
    b2.close()

    b3 = open_broker(db, clock)
    assert [(m.body_raw, m.delivery_count) for m in b3.peek("q", 0, 10)] == [(b"next", 1), (b"scheduled", 1)]
    b3.close()


def test_sequence_numbers_survive_when_queue_is_empty(tmp_path):
    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    b.send("q", [msg(), msg()])
    r = receiver(b, "q", ReceiveMode.RECEIVE_AND_DELETE)
    r.take(5)
    b.close()
    b = open_broker(db, clock)
    b.send("q", [msg()])
    assert b.peek("q", 0, 5)[0].sequence_number == 3
    b.close()


def test_group_commit_coalesces_and_writes_nothing_for_send_then_complete(tmp_path):
    store = SqliteStore(tmp_path / "sb.db")
    b, _ = make_broker(QUEUES, TOPICS, store=store)
    b.send("q", [msg(message_id="x")])
    r = receiver(b, "q")
    r.complete(r.take(1)[0].lock_token)
    b.commit()
    assert len(stored_rows(store._db)) == 0
    assert store._db.execute("SELECT last_seq FROM sequences WHERE entity = 'q'").fetchone()[0] == 1
    assert not store.dirty
    b.close()


def test_runtime_entities_persist(tmp_path):
    from sbemulator.config import QueueConfig, RuleConfig, SubscriptionConfig, TopicConfig

    db = tmp_path / "sb.db"
    clock = FakeClock()
    b = open_broker(db, clock)
    b.create_queue(QueueConfig(name="Runtime", max_delivery_count=7))
    b.create_topic(
        TopicConfig(
            name="rt",
            subscriptions=(
                SubscriptionConfig(
                    name="only", rules=(RuleConfig(name="r", filter_type="Sql", sql_expression="a = 1"),)
                ),
            ),
        )
    )
    b.send("runtime", [msg(b"kept")])
    b.close()
    b = open_broker(db, clock)
    assert b.resolve("runtime").path == "Runtime"
    assert [m.body_raw for m in b.peek("Runtime", 0, 5)] == [b"kept"]
    b.send("rt", [msg(b"1", application_properties={"a": 1}), msg(b"2", application_properties={"a": 2})])
    assert [m.body_raw for m in b.peek("rt/Subscriptions/only", 0, 5)] == [b"1"]
    b.delete_entity("rt")
    b.close()
    b = open_broker(db, clock)
    assert "rt" not in [p.lower() for p in b.entity_paths()]
    b.close()


def test_in_memory_store_works():
    store = SqliteStore(None)
    b, _ = make_broker(QUEUES, store=store)
    b.send("q", [msg()])
    b.commit()
    assert len(stored_rows(store._db)) == 1


def test_topic_scheduled_and_session_subscription_survive_restart(tmp_path):
    db = tmp_path / "sb.db"
    clock = FakeClock()
    topics = [
        {
            "Name": "t",
            "Subscriptions": [{"Name": "plain"}, {"Name": "sess", "Properties": {"RequiresSession": True}}],
        }
    ]
    b = make_broker(topics=topics, clock=clock, store=SqliteStore(db))[0]
    b.send("t", [msg(b"now", session_id="g")])
    b.schedule("t", [msg(b"later", session_id="g", scheduled_enqueue_time_ms=int((clock.now + 30) * 1000))])
    b.close()
    b = make_broker(topics=topics, clock=clock, store=SqliteStore(db))[0]
    assert [m.body_raw for m in b.peek("t/Subscriptions/plain", 0, 5)] == [b"now"]
    clock.advance(30)
    b.tick()
    assert [(m.body_raw, m.sequence_number) for m in b.peek("t/Subscriptions/plain", 0, 5)] == [
        (b"now", 1),
        (b"later", 2),
    ]
    assert b.list_sessions("t/Subscriptions/sess") == ["g"]
    r = receiver(b, "t/Subscriptions/sess", next_available_session=True)
    assert r.try_acquire_session() == "g"
    assert bodies(r.take(5)) == [b"now", b"later"]
    b.close()
