// Scenario: the Service Bus limits as the JS SDK reports them (name, code, retryable), one limit per
// run. argv: <mode> <queue> [wrong connection string]; modes: receivers (a second receiver on an entity
// bounded to one), links (senders until the per-connection bound refuses one), connections (a second
// client on a namespace bounded to one connection), token (a client with a wrong key), schedule
// (scheduling messages that together pass the entity's 256 KB).
// A namespace over its connection bound is not here: the SDK sees the emulator's open-then-close
// (amqp:resource-limit-exceeded) but its pending operation ends only at its timeout (ServiceTimeout).
import { ServiceBusClient } from "@azure/service-bus";
import { run } from "./lib.mjs";

const [mode, queue, other] = process.argv.slice(2);
const noRetry = { retryOptions: { maxRetries: 0, timeoutInMs: 20000 } };

function described(err) {
  return { name: err?.name ?? null, code: err?.code ?? null, retryable: err?.retryable ?? null,
           message: String(err?.message ?? err) };
}

async function refusal(action) {
  try {
    await action();
    return null;
  } catch (err) {
    return described(err);
  }
}

await run(async (client) => {
  if (mode === "receivers") {
    const first = client.createReceiver(queue);
    await first.receiveMessages(1, { maxWaitTimeInMs: 500 });
    const second = client.createReceiver(queue);
    const refused = await refusal(() => second.receiveMessages(1, { maxWaitTimeInMs: 500 }));
    await second.close();
    await first.close();
    return { refused };
  }
  if (mode === "links") {
    const senders = [];
    let refused = null;
    for (let i = 0; i < 20 && refused === null; i++) {
      const sender = client.createSender(queue);
      senders.push(sender);
      refused = await refusal(() => sender.sendMessages({ body: `m${i}` }));
    }
    for (const sender of senders) await sender.close();
    return { refused, opened: senders.length - 1 };
  }
  if (mode === "connections") {
    const first = client.createSender(queue);
    await first.sendMessages({ body: "first" });
    const second = new ServiceBusClient(process.env.SB_CONNECTION_STRING, noRetry);
    const refused = await refusal(() => second.createSender(queue).sendMessages({ body: "second" }));
    await second.close();
    await first.close();
    return { refused };
  }
  if (mode === "token") {
    const wrong = new ServiceBusClient(other, noRetry);
    const refused = await refusal(() => wrong.createSender(queue).sendMessages({ body: "refused" }));
    await wrong.close();
    return { refused };
  }
  if (mode === "schedule") {
    // The refusal is the request's disposition, which the SDK's request-response link does not read:
    // it waits for a reply until its operation timeout (3 s here), as with the service
    // (azure-sdk-for-js issue 23623).
    const short = new ServiceBusClient(process.env.SB_CONNECTION_STRING,
                                       { retryOptions: { maxRetries: 0, timeoutInMs: 3000 } });
    const sender = short.createSender(queue);
    const later = new Date(Date.now() + 3600 * 1000);
    const messages = Array.from({ length: 20 }, (_, i) => ({ body: "s".repeat(20 * 1024), messageId: `s${i}` }));
    const refused = await refusal(() => sender.scheduleMessages(messages, later));
    await sender.close();
    await short.close();
    return { refused };
  }
  throw new Error(`unknown mode ${mode}`);
});
