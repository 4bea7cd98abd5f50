"""The web console in a real browser (headless Chromium) against a real emulator, with the real SDK
on the other side: what a user sees and does in the console must match what the SDK sees.

Dead-letter behaviour follows https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues
(reason and description kept with the dead-lettered message; the DLQ is a sub-queue of its entity).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from sbemulator import Emulator
from tests.fixtures.emulator import receive

from .conftest import screenshot

WAIT_S = 5
KEY_NAME = "RootManageSharedAccessKey"


def api_status(page: Any, path: str) -> int:
    """Call a console API from inside the page (with whatever cookies the browser holds)."""
    return page.evaluate(
        """async (path) => (await fetch(path, {headers: {'X-Requested-With': 'sbconsole'}})).status""", path)


def expect_focus(page: Any, element_id: str, timeout_ms: int = 15_000) -> None:
    """The focus lands on ``element_id``: the console moves it after rendering a view, which may finish
    a moment after the view is visible (several seconds later in a headless browser on a busy machine:
    the wait ends as soon as it has).

    The predicate is a function, not an expression string: Playwright evaluates a string with ``eval``
    on every poll after the first, which the console's Content-Security-Policy (no 'unsafe-eval')
    refuses, so a string wait failed with EvalError whenever the focus moved a moment late. A function
    is evaluated once, on the first poll, and then called."""
    try:
        page.wait_for_function("(id) => document.activeElement !== null && document.activeElement.id === id",
                               arg=element_id, timeout=timeout_ms)
    except Exception as error:
        focused = page.evaluate("() => document.activeElement && document.activeElement.id")
        raise AssertionError(f"focus is on {focused!r}, not {element_id!r}: {error}") from None


def sign_in_by_keyboard(page: Any, key: str) -> None:
    page.goto("/console/")
    # The page asks the server whether a session exists and then focuses the key field; wait for that,
    # or its focus() lands in the middle of the typing below.
    expect_focus(page, "key")
    page.get_by_label("Key name").focus()
    page.keyboard.press("Control+A")
    page.keyboard.type(KEY_NAME)
    page.keyboard.press("Tab")
    expect_focus(page, "key")
    page.keyboard.type(key)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Sign in"
    page.keyboard.press("Enter")
    page.locator("#overview-view").wait_for(state="visible")


def row(page: Any, path: str) -> Any:
    return page.locator(f'#entities tr[data-path="{path}"]')


def count(page: Any, label: str) -> Any:
    return page.locator(f'#entity-counts [data-count="{label}"] dd')


def test_nothing_without_signing_in(page: Any, console_emulator: Emulator) -> None:
    page.goto("/console/")
    page.get_by_role("heading", name="Sign in").wait_for()
    assert page.locator("#overview-view").is_hidden()
    for api in ("overview", "entity?path=orders", "messages?path=orders", "session"):
        assert api_status(page, f"/console/api/{api}") == 401
    assert "orders" not in page.content()
    # A wrong key is refused and still shows nothing.
    page.get_by_label("Key name").fill(KEY_NAME)
    page.get_by_label("Key", exact=True).fill("not-the-key")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").filter(has_text="not valid").wait_for()
    assert api_status(page, "/console/api/overview") == 401
    screenshot(page, "login")


def test_a_focus_wait_outlasts_a_late_focus_under_the_csp(page: Any, console_emulator: Emulator) -> None:
    """The wait helper keeps polling when its condition only becomes true later, under the console's
    CSP (a string predicate failed here with EvalError on its second poll)."""
    page.goto("/console/")
    expect_focus(page, "key")
    page.evaluate("""() => {
        document.activeElement.blur();
        setTimeout(() => document.getElementById('key').focus(), 300);
    }""")
    expect_focus(page, "key")


def test_send_peek_dead_letter_resubmit_receive(page: Any, console_emulator: Emulator,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    sign_in_by_keyboard(page, console_emulator.key)

    order = {"orderId": 42, "customer": "contoso", "lines": [{"sku": "A-1", "quantity": 2}]}
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([
                ServiceBusMessage(json.dumps(order), content_type="application/json", subject="order-created",
                                  application_properties={"Priority": "High", "Region": "eu"}),
                ServiceBusMessage("second order", application_properties={"Priority": "Low"}),
            ])
        with client.get_topic_sender("events") as sender:
            sender.send_messages([ServiceBusMessage("e1", application_properties={"Priority": "High"}),
                                  ServiceBusMessage("e2", application_properties={"Priority": "Low"})])

        # The overview updates by itself (no reload): two active in orders, the topic fanned out 2 + 1.
        page.locator("#live").wait_for()
        row(page, "orders").locator("td").nth(2).filter(has_text="2").wait_for()
        row(page, "events/Subscriptions/all").locator("td").nth(2).filter(has_text="2").wait_for()
        row(page, "events/Subscriptions/high").locator("td").nth(2).filter(has_text="1").wait_for()
        assert row(page, "orders").locator("td").nth(3).inner_text() == "0"
        screenshot(page, "overview")

        # Peek the first message: system properties, application properties, pretty-printed JSON body.
        row(page, "orders").get_by_role("link", name="orders").click()
        page.get_by_role("link", name="Messages").click()
        first = page.get_by_role("list", name="Messages").locator('li[data-seq="1"]')
        first.locator("summary").click()
        body = first.locator("pre.body")
        assert json.loads(body.inner_text()) == order
        assert '\n  "orderId": 42' in body.inner_text()  # indented: pretty-printed
        assert "order-created" in first.inner_text() and "application/json" in first.inner_text()
        assert "Region" in first.inner_text() and "eu" in first.inner_text()
        first.get_by_label("Hex").check()
        assert body.inner_text().startswith("7b 22")  # '{"'
        first.get_by_label("JSON").check()
        screenshot(page, "peek")

        # Dead-letter the first message through the SDK; the console's counts follow live.
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            [message] = receiver.receive_messages(max_wait_time=WAIT_S)
            assert message.sequence_number == 1
            receiver.dead_letter_message(message, reason="InvalidOrder", error_description="customer is on hold")
        count(page, "Dead-lettered").filter(has_text="1").wait_for()
        count(page, "Active").filter(has_text="1").wait_for()

        page.get_by_role("link", name="Dead-letter queue").click()
        dead = page.get_by_role("list", name="Dead-letter queue").locator('li[data-seq="1"]')
        assert "InvalidOrder" in dead.locator("summary").inner_text()
        dead.locator("summary").click()
        assert "customer is on hold" in dead.inner_text()
        screenshot(page, "dead-letter")

        # Resubmit it from the console; the SDK receives it again from the queue, without the reason.
        dead.get_by_role("button", name="Resubmit #1").click()
        page.get_by_role("status").filter(has_text="Resubmitted 1 message").wait_for()
        count(page, "Dead-lettered").filter(has_text="0").wait_for()
        count(page, "Active").filter(has_text="2").wait_for()
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            received = receiver.receive_messages(max_message_count=2, max_wait_time=WAIT_S)
            by_body = {str(m): m for m in received}
            assert sorted(by_body) == sorted([json.dumps(order), "second order"])
            again = by_body[json.dumps(order)]
            props = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                     for k, v in (again.application_properties or {}).items()}
            assert props == {"Priority": "High", "Region": "eu"}
            assert again.subject == "order-created" and again.content_type == "application/json"
            assert again.dead_letter_reason is None
            for m in received:
                receiver.complete_message(m)
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.peek_messages(max_message_count=10) == []

    # The key never appeared in a URL, nor in the emulator's log.
    assert not [u for u in urls if console_emulator.key in urllib.parse.unquote(u)]
    assert console_emulator.key not in caplog.text


def test_send_from_console_reaches_the_sdk(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=send")
    page.get_by_label("Body").fill('{"hello": "world"}')
    page.get_by_label("Content type").fill("application/json")
    page.get_by_label("Subject").fill("greeting")
    page.get_by_label("Time to live (seconds)").fill("600")
    page.get_by_role("button", name="Add property").click()
    page.get_by_label("Property name").fill("Attempt")
    page.get_by_label("Property value").fill("3")
    page.get_by_label("Property type").select_option("int")
    screenshot(page, "send")
    page.get_by_role("button", name="Send message").click()
    page.get_by_role("status").filter(has_text="Sent message").wait_for()
    count(page, "Active").filter(has_text="1").wait_for()
    # A scheduled one, an hour ahead, shows up as scheduled (not receivable yet).
    page.get_by_label("Body").fill("later")
    page.get_by_label("Scheduled enqueue time (local time)").fill("2099-01-01T10:00:00")
    page.get_by_role("button", name="Send message").click()
    count(page, "Scheduled").filter(has_text="1").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            received = receiver.receive_messages(max_message_count=5, max_wait_time=2)
            assert [str(m) for m in received] == ['{"hello": "world"}']
            [m] = received
            assert m.content_type == "application/json" and m.subject == "greeting"
            assert m.application_properties == {b"Attempt": 3}
            assert m.time_to_live is not None and m.time_to_live.total_seconds() == 600
            receiver.complete_message(m)
            [scheduled] = receiver.peek_messages(max_message_count=5)
            assert scheduled.scheduled_enqueue_time_utc is not None
            assert str(scheduled) == "later" and scheduled.scheduled_enqueue_time_utc.year == 2099


def test_entity_views_rules_sessions_and_purge(page: Any, console_emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("payments") as sender:
            sender.send_messages([ServiceBusMessage("p1", session_id="customer-7"),
                                  ServiceBusMessage("p2", session_id="customer-7"),
                                  ServiceBusMessage("p3", session_id="customer-9")])
        with client.get_queue_receiver("payments", session_id="customer-9", max_wait_time=WAIT_S) as receiver:
            receiver.session.set_state("step 2 of 3")
    sign_in_by_keyboard(page, console_emulator.key)

    # A topic: its subscriptions with each rule's filter and action text.
    page.goto("/console/#/entity/events")
    subs = page.locator("#subscriptions")
    subs.get_by_role("cell", name="Priority = 'High'").wait_for()
    assert "SET Escalated = 'yes'" in subs.inner_text() and "high-only" in subs.inner_text()
    assert "1=1" in subs.inner_text()  # the 'all' subscription's $Default rule
    screenshot(page, "topic")

    # A session queue: its sessions with message counts and state.
    page.goto("/console/#/entity/payments")
    sessions = page.locator("#sessions")
    sessions.get_by_role("cell", name="customer-7").wait_for()
    assert "step 2 of 3" in sessions.inner_text()
    assert sessions.locator("tr", has_text="customer-7").locator("td").nth(1).inner_text() == "2"
    screenshot(page, "sessions")

    # Every session's messages are listed on the queue's message page.
    page.goto("/console/#/entity/payments?tab=messages")
    page.get_by_label("Page size").select_option("10")
    page.locator('.messages li[data-seq="3"]').wait_for()
    # Purge everything of the queue; the SDK sees it empty.
    page.get_by_role("button", name="Purge entity (every message, dead-lettered too)").click()
    page.get_by_role("status").filter(has_text="Purged 3 messages").wait_for()
    count(page, "Active").filter(has_text="0").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("payments", session_id="customer-7", max_wait_time=1) as receiver:
            assert receiver.peek_messages(max_message_count=10) == []

    # Signing out ends the session: the API answers 401 again.
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in").wait_for()
    assert api_status(page, "/console/api/overview") == 401


def test_paging_through_messages(page: Any, console_emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(1, 13)])
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=messages")
    page.get_by_label("Page size").select_option("10")
    page.locator("#page-info").filter(has_text="1 to 10").wait_for()
    assert page.get_by_role("button", name="Previous page").is_disabled()
    page.get_by_role("button", name="Next page").click()
    page.locator("#page-info").filter(has_text="11 to 12").wait_for()
    assert page.get_by_role("button", name="Next page").is_disabled()
    page.get_by_role("button", name="Previous page").click()
    page.locator("#page-info").filter(has_text="1 to 10").wait_for()


def test_keyboard_only_navigation_keeps_focus_through_live_updates(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    expect_focus(page, "overview-title")  # focus moved to the new view
    # Tab to the first entity link; the live update (every 2 s) must not take the focus away.
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "orders":
            break
    assert page.evaluate("document.activeElement.textContent") == "orders"
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("counted"))
    row(page, "orders").locator("td").nth(2).filter(has_text="1").wait_for()
    assert page.evaluate("document.activeElement.textContent") == "orders"
    page.keyboard.press("Enter")
    page.locator("#entity-title").filter(has_text="orders").wait_for()
    expect_focus(page, "entity-title")
    # Tabs are links: Tab to 'Messages', Enter, and the focus stays on that tab in the new view.
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "tab-messages":
            break
    page.keyboard.press("Enter")
    page.get_by_role("list", name="Messages").wait_for()
    expect_focus(page, "tab-messages")


def test_resubmit_selected_then_all(page: Any, console_emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage(f"bad {i}") for i in range(1, 5)])
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            received = receive(receiver, 4, wait=WAIT_S)
            assert len(received) == 4, "the four messages did not arrive"
            for m in received:
                receiver.dead_letter_message(m, reason="Poison")
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=deadletter")
    dlq = page.get_by_role("list", name="Dead-letter queue")
    dlq.locator("li").nth(3).wait_for()
    page.get_by_label("Select message #1").check()
    page.get_by_label("Select message #3").check()
    page.get_by_role("button", name="Resubmit selected").click()
    page.get_by_role("status").filter(has_text="Resubmitted 2 messages").wait_for()
    count(page, "Dead-lettered").filter(has_text="2").wait_for()
    assert [li.get_attribute("data-seq") for li in dlq.locator("li").all()] == ["2", "4"]
    page.get_by_role("button", name="Resubmit all").click()  # confirm() is accepted by the fixture
    page.get_by_role("status").filter(has_text="Resubmitted 2 messages").wait_for()
    count(page, "Dead-lettered").filter(has_text="0").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            bodies = [str(m) for m in receiver.peek_messages(max_message_count=10)]
    assert bodies == ["bad 1", "bad 3", "bad 2", "bad 4"]  # resubmitted in that order
