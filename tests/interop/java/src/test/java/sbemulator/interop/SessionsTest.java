package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.exception.AmqpErrorCondition;
import com.azure.core.amqp.exception.AmqpException;
import com.azure.messaging.servicebus.ServiceBusErrorContext;
import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusSessionReceiverClient;

import java.nio.charset.StandardCharsets;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** Message sessions: a named session with state, the next available session, and the session processor. */
class SessionsTest {

    @Test
    void namedSessionKeepsOrderAndStateAndIsExclusive() {
        try (ServiceBusSenderClient sender = Emulator.builder().sender().queueName("java-sessions").buildClient()) {
            for (int i = 0; i < 3; i++) {
                sender.sendMessage(new ServiceBusMessage("a" + i).setMessageId("a" + i).setSessionId("A"));
            }
            sender.sendMessage(new ServiceBusMessage("b0").setMessageId("b0").setSessionId("B"));
        }
        try (ServiceBusSessionReceiverClient sessions = Emulator.builder().sessionReceiver()
                .queueName("java-sessions").buildClient();
             ServiceBusReceiverClient a = sessions.acceptSession("A")) {
            assertEquals("A", a.getSessionId());
            List<ServiceBusReceivedMessage> got = Emulator.receive(a, 3);
            assertEquals(List.of("a0", "a1", "a2"), Emulator.ids(got));
            for (ServiceBusReceivedMessage m : got) {
                assertEquals("A", m.getSessionId());
                a.complete(m);
            }
            a.setSessionState("step-2".getBytes(StandardCharsets.UTF_8));
            assertEquals("step-2", new String(a.getSessionState(), StandardCharsets.UTF_8));
            OffsetDateTime renewed = a.renewSessionLock();
            assertTrue(renewed.isAfter(OffsetDateTime.now()));

            // A second receiver for the locked session, on another connection, is refused at its attach with
            // com.microsoft:session-cannot-be-locked. (On the same client the SDK names the link after the session and
            // hands back the link it already has, so the refusal needs a second client.)
            try (ServiceBusSessionReceiverClient other = Emulator.builder().sessionReceiver()
                    .queueName("java-sessions").buildClient()) {
                AmqpException refused = assertThrows(AmqpException.class, () -> other.acceptSession("A"));
                assertEquals(AmqpErrorCondition.SESSION_CANNOT_BE_LOCKED, refused.getErrorCondition(), refused.toString());
            }

            // The next available session is the one that still has messages.
            try (ServiceBusReceiverClient next = sessions.acceptNextSession()) {
                assertEquals("B", next.getSessionId());
                ServiceBusReceivedMessage b0 = Emulator.receive(next, 1).get(0);
                assertEquals("b0", b0.getMessageId());
                next.complete(b0);
            }
        }
        // The state outlives the receiver that set it.
        try (ServiceBusSessionReceiverClient sessions = Emulator.builder().sessionReceiver()
                .queueName("java-sessions").buildClient();
             ServiceBusReceiverClient a = sessions.acceptSession("A")) {
            assertEquals("step-2", new String(a.getSessionState(), StandardCharsets.UTF_8));
        }
    }

    @Test
    void sendingWithoutSessionIdToSessionQueueIsRefused() {
        try (ServiceBusSenderClient sender = Emulator.builder().sender().queueName("java-sessions").buildClient()) {
            assertThrows(ServiceBusException.class, () -> sender.sendMessage(new ServiceBusMessage("no session")));
        }
    }

    @Test
    void sessionProcessorHandlesEachSessionInOrder() throws InterruptedException {
        try (ServiceBusSenderClient sender = Emulator.builder().sender().queueName("java-session-proc").buildClient()) {
            List<ServiceBusMessage> batch = new ArrayList<>();
            for (String session : List.of("x", "y")) {
                for (int i = 0; i < 3; i++) {
                    batch.add(new ServiceBusMessage(session + i).setMessageId(session + i).setSessionId(session));
                }
            }
            sender.sendMessages(batch);
        }
        Map<String, List<String>> seen = new ConcurrentHashMap<>();
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch done = new CountDownLatch(6);
        ServiceBusProcessorClient processor = Emulator.builder().sessionProcessor()
            .queueName("java-session-proc").maxConcurrentSessions(2)
            .processMessage(context -> {
                ServiceBusReceivedMessage m = context.getMessage();
                seen.computeIfAbsent(m.getSessionId(), k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(m.getMessageId());
                done.countDown();
            })
            .processError((ServiceBusErrorContext context) -> errors.add(context.getException()))
            .buildProcessorClient();
        processor.start();
        try {
            assertTrue(done.await(30, TimeUnit.SECONDS), "processed " + seen);
        } finally {
            processor.close();
        }
        assertEquals(List.of("x0", "x1", "x2"), seen.get("x"));
        assertEquals(List.of("y0", "y1", "y2"), seen.get("y"));
        assertEquals(List.of(), errors);
    }
}
