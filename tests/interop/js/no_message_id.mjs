// Scenario: a message sent without a messageId (the JS SDK never generates one) is received in
// peek-lock and completed. The JS receiver keys its lock-renewal timers by messageId, so this only
// works when the broker assigns an id, as Service Bus does. argv: <queue>
import { run, describe, receiveAtLeast } from "./lib.mjs";

const queue = process.argv[2] ?? "orders";

await run(async (client) => {
  const sender = client.createSender(queue);
  await sender.sendMessages([{ body: "anonymous-1" }, { body: "anonymous-2" }]);
  await sender.close();
  const receiver = client.createReceiver(queue);
  const got = await receiveAtLeast(receiver, 2);
  for (const message of got) await receiver.completeMessage(message);
  const leftover = await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 });
  await receiver.close();
  return { received: got.map(describe), leftover: leftover.map(describe) };
});
