// Scenario helper: receive <count> messages from <entity> in peek-lock, complete them, print them.
// argv: <queue or topic/Subscriptions/sub> <count> [deadlineMs]
// Asking for more than is expected, with a short deadline, shows that nothing else arrives.
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [entity, countArg, deadlineArg] = process.argv.slice(2);
const count = Number(countArg ?? "1");
const deadlineMs = Number(deadlineArg ?? "10000");

await run(async (client) => {
  const parts = entity.split("/Subscriptions/");
  const receiver = parts.length === 2 ? client.createReceiver(parts[0], parts[1]) : client.createReceiver(entity);
  const received = await receiveAtLeast(receiver, count, deadlineMs);
  for (const message of received) {
    await receiver.completeMessage(message);
  }
  await receiver.close();
  return { received: received.map(describe) };
});
