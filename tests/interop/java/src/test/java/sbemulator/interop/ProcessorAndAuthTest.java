package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusException;
import com.azure.messaging.servicebus.ServiceBusFailureReason;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusProcessorClient;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.core.amqp.AmqpRetryOptions;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

class ProcessorAndAuthTest {

    /**
     * The processor renews the lock itself (maxAutoLockRenewDuration) while a handler runs longer than
     * the queue's 10-second LockDuration: the message is completed once and never redelivered. Ten, not
     * five: the SDK renews with about half the lock left, and a JVM on a loaded machine once took longer
     * than the 2.5 s that left with a 5-second lock.
     */
    @Test
    void processorRenewsLocksWhileHandlerRuns() throws InterruptedException {
        try (ServiceBusSenderClient sender = Emulator.builder().sender().queueName("java-processor").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("slow").setMessageId("slow-1"));
        }
        AtomicInteger deliveries = new AtomicInteger();
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch handled = new CountDownLatch(1);
        ServiceBusProcessorClient processor = Emulator.builder().processor().queueName("java-processor")
            .maxAutoLockRenewDuration(Duration.ofSeconds(30))
            .processMessage(context -> {
                deliveries.incrementAndGet();
                try {
                    Thread.sleep(21_000); // more than two lock durations
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                handled.countDown();
            })
            .processError(context -> errors.add(context.getException()))
            .buildProcessorClient();
        processor.start();
        try {
            assertTrue(handled.await(60, TimeUnit.SECONDS));
            // Give a lost lock the chance to show up as a second delivery before looking.
            Thread.sleep(3_000);
        } finally {
            processor.close();
        }
        assertEquals(1, deliveries.get());
        assertEquals(List.of(), errors);
        try (ServiceBusReceiverClient receiver = Emulator.builder().receiver().queueName("java-processor").buildClient()) {
            assertEquals(0, Emulator.receive(receiver, 1, Duration.ofSeconds(2)).size(), "the completion held");
        }
    }

    /** A key the namespace does not have: the token exchange on $cbs fails with the SDK's UNAUTHORIZED. */
    @Test
    void wrongKeyIsRefusedAsUnauthorized() {
        try (ServiceBusSenderClient sender = new ServiceBusClientBuilder()
                .connectionString(Emulator.connectionStringWithWrongKey())
                .retryOptions(new AmqpRetryOptions().setMaxRetries(0).setTryTimeout(Duration.ofSeconds(20)))
                .sender().queueName("java-send").buildClient()) {
            ServiceBusException refused = assertThrows(ServiceBusException.class,
                () -> sender.sendMessage(new ServiceBusMessage("x")));
            assertEquals(ServiceBusFailureReason.UNAUTHORIZED, refused.getReason(), refused.toString());
        }
    }
}
