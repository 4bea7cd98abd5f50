"""Serialisation of a stored message's immutable parts into one blob.

Application properties go through the AMQP codec so their AMQP types (uint, symbol, timestamp,
...) survive a restart unchanged; values the codec cannot encode fall back to pickle (the database
is the emulator's own file, never shared input). The first byte of that section says which.

The head (message id, session id, TTL, dead-letter fields, ...) is a pickled list: ``pickle.loads`` of
it costs a sixth of the ``json.loads`` that older rows were written with (a paged-in message is decoded
on the delivery path; ``pickle.dumps`` is cheaper than ``json.dumps`` on the send path too). Rows
written as JSON still load: a JSON head starts with ``[``, a pickle with its protocol opcode.
"""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

from sbemulator.amqp import codec
from sbemulator.model import BrokerMessage

_LENGTHS = struct.Struct(">IIII")
_CODEC = b"A"
_PICKLE = b"P"
_HEAD_PROTOCOL = 4  # Python 3.4 on; its first byte is the PROTO opcode
_PICKLE_HEAD = b"\x80"


def encode_properties(props: dict[str, Any]) -> bytes:
    if not props:
        return b""
    try:
        return _CODEC + codec.encode(props)
    except Exception:
        return _PICKLE + pickle.dumps(props, protocol=pickle.HIGHEST_PROTOCOL)


def decode_properties(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    if data[:1] == _CODEC:
        value, _ = codec.decode(data, 1)
        return dict(value) if value else {}
    if data[:1] == _PICKLE:
        return pickle.loads(data[1:])
    raise ValueError("unknown application-properties encoding in store")


def encode_message(msg: BrokerMessage) -> bytes:
    """Everything except the mutable columns (state, delivery count, times, sequence number)."""
    fields: list[Any] = [
        msg.message_id,
        msg.correlation_id,
        msg.session_id,
        msg.subject,
        msg.to,
        msg.reply_to,
        msg.reply_to_session_id,
        msg.content_type,
        msg.partition_key,
        msg.time_to_live_ms,
        msg.scheduled_enqueue_time_ms,
        msg.size,
        msg.enqueue_sequence_number,
        msg.dead_letter_source,
        msg.dead_letter_reason,
        msg.dead_letter_description,
        msg.hops,
        msg.properties_changed,
        msg.header_fields,
    ]
    if msg.delivery_annotations:  # rare: the head has a 20th field only then
        fields.append(encode_properties(msg.delivery_annotations))
    head = pickle.dumps(fields, protocol=_HEAD_PROTOCOL)
    props = encode_properties(msg.application_properties)
    annotations = encode_properties(msg.annotations)
    return b"".join(
        (
            _LENGTHS.pack(len(head), len(msg.properties_raw), len(props), len(annotations)),
            head,
            msg.properties_raw,
            props,
            annotations,
            msg.body_raw,
        )
    )


def decode_message(data: bytes) -> BrokerMessage:
    lh, lp, la, ln = _LENGTHS.unpack_from(data, 0)
    off = _LENGTHS.size
    raw_head = data[off : off + lh]
    head = pickle.loads(raw_head) if raw_head[:1] == _PICKLE_HEAD else json.loads(raw_head)
    off += lh
    properties_raw = bytes(data[off : off + lp])
    off += lp
    app = decode_properties(bytes(data[off : off + la]))
    off += la
    annotations = decode_properties(bytes(data[off : off + ln]))
    off += ln
    body = bytes(data[off:])
    (
        message_id,
        correlation_id,
        session_id,
        subject,
        to,
        reply_to,
        reply_to_session_id,
        content_type,
        partition_key,
        ttl,
        scheduled,
        size,
        enqueue_seq,
        dl_source,
        dl_reason,
        dl_desc,
        hops,
        changed,
    ) = head[:18]
    # durable, priority, first-acquirer as sent; messages stored before they were kept have none
    header_fields = tuple(head[18]) if len(head) > 18 and head[18] is not None else None
    # the sender's delivery annotations; messages stored before they were kept have none
    delivery_annotations = decode_properties(head[19]) if len(head) > 19 else {}
    return BrokerMessage(
        properties_raw=properties_raw,
        application_properties=app,
        body_raw=body,
        message_id=message_id,
        correlation_id=correlation_id,
        session_id=session_id,
        subject=subject,
        to=to,
        reply_to=reply_to,
        reply_to_session_id=reply_to_session_id,
        content_type=content_type,
        partition_key=partition_key,
        time_to_live_ms=ttl,
        scheduled_enqueue_time_ms=scheduled,
        size=size,
        enqueue_sequence_number=enqueue_seq,
        dead_letter_source=dl_source,
        dead_letter_reason=dl_reason,
        dead_letter_description=dl_desc,
        hops=hops,
        annotations=annotations,
        properties_changed=changed,
        header_fields=header_fields,
        delivery_annotations=delivery_annotations,
    )
