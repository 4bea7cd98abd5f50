// Scenario: one namespace of an emulator that runs several (docs/emulator.md, "Several namespaces"),
// picked by nothing but the connection string's Endpoint port. Sends one message and peeks what the
// queue holds; a send that the service refuses (a key of another namespace) is reported, not thrown.
// argv: <queue> <body>
import { run } from "./lib.mjs";

const [queue, body] = [process.argv[2] ?? "work", process.argv[3] ?? "hello"];

await run(async (client) => {
  const sender = client.createSender(queue);
  try {
    await sender.sendMessages({ body });
  } catch (err) {
    return { sent: false, error: { name: err?.name ?? null, code: err?.code ?? null } };
  } finally {
    await sender.close();
  }
  const receiver = client.createReceiver(queue);
  const peeked = await receiver.peekMessages(10);
  await receiver.close();
  return { sent: true, bodies: peeked.map((m) => m.body) };
});
