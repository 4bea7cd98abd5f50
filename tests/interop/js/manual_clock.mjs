// Scenario: the emulator runs on a manual clock that the test moved an hour forward before this
// runs. A message scheduled for that hour is active, one whose TTL passed is in the dead-letter queue,
// and every time the JS SDK shows (enqueued, locked-until, expires-at) is the emulator's.
// argv: <scheduled queue> <expiring queue>
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [scheduledQueue, expiringQueue] = [process.argv[2] ?? "plain", process.argv[3] ?? "expiring"];

const times = (m) => ({
  ...describe(m),
  enqueuedTimeUtc: m.enqueuedTimeUtc?.getTime() ?? null,
  lockedUntilUtc: m.lockedUntilUtc?.getTime() ?? null,
  expiresAtUtc: m.expiresAtUtc?.getTime() ?? null,
});

await run(async (client) => {
  const receiver = client.createReceiver(scheduledQueue);
  const scheduled = await receiveAtLeast(receiver, 1);
  for (const message of scheduled) await receiver.completeMessage(message);
  await receiver.close();
  const dlq = client.createReceiver(expiringQueue, { subQueueType: "deadLetter" });
  const dead = await receiveAtLeast(dlq, 1);
  for (const message of dead) await dlq.completeMessage(message);
  await dlq.close();
  return { scheduled: scheduled.map(times), dead: dead.map(times) };
});
