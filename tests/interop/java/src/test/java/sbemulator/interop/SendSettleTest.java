package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.util.IterableStream;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusMessageBatch;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.models.AbandonOptions;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.ServiceBusMessageState;
import com.azure.messaging.servicebus.models.ServiceBusReceiveMode;
import com.azure.messaging.servicebus.models.SubQueue;

import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

/** Sending (single, list, batch) and every settlement of a peek-locked message, one queue per test. */
class SendSettleTest {

    private static ServiceBusSenderClient sender(String queue) {
        return Emulator.builder().sender().queueName(queue).buildClient();
    }

    private static ServiceBusReceiverClient receiver(String queue, ServiceBusReceiveMode mode) {
        return Emulator.builder().receiver().queueName(queue).receiveMode(mode).buildClient();
    }

    @Test
    void singleListAndBatchSendsArriveIntactAndComplete() {
        try (ServiceBusSenderClient sender = sender("java-send");
             ServiceBusReceiverClient receiver = receiver("java-send", ServiceBusReceiveMode.PEEK_LOCK)) {
            ServiceBusMessage first = new ServiceBusMessage("one").setMessageId("m1").setSubject("greeting")
                .setContentType("text/plain").setCorrelationId("c-1");
            first.getApplicationProperties().put("count", 7);
            first.getApplicationProperties().put("ratio", 0.5);
            first.getApplicationProperties().put("flag", true);
            first.getApplicationProperties().put("name", "java");
            sender.sendMessage(first);
            sender.sendMessages(List.of(new ServiceBusMessage("two").setMessageId("m2"),
                new ServiceBusMessage("three").setMessageId("m3")));
            ServiceBusMessageBatch batch = sender.createMessageBatch();
            assertTrue(batch.tryAddMessage(new ServiceBusMessage("four").setMessageId("m4")));
            assertTrue(batch.tryAddMessage(new ServiceBusMessage("five").setMessageId("m5")));
            // The batch's limit is the max-message-size the emulator put on the sender link's attach.
            assertEquals(256 * 1024, batch.getMaxSizeInBytes());
            sender.sendMessages(batch);

            List<ServiceBusReceivedMessage> got = Emulator.receive(receiver, 5);
            assertEquals(List.of("m1", "m2", "m3", "m4", "m5"), Emulator.ids(got));
            ServiceBusReceivedMessage m1 = got.get(0);
            assertEquals("one", m1.getBody().toString());
            assertEquals("greeting", m1.getSubject());
            assertEquals("text/plain", m1.getContentType());
            assertEquals("c-1", m1.getCorrelationId());
            Map<String, Object> props = m1.getApplicationProperties();
            assertEquals(7, props.get("count"));
            assertEquals(0.5, props.get("ratio"));
            assertEquals(true, props.get("flag"));
            assertEquals("java", props.get("name"));
            assertEquals(0, m1.getDeliveryCount());
            assertEquals(ServiceBusMessageState.ACTIVE, m1.getState());
            assertNotNull(m1.getLockToken());
            assertTrue(m1.getLockedUntil().isAfter(OffsetDateTime.now().minusSeconds(5)));
            long previous = 0;
            for (ServiceBusReceivedMessage m : got) {
                assertTrue(m.getSequenceNumber() > previous, "sequence numbers grow");
                previous = m.getSequenceNumber();
                receiver.complete(m);
            }
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size());
        }
    }

    @Test
    void abandonDeferAndDeadLetter() {
        try (ServiceBusSenderClient sender = sender("java-settle");
             ServiceBusReceiverClient receiver = receiver("java-settle", ServiceBusReceiveMode.PEEK_LOCK)) {
            sender.sendMessage(new ServiceBusMessage("abandon me").setMessageId("ab"));
            ServiceBusReceivedMessage first = Emulator.receive(receiver, 1).get(0);
            receiver.abandon(first, new AbandonOptions().setPropertiesToModify(Map.of("reason", "retry")));
            ServiceBusReceivedMessage again = Emulator.receive(receiver, 1).get(0);
            assertEquals("ab", again.getMessageId());
            assertEquals(1, again.getDeliveryCount());
            assertEquals("retry", again.getApplicationProperties().get("reason"));
            assertEquals(first.getSequenceNumber(), again.getSequenceNumber());

            // defer: hidden from receive, fetched again by sequence number in the deferred state.
            receiver.defer(again);
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size());
            ServiceBusReceivedMessage deferred = receiver.receiveDeferredMessage(again.getSequenceNumber());
            assertEquals("ab", deferred.getMessageId());
            assertEquals(ServiceBusMessageState.DEFERRED, deferred.getState());

            // dead-letter with reason and description; read back from the dead-letter sub-queue.
            receiver.deadLetter(deferred, new DeadLetterOptions().setDeadLetterReason("bad")
                .setDeadLetterErrorDescription("cannot parse"));
            try (ServiceBusReceiverClient dlq = Emulator.builder().receiver().queueName("java-settle")
                .subQueue(SubQueue.DEAD_LETTER_QUEUE).buildClient()) {
                ServiceBusReceivedMessage dead = Emulator.receive(dlq, 1).get(0);
                assertEquals("ab", dead.getMessageId());
                assertEquals("bad", dead.getDeadLetterReason());
                assertEquals("cannot parse", dead.getDeadLetterErrorDescription());
                // DeadLetterSource is set only on a message forwarded on from a dead-letter queue ("Message
                // properties" in the Service Bus docs), not on one read from its own entity's DLQ.
                assertNull(dead.getDeadLetterSource());
                dlq.complete(dead);
            }
        }
    }

    @Test
    void receiveAndDeleteAndPeek() {
        try (ServiceBusSenderClient sender = sender("java-rd")) {
            sender.sendMessages(List.of(new ServiceBusMessage("p1").setMessageId("p1"),
                new ServiceBusMessage("p2").setMessageId("p2"), new ServiceBusMessage("p3").setMessageId("p3")));
            try (ServiceBusReceiverClient peeker = receiver("java-rd", ServiceBusReceiveMode.PEEK_LOCK)) {
                List<ServiceBusReceivedMessage> peeked = new ArrayList<>();
                peeker.peekMessages(10).forEach(peeked::add);
                assertEquals(List.of("p1", "p2", "p3"), Emulator.ids(peeked));
                for (ServiceBusReceivedMessage m : peeked) {
                    assertNull(m.getLockToken());
                }
                ServiceBusReceivedMessage one = peeker.peekMessage(peeked.get(1).getSequenceNumber());
                assertEquals("p2", one.getMessageId());
            }
            try (ServiceBusReceiverClient rd = receiver("java-rd", ServiceBusReceiveMode.RECEIVE_AND_DELETE)) {
                List<ServiceBusReceivedMessage> got = Emulator.receive(rd, 3);
                assertEquals(List.of("p1", "p2", "p3"), Emulator.ids(got));
                assertEquals(0, Emulator.receive(rd, 1, Duration.ofSeconds(2)).size());
            }
        }
    }

    @Test
    void scheduledMessageArrivesWhenDueAndCancelledOneNever() {
        try (ServiceBusSenderClient sender = sender("java-schedule");
             ServiceBusReceiverClient receiver = receiver("java-schedule", ServiceBusReceiveMode.PEEK_LOCK)) {
            OffsetDateTime soon = OffsetDateTime.now().plusSeconds(2);
            long far = sender.scheduleMessage(new ServiceBusMessage("far").setMessageId("far"),
                OffsetDateTime.now().plusHours(1));
            long near = sender.scheduleMessage(new ServiceBusMessage("soon").setMessageId("soon"), soon);
            assertEquals(far + 1, near);
            List<ServiceBusReceivedMessage> peeked = new ArrayList<>();
            IterableStream<ServiceBusReceivedMessage> stream = receiver.peekMessages(10);
            stream.forEach(peeked::add);
            assertEquals(List.of("far", "soon"), Emulator.ids(peeked));
            assertEquals(ServiceBusMessageState.SCHEDULED, peeked.get(0).getState());
            sender.cancelScheduledMessage(far);

            List<ServiceBusReceivedMessage> due = Emulator.receive(receiver, 1, Duration.ofSeconds(15));
            assertEquals(List.of("soon"), Emulator.ids(due));
            assertEquals(soon.toInstant().toEpochMilli(),
                due.get(0).getScheduledEnqueueTime().toInstant().toEpochMilli());
            receiver.complete(due.get(0));
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size());
            List<ServiceBusReceivedMessage> left = new ArrayList<>();
            receiver.peekMessages(10, 1).forEach(left::add);
            assertEquals(List.of(), Emulator.ids(left));
        }
    }

}
