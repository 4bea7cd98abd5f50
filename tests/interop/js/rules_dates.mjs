// Scenario: a correlation rule on a Date application property, created with the rule manager
// ($management add-rule), listed back (enumerate-rules) and applied. argv: <topic> <subscription>
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [topic = "events", subscription = "all"] = process.argv.slice(2);
const due = new Date(Date.UTC(2030, 4, 17, 8, 30));

await run(async (client) => {
  const out = {};
  const rules = client.createRuleManager(topic, subscription);
  await rules.createRule("by-date", { applicationProperties: { due } });
  await rules.deleteRule("$Default");
  out.rules = [];
  for await (const rule of rules.listRules()) {
    const due = rule.filter.applicationProperties?.due;
    out.rules.push({ name: rule.name, due: due instanceof Date ? due.toISOString() : due ?? null });
  }

  const sender = client.createSender(topic);
  await sender.sendMessages([
    { body: "same", messageId: "same", applicationProperties: { due } },
    { body: "later", messageId: "later", applicationProperties: { due: new Date(due.getTime() + 1000) } },
  ]);
  await sender.close();
  const receiver = client.createReceiver(topic, subscription);
  const got = await receiveAtLeast(receiver, 1, 5000);
  for (const message of got) await receiver.completeMessage(message);
  out.delivered = got.map(describe).map((m) => m.messageId);
  out.extra = (await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).map((m) => m.messageId);
  await receiver.close();
  return out;
});
