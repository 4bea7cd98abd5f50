package sbemulator.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.models.CorrelationRuleFilter;
import com.azure.messaging.servicebus.administration.models.CreateRuleOptions;
import com.azure.messaging.servicebus.administration.models.CreateSubscriptionOptions;
import com.azure.messaging.servicebus.administration.models.QueueProperties;
import com.azure.messaging.servicebus.administration.models.RuleProperties;
import com.azure.messaging.servicebus.administration.models.SqlRuleAction;
import com.azure.messaging.servicebus.administration.models.SqlRuleFilter;
import com.azure.messaging.servicebus.administration.models.TopicProperties;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The Java ServiceBusAdministrationClient over the emulator's HTTPS endpoint (Atom XML), trusting the
 * emulator's CA through the HTTP client's TLS context: a topic, subscriptions with a SQL rule (with an
 * action) and a correlation rule, and what each subscription then receives.
 */
class AdminRulesTest {

    @Test
    void topicWithSqlAndCorrelationRulesRoutesMessages() {
        ServiceBusAdministrationClient admin = Emulator.admin();
        TopicProperties topic = admin.createTopic("java-rules");
        assertEquals("java-rules", topic.getName());
        admin.createSubscription("java-rules", "sql", "high", new CreateSubscriptionOptions(),
            new CreateRuleOptions(new SqlRuleFilter("Priority = 'High'")).setAction(new SqlRuleAction("SET routed = 'sql'")));
        CorrelationRuleFilter correlation = new CorrelationRuleFilter().setCorrelationId("order-7");
        correlation.getProperties().put("kind", "audit");
        admin.createSubscription("java-rules", "corr", "audit", new CreateSubscriptionOptions(),
            new CreateRuleOptions(correlation));

        List<String> sqlRules = new ArrayList<>();
        for (RuleProperties rule : admin.listRules("java-rules", "sql")) {
            sqlRules.add(rule.getName());
            assertEquals("Priority = 'High'", ((SqlRuleFilter) rule.getFilter()).getSqlExpression());
            assertEquals("SET routed = 'sql'", ((SqlRuleAction) rule.getAction()).getSqlExpression());
        }
        assertEquals(List.of("high"), sqlRules);
        RuleProperties audit = admin.getRule("java-rules", "corr", "audit");
        CorrelationRuleFilter read = (CorrelationRuleFilter) audit.getFilter();
        assertEquals("order-7", read.getCorrelationId());
        assertEquals("audit", read.getProperties().get("kind"));

        try (ServiceBusSenderClient sender = Emulator.builder().sender().topicName("java-rules").buildClient()) {
            ServiceBusMessage high = new ServiceBusMessage("h").setMessageId("high-1");
            high.getApplicationProperties().put("Priority", "High");
            ServiceBusMessage low = new ServiceBusMessage("l").setMessageId("low-1");
            low.getApplicationProperties().put("Priority", "Low");
            ServiceBusMessage auditMsg = new ServiceBusMessage("a").setMessageId("audit-1").setCorrelationId("order-7");
            auditMsg.getApplicationProperties().put("kind", "audit");
            ServiceBusMessage wrongKind = new ServiceBusMessage("w").setMessageId("audit-2").setCorrelationId("order-7");
            wrongKind.getApplicationProperties().put("kind", "other");
            sender.sendMessages(List.of(high, low, auditMsg, wrongKind));
        }
        try (ServiceBusReceiverClient sql = Emulator.builder().receiver().topicName("java-rules")
                .subscriptionName("sql").buildClient();
             ServiceBusReceiverClient corr = Emulator.builder().receiver().topicName("java-rules")
                .subscriptionName("corr").buildClient()) {
            List<ServiceBusReceivedMessage> highs = Emulator.receive(sql, 2, Duration.ofSeconds(3));
            assertEquals(List.of("high-1"), Emulator.ids(highs));
            assertEquals("sql", highs.get(0).getApplicationProperties().get("routed"));
            List<ServiceBusReceivedMessage> audits = Emulator.receive(corr, 2, Duration.ofSeconds(3));
            assertEquals(List.of("audit-1"), Emulator.ids(audits));
        }

        assertEquals(2, admin.getTopicRuntimeProperties("java-rules").getSubscriptionCount());
        admin.deleteTopic("java-rules");
        assertTrue(admin.getTopicExists("java-rules") == false);
    }

    @Test
    void queueCreatedThroughAdminClientTakesMessages() {
        ServiceBusAdministrationClient admin = Emulator.admin();
        QueueProperties created = admin.createQueue("java-admin-queue");
        assertEquals(Duration.ofMinutes(1), created.getLockDuration());
        try (ServiceBusSenderClient sender = Emulator.builder().sender().queueName("java-admin-queue").buildClient()) {
            sender.sendMessage(new ServiceBusMessage("x"));
        }
        assertEquals(1, admin.getQueueRuntimeProperties("java-admin-queue").getActiveMessageCount());
        admin.deleteQueue("java-admin-queue");
    }
}
