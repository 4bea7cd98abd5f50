"""Uses only the sbemulator pytest plugin's fixtures and azure-servicebus."""

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

WAIT = 5  # seconds: every receive is bounded


def test_queue_round_trip(clean_servicebus_emulator):
    with ServiceBusClient.from_connection_string(clean_servicebus_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("order 1", application_properties={"Customer": "c1"}))
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            assert str(message) == "order 1"
            receiver.complete_message(message)


def test_purge_keeps_tests_independent(clean_servicebus_emulator):
    # test_queue_round_trip completed its message; this one leaves two behind, one dead-lettered...
    with ServiceBusClient.from_connection_string(clean_servicebus_emulator.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            [first] = receiver.receive_messages(max_wait_time=WAIT)
            receiver.dead_letter_message(first, reason="Invalid", error_description="rejected by the test")
    # ...and purge() removes both, the dead-lettered one too.
    assert clean_servicebus_emulator.purge("orders") == 2
    with ServiceBusClient.from_connection_string(clean_servicebus_emulator.connection_string) as client:
        with client.get_queue_receiver("orders", max_wait_time=1) as receiver:
            assert receiver.peek_messages(max_message_count=10) == []
        with client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            assert dlq.peek_messages(max_message_count=10) == []


def test_topic_filter(clean_servicebus_emulator):
    with ServiceBusClient.from_connection_string(clean_servicebus_emulator.connection_string) as client:
        with client.get_topic_sender("events") as sender:
            sender.send_messages([
                ServiceBusMessage("low", application_properties={"Priority": "Low"}),
                ServiceBusMessage("high", application_properties={"Priority": "High"}),
            ])
        with client.get_subscription_receiver("events", "urgent", max_wait_time=WAIT) as receiver:
            # Only the high-priority message passed the rule (a peek sees every message, without waiting).
            assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == ["high"]
            [message] = receiver.receive_messages(max_wait_time=WAIT)
            receiver.complete_message(message)


def test_a_namespace_of_its_own(servicebus_namespace):
    # A fresh namespace for this test alone (the same topology, its own port and key): no purge needed,
    # and what it leaves behind is gone with it.
    with ServiceBusClient.from_connection_string(servicebus_namespace.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage("left behind on purpose"))
        with client.get_queue_receiver("orders", max_wait_time=WAIT) as receiver:
            assert [str(m) for m in receiver.peek_messages(max_message_count=10)] == ["left behind on purpose"]


def test_admin_endpoint(servicebus_emulator):
    assert servicebus_emulator.admin_url.startswith("https://127.0.0.1:")
    assert "SharedAccessKey=" in servicebus_emulator.connection_string

