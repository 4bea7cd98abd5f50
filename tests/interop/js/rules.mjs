// Scenario: the rule manager on a subscription ($management add-rule / enumerate-rules /
// remove-rule), and what the rules do to delivery. argv: <topic> <subscription>
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [topic = "events", subscription = "all"] = process.argv.slice(2);

await run(async (client) => {
  const out = {};
  const rules = client.createRuleManager(topic, subscription);
  // listRules pages through enumerate-rules; collect every page.
  const list = async () => {
    const all = [];
    for await (const rule of rules.listRules()) all.push({ name: rule.name, filter: rule.filter, action: rule.action });
    return all;
  };
  const names = async () => (await list()).map((r) => r.name).sort();
  out.initial = await list();

  await rules.createRule("only-red", { sqlExpression: "color = 'red'" });
  await rules.createRule("tagged", { sqlExpression: "1=1" }, { sqlExpression: "SET tagged = 'yes'" });
  await rules.createRule("by-correlation", { correlationId: "corr-1", applicationProperties: { kind: "x" } });
  out.afterCreate = await list();

  // With $Default gone only the new rules decide what the subscription gets.
  await rules.deleteRule("$Default");
  await rules.deleteRule("tagged");
  out.afterDelete = await names();

  const sender = client.createSender(topic);
  await sender.sendMessages([
    { body: "red", messageId: "red", applicationProperties: { color: "red" } },
    { body: "blue", messageId: "blue", applicationProperties: { color: "blue" } },
    { body: "corr", messageId: "corr", correlationId: "corr-1", applicationProperties: { kind: "x" } },
  ]);
  await sender.close();
  const receiver = client.createReceiver(topic, subscription);
  const got = await receiveAtLeast(receiver, 2, 5000);
  for (const message of got) await receiver.completeMessage(message);
  out.delivered = got.map(describe);
  out.extra = (await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).map(describe);
  await receiver.close();

  // Removing a rule that does not exist is an error the caller can see.
  try {
    await rules.deleteRule("no-such-rule");
    out.deleteMissing = null;
  } catch (err) {
    out.deleteMissing = { name: err?.name ?? null, code: err?.code ?? null };
  }
  // A rule whose SQL does not parse is refused with the parser's reason.
  try {
    await rules.createRule("broken", { sqlExpression: "color = = 'red'" });
    out.badSql = null;
  } catch (err) {
    out.badSql = { name: err?.name ?? null, code: err?.code ?? null, message: String(err?.message ?? "") };
  }
  out.afterBadSql = await names();
  return out;
});
