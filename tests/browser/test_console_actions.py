"""Each console action in a real browser (headless Chromium) against a real emulator, checked from the
other side with the real SDK: receive and settle, edit and re-send, peek from a sequence number,
download a body, entity and rule management, and the fixed bugs (issue 21).

Settlement follows https://learn.microsoft.com/azure/service-bus-messaging/message-transfers-locks-settlement
(peek-lock: complete, abandon, defer, dead-letter; receive-and-delete removes at once); deferral
https://learn.microsoft.com/azure/service-bus-messaging/message-deferral; dead-letter reason and
description https://learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import ServiceBusError
from azure.servicebus.management import CorrelationRuleFilter, ServiceBusAdministrationClient

from sbemulator import Emulator
from sbemulator.runtime.snapshot import snapshot_file

from .conftest import TOPOLOGY, UI_TIMEOUT_MS, screenshot
from .test_console import WAIT_S, count, expect_focus, row, sign_in_by_keyboard


def admin_client(emu: Emulator) -> ServiceBusAdministrationClient:
    assert emu.admin_connection_string is not None
    return ServiceBusAdministrationClient.from_connection_string(emu.admin_connection_string,
                                                                 connection_verify=emu.ca_path)


def send(emu: Emulator, queue: str, *messages: ServiceBusMessage) -> None:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_sender(queue) as sender:
            sender.send_messages(list(messages))


def peek_all(emu: Emulator, queue: str, sub_queue: ServiceBusSubQueue | None = None) -> list[Any]:
    with ServiceBusClient.from_connection_string(emu.connection_string) as client:
        with client.get_queue_receiver(queue, sub_queue=sub_queue) as receiver:
            return list(receiver.peek_messages(max_message_count=50))


def receive_in_console(page: Any, path: str, mode: str = "peeklock", number: int = 1) -> Any:
    page.goto(f"/console/#/entity/{path}?tab=receive")
    page.get_by_label("Receive mode").select_option(mode)
    page.get_by_label("Number of messages").fill(str(number))
    page.get_by_role("button", name="Receive", exact=True).click()
    return page.get_by_role("list", name="Received messages")


def test_receive_peek_lock_and_complete(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("one"), ServiceBusMessage("two"))
    sign_in_by_keyboard(page, console_emulator.key)
    received = receive_in_console(page, "orders")
    item = received.locator('li[data-seq="1"]')
    assert "locked until" in item.inner_text()
    # Locked: the SDK sees the message with its delivery counted, and cannot receive it meanwhile.
    [locked, other] = peek_all(console_emulator, "orders")
    assert locked.sequence_number == 1 and locked.delivery_count == 1 and other.delivery_count == 0
    screenshot(page, "receive")
    item.get_by_role("button", name="Complete #1").click()
    page.get_by_role("status").filter(has_text="Completed message #1").wait_for()
    assert [m.sequence_number for m in peek_all(console_emulator, "orders")] == [2]


def test_receive_peek_lock_and_abandon(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("one"))
    sign_in_by_keyboard(page, console_emulator.key)
    receive_in_console(page, "orders").get_by_role("button", name="Abandon #1").click()
    page.get_by_role("status").filter(has_text="Abandoned message #1").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
            [m] = receiver.receive_messages(max_wait_time=WAIT_S)
            assert str(m) == "one" and m.delivery_count == 1  # available again, the delivery counted
            receiver.complete_message(m)


def test_receive_peek_lock_and_defer(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("later"))
    sign_in_by_keyboard(page, console_emulator.key)
    receive_in_console(page, "orders").get_by_role("button", name="Defer #1").click()
    page.get_by_role("status").filter(has_text="Deferred message #1").wait_for()
    count(page, "Deferred").filter(has_text="1").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=1) as receiver:
            assert receiver.receive_messages(max_wait_time=1) == []
            [m] = receiver.receive_deferred_messages([1])
            assert str(m) == "later"
            receiver.complete_message(m)


def test_receive_peek_lock_and_dead_letter_with_reason(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("poison"))
    sign_in_by_keyboard(page, console_emulator.key)
    received = receive_in_console(page, "orders")
    received.get_by_role("button", name="Dead-letter… #1").click()
    page.get_by_label("Dead-letter reason").fill("InvalidOrder")
    page.get_by_label("Dead-letter description").fill("customer is on hold")
    received.get_by_role("button", name="Dead-letter #1").click()
    page.get_by_role("status").filter(has_text="Dead-lettered message #1").wait_for()
    [dead] = peek_all(console_emulator, "orders", ServiceBusSubQueue.DEAD_LETTER)
    assert dead.dead_letter_reason == "InvalidOrder"
    assert dead.dead_letter_error_description == "customer is on hold"
    # The dead-letter list tags it as dead-lettered (not Active) with its reason.
    page.get_by_role("link", name="Dead-letter queue").click()
    item = page.get_by_role("list", name="Dead-letter queue").locator('li[data-seq="1"]')
    tag = item.locator("summary .tag").text_content()
    assert tag == "DeadLettered"


def test_receive_and_delete(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("a"), ServiceBusMessage("b"), ServiceBusMessage("c"))
    sign_in_by_keyboard(page, console_emulator.key)
    received = receive_in_console(page, "orders", "receiveanddelete", 2)
    received.locator('li[data-seq="2"]').wait_for()
    assert "Removed from the entity" in received.inner_text()
    assert [str(m) for m in peek_all(console_emulator, "orders")] == ["c"]


def test_receive_from_a_session_queue_and_complete(page: Any, console_emulator: Emulator) -> None:
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_sender("payments") as sender:
            sender.send_messages([ServiceBusMessage("p1", session_id="s-1"), ServiceBusMessage("p2", session_id="s-1")])
    sign_in_by_keyboard(page, console_emulator.key)
    received = receive_in_console(page, "payments", number=2)
    page.get_by_role("status").filter(has_text="of session s-1").wait_for()
    received.get_by_role("button", name="Complete #1").click()
    page.get_by_role("status").filter(has_text="Completed message #1").wait_for()
    received.get_by_role("button", name="Complete #2").click()
    page.get_by_role("status").filter(has_text="Completed message #2").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_queue_receiver("payments", session_id="s-1", max_wait_time=1) as receiver:
            assert receiver.peek_messages(max_message_count=10) == []


def test_edit_and_resend_into_another_entity(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage('{"id": 1}', subject="created", content_type="application/json",
                                                        application_properties={"Priority": "High"}))
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=messages")
    page.get_by_role("button", name="Edit and re-send #1").click()
    page.locator("#draft-note").wait_for()
    assert page.get_by_label("Body").input_value() == '{"id": 1}'
    assert page.get_by_label("Subject").input_value() == "created"
    page.get_by_label("Send to").select_option("events")
    page.get_by_label("Body").fill('{"id": 2}')
    page.get_by_role("button", name="Send message").click()
    page.get_by_role("status").filter(has_text="to events").wait_for()
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_subscription_receiver("events", "high") as receiver:  # Priority = 'High' matched
            [m] = receiver.peek_messages(max_message_count=5)
    assert str(m) == '{"id": 2}' and m.subject == "created" and m.content_type == "application/json"
    assert [str(x) for x in peek_all(console_emulator, "orders")] == ['{"id": 1}']  # the original stays


def test_send_twice_gets_two_message_ids(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=send")
    page.get_by_label("Message id").fill("console-1")
    page.get_by_label("Body").fill("first")
    page.get_by_role("button", name="Send message").click()
    page.get_by_role("status").filter(has_text="Sent message console-1").wait_for()
    assert page.get_by_label("Message id").input_value() == ""
    page.get_by_label("Body").fill("second")
    page.get_by_role("button", name="Send message").click()
    count(page, "Active").filter(has_text="2").wait_for()
    ids = [m.message_id for m in peek_all(console_emulator, "orders")]
    assert ids[0] == "console-1" and ids[1] != "console-1"


def test_peek_from_a_sequence_number(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", *[ServiceBusMessage(f"m{i}") for i in range(1, 9)])
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=messages")
    page.locator('.messages li[data-seq="1"]').wait_for()
    page.get_by_label("From sequence number").fill("6")
    page.get_by_role("button", name="Peek from").click()
    page.locator("#page-info").filter(has_text="6 to 8").wait_for()
    assert [li.get_attribute("data-seq") for li in page.locator(".messages > li").all()] == ["6", "7", "8"]


def test_download_a_body(page: Any, console_emulator: Emulator) -> None:
    body = "x" * 200_000
    send(console_emulator, "orders", ServiceBusMessage(body, content_type="text/plain"))
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=messages")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download body #1").click()
    download = info.value
    assert download.suggested_filename == "orders-1.txt"
    with open(download.path(), encoding="utf-8") as f:
        assert f.read() == body


def test_create_edit_and_delete_a_queue(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.get_by_role("link", name="New queue").click()
    page.get_by_label("Queue name").fill("invoices")
    page.get_by_label("LockDuration").fill("PT10M")  # above the 5-minute maximum: the admin API's rule
    page.get_by_role("button", name="Create queue").click()
    page.get_by_role("alert").filter(has_text="the maximum is 5 minutes").wait_for()
    page.get_by_label("LockDuration").fill("PT45S")
    page.get_by_label("MaxDeliveryCount").fill("4")
    page.get_by_label("RequiresSession").check()
    screenshot(page, "new-queue")
    page.get_by_role("button", name="Create queue").click()
    page.locator("#entity-title").filter(has_text="invoices").wait_for()
    with admin_client(console_emulator) as admin:
        props = admin.get_queue("invoices")
        assert isinstance(props.lock_duration, dt.timedelta)
        assert props.lock_duration.total_seconds() == 45 and props.max_delivery_count == 4 and props.requires_session
    # Edit: RequiresSession cannot change any more; MaxDeliveryCount can.
    page.get_by_role("link", name="Settings").click()
    assert page.get_by_label("RequiresSession").is_disabled()
    page.get_by_label("MaxDeliveryCount").fill("7")
    page.get_by_role("button", name="Save changes").click()
    page.get_by_role("status").filter(has_text="Saved queue invoices").wait_for()
    with admin_client(console_emulator) as admin:
        props = admin.get_queue("invoices")
        assert isinstance(props.lock_duration, dt.timedelta)
        assert props.max_delivery_count == 7 and props.lock_duration.total_seconds() == 45 and props.requires_session
    page.get_by_role("button", name="Delete queue").click()  # confirm() is accepted by the fixture
    page.locator("#overview-view").wait_for(state="visible")
    page.get_by_role("status").filter(has_text="Deleted queue invoices").wait_for()
    with admin_client(console_emulator) as admin:
        assert "invoices" not in [q.name for q in admin.list_queues()]


def test_create_topic_subscription_and_rules(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.get_by_role("link", name="New topic").click()
    page.get_by_label("Topic name").fill("audit")
    page.get_by_role("button", name="Create topic").click()
    page.locator("#entity-title").filter(has_text="audit").wait_for()
    page.get_by_role("link", name="New subscription").click()
    page.get_by_label("Subscription name").fill("errors")
    page.get_by_role("button", name="Create subscription").click()
    page.locator("#entity-title").filter(has_text="errors").wait_for()
    # A bad SQL filter is refused with the broker's message; a good one is added.
    page.get_by_label("Rule name").fill("only-errors")
    page.get_by_label("SQL filter").fill("Level = = 'Error'")
    page.get_by_role("button", name="Add rule").click()
    page.get_by_role("alert").filter(has_text="Invalid SQL filter").wait_for()
    page.get_by_label("SQL filter").fill("Level = 'Error'")
    page.get_by_label("SQL action (optional)").fill("SET Seen = 'yes'")
    page.get_by_role("button", name="Add rule").click()
    page.get_by_role("status").filter(has_text="Added rule only-errors").wait_for()
    page.get_by_role("button", name="Delete rule $Default").click()
    page.get_by_role("status").filter(has_text="Deleted rule $Default").wait_for()
    screenshot(page, "rules")
    with ServiceBusClient.from_connection_string(console_emulator.connection_string) as client:
        with client.get_topic_sender("audit") as sender:
            sender.send_messages([ServiceBusMessage("e", application_properties={"Level": "Error"}),
                                  ServiceBusMessage("i", application_properties={"Level": "Info"})])
        with client.get_subscription_receiver("audit", "errors") as receiver:
            [m] = receiver.peek_messages(max_message_count=5)
    assert str(m) == "e" and (m.application_properties or {})[b"Seen"] == b"yes"
    # A correlation rule, edited afterwards.
    page.get_by_label("Rule name").fill("by-subject")
    page.get_by_label("Filter type").select_option("Correlation")
    page.get_by_label("Label (subject)").fill("audit")
    page.get_by_role("button", name="Add rule").click()
    page.get_by_role("status").filter(has_text="Added rule by-subject").wait_for()
    page.get_by_role("button", name="Edit rule by-subject").click()
    page.get_by_label("Label (subject)").fill("audit-2")
    page.get_by_role("button", name="Save rule").click()
    page.get_by_role("status").filter(has_text="Saved rule by-subject").wait_for()
    with admin_client(console_emulator) as admin:
        rule = admin.get_rule("audit", "errors", "by-subject")
        assert isinstance(rule.filter, CorrelationRuleFilter) and rule.filter.label == "audit-2"


def test_unknown_entity_route_shows_nothing_of_the_previous_entity(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders")
    count(page, "Active").wait_for()
    page.goto("/console/#/entity/nosuchqueue")
    page.locator("#gone").filter(has_text="There is no queue, topic or subscription 'nosuchqueue'").wait_for()
    assert page.locator("#entity-title").inner_text() == "Entity not found"
    assert page.locator("#entity-counts dd").count() == 0
    assert "Loading" not in page.locator("#tab-body").inner_text()
    assert page.locator("#purge-all").is_hidden()


def test_entity_deleted_while_open_says_so(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders")
    count(page, "Active").wait_for()
    with admin_client(console_emulator) as admin:
        admin.delete_queue("orders")
    page.locator("#gone").filter(has_text="no longer exists").wait_for()
    assert page.locator("#entity-counts dd").count() == 0


def test_a_failing_live_update_is_shown_and_clears(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.route("**/console/api/overview", lambda route: route.fulfill(
        status=503, content_type="application/json", body='{"error": "ServerBusy", "message": "busy"}'))
    page.locator("#poll-error").filter(has_text="Live update failed: busy").wait_for()
    page.unroute("**/console/api/overview")
    page.locator("#poll-error").wait_for(state="hidden")


@pytest.mark.parametrize("where", ["overview", "entity", "messages", "receive"])
def test_usable_at_420_px(page: Any, console_emulator: Emulator, where: str) -> None:
    send(console_emulator, "orders", ServiceBusMessage('{"a": "' + "long " * 40 + '"}'))
    page.set_viewport_size({"width": 420, "height": 800})
    sign_in_by_keyboard(page, console_emulator.key)
    target = {"overview": "/console/#/", "entity": "/console/#/entity/events",
              "messages": "/console/#/entity/orders?tab=messages", "receive": "/console/#/entity/orders?tab=receive"}
    page.goto(target[where])
    page.locator("main section:not([hidden]) h1").wait_for()
    page.locator("#tab-body:visible, #entities:visible").first.wait_for()
    if where == "messages":
        page.locator('.messages li[data-seq="1"] summary').click()
    # The page itself never scrolls sideways (wide tables scroll in their own box) ...
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    # ... and Sign out is on screen, with contrast (not white on the header's dark blue only by outline).
    box = page.get_by_role("button", name="Sign out").bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 420
    colors = page.get_by_role("button", name="Sign out").evaluate(
        "(el) => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]")
    assert colors[0] != colors[1]
    if where == "overview":
        screenshot(page, "narrow")


def test_keyboard_only_receive_and_complete(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("by keyboard"))
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=receive")
    page.get_by_label("Receive mode").focus()
    for _ in range(6):  # mode, from, count, then the Receive button
        if page.evaluate("document.activeElement.id") == "receive-button":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "receive-button"
    page.keyboard.press("Enter")
    page.get_by_role("button", name="Complete #1").wait_for()
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Complete #1":
            break
    assert page.evaluate("document.activeElement.textContent") == "Complete #1"
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(has_text="Completed message #1").wait_for()
    assert peek_all(console_emulator, "orders") == []


# Holds every request for the namespace overview until the test calls window.releaseOverview(), so a
# view's first load can finish after the user has already moved on (as on a busy machine, where the
# overview's three requests took seconds). The script runs before the page's own, outside its CSP.
HOLD_OVERVIEW = """(() => {
    const fetchNow = window.fetch.bind(window);
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    window.releaseOverview = release;
    window.overviewsDone = 0;
    window.fetch = async (url, options) => {
        if (!String(url).includes("api/overview")) return fetchNow(url, options);
        await held;
        const response = await fetchNow(url, options);
        setTimeout(() => { window.overviewsDone += 1; }, 0);
        return response;
    };
})();"""


def test_a_view_loaded_late_does_not_take_the_focus_from_the_next_one(page: Any, console_emulator: Emulator) -> None:
    """The namespace page's first load finishes after the user has opened a queue's Receive tab and
    focused its form: the stale load must not move the focus (it put it on the queue's heading, and a
    keyboard user's next Tab landed in the tab strip instead of the form)."""
    page.add_init_script(HOLD_OVERVIEW)
    sign_in_by_keyboard(page, console_emulator.key)
    page.goto("/console/#/entity/orders?tab=receive")
    page.get_by_label("Receive mode").focus()
    expect_focus(page, "receive-mode")
    page.evaluate("() => window.releaseOverview()")
    page.wait_for_function("() => window.overviewsDone > 0")
    page.locator("#overview-title").filter(has_text="Namespace sbemulatorns").wait_for(state="attached")
    assert page.evaluate("() => document.activeElement.id") == "receive-mode"
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('form') !== null")


def test_download_a_snapshot_and_start_from_it(page: Any, console_emulator: Emulator) -> None:
    send(console_emulator, "orders", ServiceBusMessage("kept", application_properties={"k": 1}))
    sign_in_by_keyboard(page, console_emulator.key)
    with page.expect_download() as info:
        page.get_by_role("button", name="Download snapshot").click()
    download = info.value
    assert download.suggested_filename.startswith("sbemulatorns-") and download.suggested_filename.endswith(
        ".snapshot.json")
    with open(download.path(), "rb") as f:
        data = f.read()
    with Emulator(config={"UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": [], "Topics": []}]}},
                  in_memory=True, snapshot=data) as fresh:
        [m] = peek_all(fresh, "orders")
        assert str(m) == "kept" and m.sequence_number == 1 and m.application_properties == {b"k": 1}


