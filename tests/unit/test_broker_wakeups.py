"""Wake-ups: a new message tells only the receivers that can take it now (issue 19, item 3).

A receiver whose link has no credit says so (``Receiver.set_waiting(False)``) and is not told about new
messages, so a send costs nothing per idle receiver; it takes on its next flow. Receivers that can take
are told least recently served first.
"""

from __future__ import annotations

from typing import Any

from sbemulator.broker import ReceiveMode
from tests.fixtures.broker import Recorder, bodies, make_broker, msg, receiver

Q = {"Name": "q"}
SQ = {"Name": "sq", "Properties": {"RequiresSession": True}}


def test_a_send_tells_no_idle_receiver_and_an_idle_receiver_still_takes_later() -> None:
    b, _ = make_broker([Q])
    idle = [receiver(b, "q") for _ in range(1000)]
    for r in idle:
        r.set_waiting(False)  # their links have no credit
    ready = receiver(b, "q")
    b.send("q", [msg(b"1")])
    assert sum(r.on_available.calls for r in idle) == 0
    assert ready.on_available.calls == 1
    # The next flow gives one of them credit: it takes what is there without having been told.
    idle[0].set_waiting(True)
    assert bodies(idle[0].take(5)) == [b"1"]


def test_a_receiver_that_stops_waiting_is_told_again_once_it_waits() -> None:
    b, _ = make_broker([Q])
    r = receiver(b, "q")
    r.set_waiting(False)
    b.send("q", [msg(b"1")])
    assert r.on_available.calls == 0
    r.set_waiting(True)
    b.send("q", [msg(b"2")])
    assert r.on_available.calls == 1
    assert bodies(r.take(5)) == [b"1", b"2"]


def test_receivers_that_can_take_are_told_least_recently_served_first() -> None:
    b, _ = make_broker([Q])
    told: list[str] = []
    links: dict[Any, Any] = {}

    def on_available(name: str):
        def call() -> None:
            told.append(name)
            if len(told) % 2 == 1:  # the first one told takes the message
                links[name].take(1)
        return call

    for name in ("a", "b"):
        links[name] = b.open_receiver("q", ReceiveMode.PEEK_LOCK, on_available(name))
    b.send("q", [msg(b"1")])
    b.send("q", [msg(b"2")])
    b.send("q", [msg(b"3")])
    assert told == ["a", "b", "b", "a", "a", "b"]


def test_a_session_message_tells_its_owner_or_the_receivers_still_seeking_a_session() -> None:
    b, _ = make_broker([SQ])
    owner = receiver(b, "sq", session_id="a")
    seeker = receiver(b, "sq", next_available_session=True)
    b.send("sq", [msg(b"b1", session_id="b")])
    assert (owner.on_available.calls, seeker.on_available.calls) == (0, 1)
    assert seeker.try_acquire_session() == "b"
    seeker.take(1)
    told = seeker.on_available.calls
    other = receiver(b, "sq", next_available_session=True)
    b.send("sq", [msg(b"c1", session_id="c")])
    # The seeker holds session b now: a message of session c is for the one still seeking.
    assert (owner.on_available.calls, seeker.on_available.calls) == (0, told)
    assert other.on_available.calls >= 1
    b.send("sq", [msg(b"a1", session_id="a")])
    assert owner.on_available.calls == 1


def test_a_closed_receiver_is_no_longer_told() -> None:
    b, _ = make_broker([Q])
    r = receiver(b, "q")
    told = r.on_available
    assert isinstance(told, Recorder)
    r.close()  # (a plain receiver's close also cuts its wake-up: its orphaned locks keep it)
    r.set_waiting(True)
    b.send("q", [msg(b"1")])
    assert told.calls == 0
