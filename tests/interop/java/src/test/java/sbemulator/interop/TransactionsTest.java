package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusTransactionContext;
import com.azure.messaging.servicebus.models.AbandonOptions;
import com.azure.messaging.servicebus.models.CompleteOptions;
import com.azure.messaging.servicebus.models.DeadLetterOptions;
import com.azure.messaging.servicebus.models.DeferOptions;
import com.azure.messaging.servicebus.models.SubQueue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * Service Bus transactions through the Java SDK's ServiceBusTransactionContext ("Overview of Service
 * Bus transaction processing"): the operations of one transaction, on clients that share one
 * connection (built from one ServiceBusClientBuilder), commit or roll back as a whole.
 */
class TransactionsTest {

    private static List<ServiceBusReceivedMessage> peekAll(ServiceBusReceiverClient receiver) {
        List<ServiceBusReceivedMessage> out = new ArrayList<>();
        receiver.peekMessages(50, 1).forEach(out::add);
        return out;
    }

    /** Complete the input and send the output in one transaction: nothing shows until the commit. */
    @Test
    void completeAndSendCommitTogether() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient sender = shared.sender().queueName("java-tx").buildClient();
             ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx").buildClient();
             ServiceBusReceiverClient observer = Emulator.builder().receiver().queueName("java-tx").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("in").setMessageId("in-1"));
            ServiceBusReceivedMessage in = Emulator.receive(receiver, 1).get(0);

            ServiceBusTransactionContext tx = sender.createTransaction();
            receiver.complete(in, new CompleteOptions().setTransactionContext(tx));
            sender.sendMessage(new ServiceBusMessage("out").setMessageId("out-1"), tx);
            // Before the commit: the input is still there (locked), the output not yet.
            assertEquals(List.of("in-1"), Emulator.ids(peekAll(observer)));
            sender.commitTransaction(tx);

            List<ServiceBusReceivedMessage> after = Emulator.receive(observer, 2, Duration.ofSeconds(3));
            assertEquals(List.of("out-1"), Emulator.ids(after));
            observer.complete(after.get(0));
        }
    }

    /**
     * A rollback applies neither the send nor the completion. The input stays locked to its receiver
     * (the SDK counts it settled and refuses to settle it again) and comes back when the lock ends.
     */
    @Test
    void rollbackAppliesNothing() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient sender = shared.sender().queueName("java-tx-rollback").buildClient();
             ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx-rollback").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("in").setMessageId("in-2"));
            ServiceBusReceivedMessage in = Emulator.receive(receiver, 1).get(0);

            ServiceBusTransactionContext tx = receiver.createTransaction();
            receiver.complete(in, new CompleteOptions().setTransactionContext(tx));
            sender.sendMessage(new ServiceBusMessage("out").setMessageId("out-2"), tx);
            receiver.rollbackTransaction(tx);

            // The completion did not happen: the message returns once its 2-second lock has ended.
            ServiceBusReceivedMessage again = Emulator.receive(receiver, 1, Duration.ofSeconds(15)).get(0);
            assertEquals("in-2", again.getMessageId());
            assertEquals(1, again.getDeliveryCount());
            receiver.complete(again);
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size(), "the send was rolled back");
        }
    }

    /** Abandon, defer and dead-letter inside a transaction take effect at the commit. */
    @Test
    void settlementsOfEveryKindCommit() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient sender = shared.sender().queueName("java-tx-settle").buildClient();
             ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx-settle").buildClient()) {
            sender.sendMessages(List.of(new ServiceBusMessage("a").setMessageId("ab"),
                new ServiceBusMessage("d").setMessageId("df"), new ServiceBusMessage("x").setMessageId("dl")));
            List<ServiceBusReceivedMessage> got = Emulator.receive(receiver, 3);
            assertEquals(List.of("ab", "df", "dl"), Emulator.ids(got));

            ServiceBusTransactionContext tx = sender.createTransaction();
            receiver.abandon(got.get(0), new AbandonOptions().setTransactionContext(tx));
            receiver.defer(got.get(1), new DeferOptions().setTransactionContext(tx));
            receiver.deadLetter(got.get(2), new DeadLetterOptions().setDeadLetterReason("tx-reason")
                .setTransactionContext(tx));
            sender.commitTransaction(tx);

            ServiceBusReceivedMessage abandoned = Emulator.receive(receiver, 1).get(0);
            assertEquals("ab", abandoned.getMessageId());
            assertEquals(1, abandoned.getDeliveryCount());
            receiver.complete(abandoned);
            ServiceBusReceivedMessage deferred = receiver.receiveDeferredMessage(got.get(1).getSequenceNumber());
            assertEquals("df", deferred.getMessageId());
            receiver.complete(deferred);
            try (ServiceBusReceiverClient dlq = Emulator.builder().receiver().queueName("java-tx-settle")
                .subQueue(SubQueue.DEAD_LETTER_QUEUE).buildClient()) {
                ServiceBusReceivedMessage dead = Emulator.receive(dlq, 1).get(0);
                assertEquals("dl", dead.getMessageId());
                assertEquals("tx-reason", dead.getDeadLetterReason());
                dlq.complete(dead);
            }
        }
    }

    /**
     * Without send-via a transaction stays within one top-level entity: sending to a second queue in
     * the transaction is refused ("Local transactions cannot span multiple top-level entities"). The
     * Java SDK does not read a transactional send's outcome, so the refusal shows at the commit, which
     * rolls everything back: the completion of the input is not applied either.
     */
    @Test
    void secondEntityWithoutSendViaIsRefused() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient out = shared.sender().queueName("java-tx-out").buildClient();
             ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx-in").buildClient();
             ServiceBusSenderClient in = Emulator.builder().sender().queueName("java-tx-in").buildClient()) {
            in.sendMessage(new ServiceBusMessage("in").setMessageId("span-1"));
            ServiceBusReceivedMessage received = Emulator.receive(receiver, 1).get(0);
            ServiceBusTransactionContext tx = receiver.createTransaction();
            receiver.complete(received, new CompleteOptions().setTransactionContext(tx));
            out.sendMessage(new ServiceBusMessage("out").setMessageId("span-out"), tx);
            RuntimeException refused = assertThrows(RuntimeException.class, () -> receiver.commitTransaction(tx));
            assertTrue(String.valueOf(refused.getMessage()).contains("cannot span multiple top-level entities"),
                refused.toString());
            ServiceBusReceivedMessage again = Emulator.receive(receiver, 1, Duration.ofSeconds(15)).get(0);
            assertEquals("span-1", again.getMessageId());
            receiver.complete(again);
            try (ServiceBusReceiverClient outReader = Emulator.builder().receiver().queueName("java-tx-out")
                .buildClient()) {
                assertEquals(0, Emulator.receive(outReader, 1, Duration.ofSeconds(1)).size());
            }
        }
    }

    /**
     * Cross-entity transactions (enableCrossEntityTransactions): the sender to a second queue sends
     * via the entity the transaction started on ("Transfers and send via"), and the commit moves the
     * input's completion and the output's send together. (The SDK opens all links on one AMQP session
     * and names no via entity; the emulator routes such a send via the transaction's first entity.)
     */
    @Test
    void sendViaReachesTheDestinationOnCommit() {
        ServiceBusClientBuilder shared = Emulator.builder().enableCrossEntityTransactions();
        try (ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx-via-in").buildClient();
             ServiceBusSenderClient out = shared.sender().queueName("java-tx-via-out").buildClient();
             ServiceBusSenderClient in = Emulator.builder().sender().queueName("java-tx-via-in").buildClient();
             ServiceBusReceiverClient outReader = Emulator.builder().receiver().queueName("java-tx-via-out")
                 .buildClient()) {
            in.sendMessage(new ServiceBusMessage("in").setMessageId("via-in-1"));
            ServiceBusReceivedMessage received = Emulator.receive(receiver, 1).get(0);

            ServiceBusTransactionContext tx = receiver.createTransaction();
            receiver.complete(received, new CompleteOptions().setTransactionContext(tx));
            out.sendMessage(new ServiceBusMessage("out").setMessageId("via-out-1"), tx);
            assertEquals(0, Emulator.receive(outReader, 1, Duration.ofSeconds(1)).size(), "not before the commit");
            receiver.commitTransaction(tx);

            List<ServiceBusReceivedMessage> delivered = Emulator.receive(outReader, 1);
            assertEquals(List.of("via-out-1"), Emulator.ids(delivered));
            outReader.complete(delivered.get(0));
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size(), "the input was completed");
        }
    }

    /**
     * A deferred message is settled over $management (it is not on the receive link): in a
     * transaction, that update-disposition is staged like a settlement on the link.
     */
    @Test
    void deferredMessageCompletedInTransactionGoesAtCommit() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient sender = shared.sender().queueName("java-tx-deferred").buildClient();
             ServiceBusReceiverClient receiver = shared.receiver().queueName("java-tx-deferred").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("d").setMessageId("deferred-1"));
            ServiceBusReceivedMessage first = Emulator.receive(receiver, 1).get(0);
            receiver.defer(first);
            ServiceBusReceivedMessage deferred = receiver.receiveDeferredMessage(first.getSequenceNumber());

            ServiceBusTransactionContext committed = sender.createTransaction();
            receiver.complete(deferred, new CompleteOptions().setTransactionContext(committed));
            assertEquals(List.of("deferred-1"), Emulator.ids(peekAll(receiver)), "not before the commit");
            sender.commitTransaction(committed);
            assertEquals(List.of(), Emulator.ids(peekAll(receiver)));
        }
    }

    /**
     * Scheduling inside a transaction is refused by the emulator (its sequence number would have to
     * be given out before the commit decides whether the message exists), and the refusal dooms the
     * transaction: the commit rolls back the send made in it too.
     */
    @Test
    void scheduleInTransactionIsRefusedAndDoomsIt() {
        ServiceBusClientBuilder shared = Emulator.builder();
        try (ServiceBusSenderClient sender = shared.sender().queueName("java-tx-schedule").buildClient();
             ServiceBusReceiverClient observer = Emulator.builder().receiver().queueName("java-tx-schedule")
                 .buildClient()) {
            ServiceBusTransactionContext tx = sender.createTransaction();
            sender.sendMessage(new ServiceBusMessage("s").setMessageId("sent-in-doomed"), tx);
            RuntimeException refused = assertThrows(RuntimeException.class, () -> sender.scheduleMessage(
                new ServiceBusMessage("later").setMessageId("scheduled"), java.time.OffsetDateTime.now().plusHours(1), tx));
            assertTrue(String.valueOf(refused.getMessage()).contains("cannot be part of a transaction"),
                refused.toString());
            assertThrows(RuntimeException.class, () -> sender.commitTransaction(tx));
            assertEquals(List.of(), Emulator.ids(peekAll(observer)));
        }
    }
}
