// Shared helpers for the interop scenarios: one client per script, JSON on stdout, errors on stderr.
import { ServiceBusClient } from "@azure/service-bus";

/** A client for the namespace whose connection string the test passed in SB_CONNECTION_STRING. */
export function connect() {
  const connectionString = process.env.SB_CONNECTION_STRING;
  if (!connectionString) {
    throw new Error("SB_CONNECTION_STRING is not set");
  }
  return new ServiceBusClient(connectionString, { retryOptions: { maxRetries: 0, timeoutInMs: 20000 } });
}

/** A JSON-safe description of an application property value, keeping the JS type visible. */
function typed(value) {
  if (value instanceof Date) return { type: "date", value: value.toISOString() };
  if (Buffer.isBuffer(value)) return { type: "buffer", value: value.toString("base64") };
  if (value !== null && typeof value === "object" && typeof value.toNumber === "function") {
    return { type: "long", value: value.toString() };
  }
  return { type: typeof value, value };
}

/** What a test asserts on for a received message; Longs become strings, bodies stay as decoded. */
export function describe(message) {
  const props = {};
  for (const [key, value] of Object.entries(message.applicationProperties ?? {})) {
    props[key] = typed(value);
  }
  const body = Buffer.isBuffer(message.body) ? { buffer: message.body.toString("utf8") } : message.body;
  return {
    body,
    messageId: message.messageId ?? null,
    subject: message.subject ?? null,
    contentType: message.contentType ?? null,
    correlationId: message.correlationId ?? null,
    sessionId: message.sessionId ?? null,
    applicationProperties: props,
    deliveryCount: message.deliveryCount ?? null,
    sequenceNumber: message.sequenceNumber?.toString() ?? null,
    state: message.state ?? null,
    deadLetterReason: message.deadLetterReason ?? null,
    deadLetterErrorDescription: message.deadLetterErrorDescription ?? null,
    lockToken: message.lockToken ?? null,
  };
}

/** Receive until `count` messages arrived or `deadlineMs` passed (one receive call may return fewer). */
export async function receiveAtLeast(receiver, count, deadlineMs = 10000) {
  const got = [];
  const until = Date.now() + deadlineMs;
  while (got.length < count && Date.now() < until) {
    const batch = await receiver.receiveMessages(count - got.length, { maxWaitTimeInMs: 2000 });
    got.push(...batch);
  }
  return got;
}

/** Run a scenario: print its result as one JSON line, exit non-zero with the error on stderr. */
export async function run(scenario) {
  const client = connect();
  try {
    const result = await scenario(client);
    process.stdout.write(JSON.stringify(result) + "\n");
  } catch (err) {
    process.stderr.write(`${err?.name}: ${err?.message}\ncode=${err?.code}\n${err?.stack}\n`);
    process.exitCode = 1;
  } finally {
    await client.close();
  }
}