def test_the_clock_is_shown_and_a_manual_clock_advanced(browser: Any) -> None:
    """A scheduled message (https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing,
    "Scheduled messages") becomes active when the console moves a manual clock past its time."""
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True, clock="manual") as emu:
        context = browser.new_context(ignore_https_errors=True, viewport={"width": 1366, "height": 800},
                                      base_url=emu.admin_url)
        context.set_default_timeout(UI_TIMEOUT_MS)
        page = context.new_page()
        try:
            when = emu.now() + dt.timedelta(hours=1)
            with ServiceBusClient.from_connection_string(emu.connection_string) as client:
                with client.get_queue_sender("orders") as sender:
                    sender.schedule_messages(ServiceBusMessage("wake up"), when)
            sign_in_by_keyboard(page, emu.key)
            page.locator("#clock-mode").filter(has_text="manual clock").wait_for()
            row(page, "orders").locator("td").nth(4).filter(has_text="1").wait_for()  # scheduled
            page.get_by_label("Advance by (seconds)").fill("3600")
            page.get_by_role("button", name="Advance the clock").click()
            page.get_by_role("status").filter(has_text="Advanced the emulator's clock by 3600 s").wait_for()
            row(page, "orders").locator("td").nth(2).filter(has_text="1").wait_for()  # active now
            screenshot(page, "clock")
            with ServiceBusClient.from_connection_string(emu.connection_string) as client:
                with client.get_queue_receiver("orders", max_wait_time=WAIT_S) as receiver:
                    [m] = receiver.receive_messages(max_wait_time=WAIT_S)
                    assert str(m) == "wake up"
                    receiver.complete_message(m)
        finally:
            context.close()


