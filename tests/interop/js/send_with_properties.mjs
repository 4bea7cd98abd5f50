// Scenario helper: send messages whose every settable field a receiver in another SDK should see.
// argv: <queue>
import { run } from "./lib.mjs";

const queue = process.argv[2] ?? "orders";

export const MESSAGES = [
  {
    body: "hello from js",
    messageId: "js-1",
    subject: "greeting",
    contentType: "text/plain",
    correlationId: "corr-js-1",
    applicationProperties: { text: "héllo wörld", count: 42, negative: -7, ratio: 2.5, flag: true, off: false },
  },
  {
    body: { order: 17, items: ["a", "b"] },
    messageId: "js-2",
    subject: "order",
    contentType: "application/json",
    correlationId: "corr-js-2",
    applicationProperties: { Priority: "High", big: 5000000000 },
  },
];

await run(async (client) => {
  const sender = client.createSender(queue);
  await sender.sendMessages(MESSAGES);
  await sender.close();
  return { sent: MESSAGES.length };
});
