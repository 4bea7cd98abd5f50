// Scenario: a queue that holds its MaxSizeInMegabytes as the JS SDK sees it: sends fail with
// QuotaExceeded, the same sender sends again once a receiver took some. argv: <queue>
import { run } from "./lib.mjs";

const queue = process.argv[2] ?? "tiny";

await run(async (client) => {
  const sender = client.createSender(queue);
  const body = "x".repeat(200 * 1024);
  let taken = 0;
  let refusal = null;
  for (let i = 0; i < 50 && refusal === null; i++) {
    try {
      await sender.sendMessages({ body, messageId: `m${i}` });
      taken++;
    } catch (err) {
      refusal = { name: err?.name ?? null, code: err?.code ?? null, retryable: err?.retryable ?? null };
    }
  }
  const receiver = client.createReceiver(queue, { receiveMode: "receiveAndDelete" });
  const drained = await receiver.receiveMessages(2, { maxWaitTimeInMs: 5000 });
  await receiver.close();
  let afterDrain = "sent";
  try {
    await sender.sendMessages({ body, messageId: "after" });
  } catch (err) {
    afterDrain = err?.code ?? String(err);
  }
  await sender.close();
  return { taken, refusal, drained: drained.length, afterDrain };
});
