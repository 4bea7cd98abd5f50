// Scenario: what the SDKs' own tests expect of Service Bus, as the JavaScript SDK sees it.
// argv: <rights|sections> <queue>
//   rights:   send and receive with the connection string's key; each outcome (null or the error).
//   sections: a peek-locked message's lock token and its x-opt-lock-token delivery annotation; a sender
//             to a missing queue. (The empty session id is not here: the JS SDK tests the session id the
//             attach returns for truthiness and cannot accept session "".)
import { run, receiveAtLeast } from "./lib.mjs";

const [mode = "rights", queue = "orders"] = process.argv.slice(2);

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { name: err?.name ?? null, code: err?.code ?? null, message: String(err?.message ?? err) };
  }
}

/** A uuid as rhea decodes it (16 bytes, possibly wrapped in a typed value) in its text form. */
function uuidText(value) {
  const raw = value?.value ?? value;
  if (raw === undefined || raw === null) return null;
  if (typeof raw !== "object") return String(raw);
  const hex = Buffer.from(Array.from({ length: 16 }, (_, i) => raw[i])).toString("hex");
  return [hex.slice(0, 8), hex.slice(8, 12), hex.slice(12, 16), hex.slice(16, 20), hex.slice(20)].join("-");
}

async function rights(client) {
  const sender = client.createSender(queue);
  const send = await errorOf(sender.sendMessages({ body: "by this key" }));
  await sender.close();
  const receiver = client.createReceiver(queue);
  const receive = await errorOf(receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }));
  await receiver.close();
  return { send, receive };
}

async function sections(client) {
  const out = {};
  const sender = client.createSender(queue);
  await sender.sendMessages({ body: "annotated" });
  await sender.close();
  const receiver = client.createReceiver(queue);
  const [message] = await receiveAtLeast(receiver, 1);
  const annotations = message._rawAmqpMessage?.deliveryAnnotations ?? {};
  const token = annotations["x-opt-lock-token"];
  out.lockToken = message.lockToken ?? null;
  out.annotationLockToken = uuidText(token);
  await receiver.completeMessage(message);
  await receiver.close();

  const missing = client.createSender("no-such-queue");
  out.missing = await errorOf(missing.sendMessages({ body: "nowhere" }));
  await missing.close();
  return out;
}

run(mode === "rights" ? rights : sections);