def test_a_real_clock_is_shown_and_not_movable(page: Any, console_emulator: Emulator) -> None:
    sign_in_by_keyboard(page, console_emulator.key)
    page.locator("#clock-mode").filter(has_text="real time").wait_for()
    assert page.locator("#clock-form").is_hidden()


def test_inject_list_and_clear_faults(page: Any, console_emulator: Emulator) -> None:
    """A fault injected from the console (docs/emulator.md, "Fault injection") fails the SDK's send
    with ServerBusy (https://learn.microsoft.com/azure/service-bus-messaging/service-bus-messaging-exceptions-latest);
    cleared, sends go through."""
    sign_in_by_keyboard(page, console_emulator.key)
    page.locator("#faults-box").wait_for()
    page.get_by_label("Operation").select_option("send")
    page.get_by_label("Effect").select_option("server-busy")
    page.get_by_label("Entity", exact=True).fill("orders")
    page.get_by_label("Times").fill("1")
    page.get_by_role("button", name="Inject fault").click()
    page.get_by_role("status").filter(has_text="server-busy on send of orders").wait_for()
    fault = page.locator("#faults tbody tr[data-fault]")
    fault_id = fault.get_attribute("data-fault")
    with ServiceBusClient.from_connection_string(console_emulator.connection_string, retry_total=0) as client:
        with client.get_queue_sender("orders") as sender:
            with pytest.raises(ServiceBusError):
                sender.send_messages(ServiceBusMessage("refused"))
    page.locator(f'#faults tr[data-fault="{fault_id}"] td').nth(6).filter(has_text="1").wait_for()  # applied once
    screenshot(page, "faults")
    page.get_by_role("button", name=f"Clear {fault_id}").click()
    page.get_by_role("status").filter(has_text=f"Cleared {fault_id}").wait_for()
    page.get_by_label("Times").fill("")
    page.get_by_role("button", name="Inject fault").click()
    page.locator("#faults tbody tr[data-fault]").wait_for()
    page.get_by_role("button", name="Clear all faults").click()
    page.get_by_role("status").filter(has_text="Cleared every fault").wait_for()
    assert page.locator("#faults tbody tr[data-fault]").count() == 0
    send(console_emulator, "orders", ServiceBusMessage("accepted"))
    assert [str(m) for m in peek_all(console_emulator, "orders")] == ["accepted"]


