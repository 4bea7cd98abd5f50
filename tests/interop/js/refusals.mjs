// Scenario: what the JS SDK reports when the service refuses an operation: a send to and a receive from a
// suspended (Disabled) queue, and a message whose property exceeds the 32 KB quota. argv: <disabled queue>
// <open queue>
import { run } from "./lib.mjs";

const disabled = process.argv[2] ?? "orders";
const open = process.argv[3] ?? "retry3";

/** The error's name and Service Bus code, or null when the operation succeeded. */
async function outcome(operation) {
  try {
    await operation();
    return null;
  } catch (err) {
    return { name: err?.name ?? null, code: err?.code ?? null };
  }
}

await run(async (client) => {
  const sender = client.createSender(disabled);
  const send = await outcome(() => sender.sendMessages({ body: "refused", messageId: "refused" }));
  await sender.close();
  const receiver = client.createReceiver(disabled);
  const receive = await outcome(() => receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }));
  await receiver.close();
  const openSender = client.createSender(open);
  const property = await outcome(() =>
    openSender.sendMessages({ body: "big", messageId: "big", applicationProperties: { blob: "x".repeat(33 * 1024) } }),
  );
  await openSender.close();
  return { send, receive, property };
});
