// Scenario: the entity's size limit as the JS SDK sees it: the batch size it reads from the
// sender link's attach, tryAddMessage refusing overflow, and an oversized single send. argv: <queue>
import { run } from "./lib.mjs";

const queue = process.argv[2] ?? "small";

await run(async (client) => {
  const sender = client.createSender(queue);
  const batch = await sender.createMessageBatch();
  const chunk = "x".repeat(40 * 1024);
  const added = [batch.tryAddMessage({ body: chunk, messageId: "c1" }), batch.tryAddMessage({ body: chunk, messageId: "c2" })];
  await sender.sendMessages(batch);
  let oversized = null;
  try {
    await sender.sendMessages({ body: "y".repeat(100 * 1024), messageId: "big" });
  } catch (err) {
    oversized = { name: err?.name ?? null, code: err?.code ?? null };
  }
  await sender.close();
  const receiver = client.createReceiver(queue, { receiveMode: "receiveAndDelete" });
  const got = await receiver.receiveMessages(5, { maxWaitTimeInMs: 2000 });
  await receiver.close();
  return { maxSizeInBytes: batch.maxSizeInBytes, added, count: batch.count, oversized, receivedIds: got.map((m) => m.messageId) };
});