def test_import_a_snapshot_replaces_the_namespace(page: Any, console_emulator: Emulator, tmp_path: Any) -> None:
    """The console uploads a snapshot file (docs/emulator.md, "Snapshots"): the namespace becomes what it
    holds; a broken file is refused with the emulator's reason and changes nothing."""
    with Emulator(config=copy.deepcopy(TOPOLOGY), in_memory=True) as other:
        send(other, "orders", ServiceBusMessage("from the file", application_properties={"k": 2}))
        with admin_client(other) as admin:
            admin.create_queue("seeded")
        data, _ = other.call(snapshot_file, other.broker, "sbemulatorns")
    good = tmp_path / "good.snapshot.json"
    good.write_bytes(data)
    broken = tmp_path / "broken.snapshot.json"
    broken.write_text('{"format": "sbemulator-snapshot", "version": 7}')
    send(console_emulator, "orders", ServiceBusMessage("before"))
    sign_in_by_keyboard(page, console_emulator.key)
    upload = page.get_by_label("Import snapshot")
    upload.set_input_files(str(broken))
    page.get_by_role("alert").filter(has_text="Snapshot version 7 is not supported").wait_for()
    assert [str(m) for m in peek_all(console_emulator, "orders")] == ["before"]
    upload.set_input_files(str(good))
    page.get_by_role("status").filter(has_text="Imported good.snapshot.json").wait_for()
    row(page, "seeded").wait_for()  # the entities table shows the imported queue
    [m] = peek_all(console_emulator, "orders")
    assert str(m) == "from the file" and m.sequence_number == 1 and m.application_properties == {b"k": 2}
