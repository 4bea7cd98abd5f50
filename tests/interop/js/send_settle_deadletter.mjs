// Scenario: the three JS send shapes, then peek-lock receive, complete five and dead-letter one.
// argv: <queue>
import { run, describe, receiveAtLeast } from "./lib.mjs";

const queue = process.argv[2] ?? "orders";

await run(async (client) => {
  const sender = client.createSender(queue);
  await sender.sendMessages({ body: "single", messageId: "m1" });
  await sender.sendMessages([
    { body: { kind: "json", n: 2 }, messageId: "m2" },
    { body: Buffer.from("raw-bytes"), messageId: "m3" },
  ]);
  const batch = await sender.createMessageBatch();
  const added = ["m4", "m5", "m6"].map((id) => batch.tryAddMessage({ body: `batched ${id}`, messageId: id }));
  await sender.sendMessages(batch);
  await sender.close();

  const receiver = client.createReceiver(queue, { receiveMode: "peekLock" });
  const received = await receiveAtLeast(receiver, 6);
  for (const message of received) {
    if (message.messageId === "m5") {
      await receiver.deadLetterMessage(message, {
        deadLetterReason: "InvalidPayload",
        deadLetterErrorDescription: "field 'amount' is missing",
      });
    } else {
      await receiver.completeMessage(message);
    }
  }
  // Nothing may come back: completed messages are gone, the dead-lettered one moved away.
  const leftover = await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 });
  await receiver.close();
  return {
    batchAdded: added,
    batchCount: batch.count,
    received: received.map(describe),
    leftover: leftover.map(describe),
  };
});
