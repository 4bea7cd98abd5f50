// Scenario: AMQP over WebSockets (wss://, the JS SDK's only WebSocket scheme) to the emulator's HTTPS
// management port, pointed there with customEndpointAddress; send, peek-lock receive, complete one,
// abandon one and complete it on redelivery.
// env: SB_CONNECTION_STRING, SB_CUSTOM_ENDPOINT (sb://host:port), SB_CA (the emulator's CA certificate)
// argv: <queue>
import { readFileSync } from "node:fs";
import { ServiceBusClient } from "@azure/service-bus";
import WebSocket from "ws";
import { describe, receiveAtLeast } from "./lib.mjs";

const queue = process.argv[2] ?? "orders";
const client = new ServiceBusClient(process.env.SB_CONNECTION_STRING, {
  customEndpointAddress: process.env.SB_CUSTOM_ENDPOINT,
  webSocketOptions: { webSocket: WebSocket, webSocketConstructorOptions: { ca: readFileSync(process.env.SB_CA) } },
  retryOptions: { maxRetries: 0, timeoutInMs: 20000 },
});
try {
  const sender = client.createSender(queue);
  await sender.sendMessages([{ body: "over websocket 1", messageId: "w1" }, { body: "over websocket 2", messageId: "w2" }]);
  await sender.close();
  const receiver = client.createReceiver(queue, { receiveMode: "peekLock" });
  const first = await receiveAtLeast(receiver, 2);
  const abandoned = first.find((m) => m.messageId === "w2");
  await receiver.completeMessage(first.find((m) => m.messageId === "w1"));
  await receiver.abandonMessage(abandoned);
  const again = await receiveAtLeast(receiver, 1);
  for (const message of again) await receiver.completeMessage(message);
  const leftover = await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 });
  await receiver.close();
  process.stdout.write(JSON.stringify({ first: first.map(describe), again: again.map(describe), leftover: leftover.length }) + "\n");
} catch (err) {
  process.stderr.write(`${err?.name}: ${err?.message}\ncode=${err?.code}\n${err?.stack}\n`);
  process.exitCode = 1;
} finally {
  await client.close();
}
