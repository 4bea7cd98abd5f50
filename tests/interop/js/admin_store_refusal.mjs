// Scenario: the JS ServiceBusAdministrationClient creating a queue the emulator's store cannot write:
// prints the error's code, HTTP status and message. argv: <queue name>. The emulator's CA comes from
// NODE_EXTRA_CA_CERTS; SB_CONNECTION_STRING carries the management endpoint (its HTTPS port).
import { ServiceBusAdministrationClient } from "@azure/service-bus";

const name = process.argv[2] ?? "js-refused";
// no retries: the core pipeline would retry a 503 by itself, the test wants the first answer
const admin = new ServiceBusAdministrationClient(process.env.SB_CONNECTION_STRING, { retryOptions: { maxRetries: 0 } });
let outcome = { code: null, statusCode: null, message: null };
try {
  await admin.createQueue(name);
} catch (err) {
  outcome = { code: err?.code ?? null, statusCode: err?.statusCode ?? null, message: err?.message ?? null };
}
console.log(JSON.stringify(outcome));
