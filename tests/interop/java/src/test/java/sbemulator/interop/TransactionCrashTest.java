package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.core.amqp.AmqpRetryOptions;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.ServiceBusTransactionContext;
import com.azure.messaging.servicebus.models.CompleteOptions;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * A transaction across a crash: a durable emulator process is killed with SIGKILL while one transaction
 * is committed and a second is open (its completion and send staged, not discharged). After the
 * restart the first transaction's effects are all there and none of the second's: its input message is
 * back, its output never appeared. tests/interop/test_java_sdk.py runs that emulator, kills it when
 * this test writes {@code kill-now} into SB_CRASH_CONTROL_DIR, restarts it on the same data directory
 * and writes the new connection string to {@code restarted}.
 */
@EnabledIfEnvironmentVariable(named = "SB_CRASH_CONNECTION_STRING", matches = ".+")
class TransactionCrashTest {

    private static String awaitFile(Path path, Duration wait) throws Exception {
        Instant deadline = Instant.now().plus(wait);
        while (Instant.now().isBefore(deadline)) {
            if (Files.exists(path)) {
                return Files.readString(path).trim();
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no " + path + " within " + wait);
    }

    private static void closeQuietlyInBackground(AutoCloseable... clients) {
        // Their emulator is gone: closing may wait on links that will never answer, so it must not hold
        // up the test (the JVM exits when the suite is done).
        Thread closer = new Thread(() -> {
            for (AutoCloseable c : clients) {
                try {
                    c.close();
                } catch (Exception ignored) {
                    // the connection is dead; nothing to report
                }
            }
        });
        closer.setDaemon(true);
        closer.start();
    }

    @Test
    void killBeforeDischargeKeepsTheCommittedAndDropsTheOpen() throws Exception {
        Path control = Path.of(Emulator.required("SB_CRASH_CONTROL_DIR"));
        ServiceBusClientBuilder shared = new ServiceBusClientBuilder()
            .connectionString(Emulator.required("SB_CRASH_CONNECTION_STRING"))
            .retryOptions(new AmqpRetryOptions().setMaxRetries(0).setTryTimeout(Duration.ofSeconds(30)));
        ServiceBusSenderClient sender = shared.sender().queueName("java-crash").buildClient();
        ServiceBusReceiverClient receiver = shared.receiver().queueName("java-crash").buildClient();
        try {
            sender.sendMessages(List.of(new ServiceBusMessage("1").setMessageId("c-1"),
                new ServiceBusMessage("2").setMessageId("c-2")));
            List<ServiceBusReceivedMessage> inputs = Emulator.receive(receiver, 2);
            assertEquals(List.of("c-1", "c-2"), Emulator.ids(inputs));

            ServiceBusTransactionContext committed = sender.createTransaction();
            receiver.complete(inputs.get(0), new CompleteOptions().setTransactionContext(committed));
            sender.sendMessage(new ServiceBusMessage("a").setMessageId("a-out"), committed);
            sender.commitTransaction(committed);

            ServiceBusTransactionContext open = sender.createTransaction();
            receiver.complete(inputs.get(1), new CompleteOptions().setTransactionContext(open));
            sender.sendMessage(new ServiceBusMessage("b").setMessageId("b-out"), open);
        } finally {
            // kill -9 now, before the open transaction's discharge.
            Files.writeString(control.resolve("kill-now"), "");
        }
        String restarted = awaitFile(control.resolve("restarted"), Duration.ofSeconds(60));
        closeQuietlyInBackground(sender, receiver);

        try (ServiceBusReceiverClient after = new ServiceBusClientBuilder().connectionString(restarted)
                .receiver().queueName("java-crash").buildClient()) {
            List<ServiceBusReceivedMessage> left = Emulator.receive(after, 2, Duration.ofSeconds(30));
            Set<String> ids = new TreeSet<>(Emulator.ids(left));
            // committed: c-1 completed, a-out sent; not committed: c-2 still there, b-out never sent.
            assertEquals(Set.of("a-out", "c-2"), ids);
            for (ServiceBusReceivedMessage m : left) {
                after.complete(m);
            }
            assertTrue(Emulator.receive(after, 1, Duration.ofSeconds(1)).isEmpty());
        }
    }
}
