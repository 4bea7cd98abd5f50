// Scenario: receiveAndDelete, abandon, defer + receiveDeferredMessages, peekMessages,
// scheduleMessages + cancelScheduledMessages, each checked from the JS side. argv: <queue>
import Long from "long";
import { run, describe, receiveAtLeast } from "./lib.mjs";

const queue = process.argv[2] ?? "orders";

/** Peek from the start of the queue with a fresh receiver (a receiver's peek cursor moves on). */
async function peekAll(client) {
  const peeker = client.createReceiver(queue);
  const peeked = await peeker.peekMessages(50, { fromSequenceNumber: Long.fromNumber(1) });
  await peeker.close();
  return peeked.map(describe);
}

await run(async (client) => {
  const sender = client.createSender(queue);
  const out = {};

  // receiveAndDelete: messages are gone as soon as they are delivered.
  await sender.sendMessages([{ body: "rd-1", messageId: "rd-1" }, { body: "rd-2", messageId: "rd-2" }]);
  const rd = client.createReceiver(queue, { receiveMode: "receiveAndDelete" });
  out.receiveAndDelete = (await receiveAtLeast(rd, 2)).map(describe);
  await rd.close();
  out.afterReceiveAndDelete = await peekAll(client);

  const receiver = client.createReceiver(queue);

  // abandon: the message comes straight back with its delivery count raised.
  await sender.sendMessages({ body: "ab", messageId: "ab" });
  const [firstTry] = await receiveAtLeast(receiver, 1);
  await receiver.abandonMessage(firstTry, { reason: "retry" });
  const [secondTry] = await receiveAtLeast(receiver, 1);
  out.abandon = [describe(firstTry), describe(secondTry), secondTry.applicationProperties ?? {}];
  await receiver.completeMessage(secondTry);

  // defer: invisible to receive, reachable by sequence number, then completable.
  await sender.sendMessages({ body: "df", messageId: "df" });
  const [toDefer] = await receiveAtLeast(receiver, 1);
  await receiver.deferMessage(toDefer);
  out.afterDeferReceive = (await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 })).map(describe);
  const deferred = await receiver.receiveDeferredMessages([toDefer.sequenceNumber]);
  out.deferred = deferred.map(describe);
  for (const message of deferred) await receiver.completeMessage(message);

  // peek: sees messages without locking them, so they can still be received afterwards.
  await sender.sendMessages(["p1", "p2", "p3"].map((id) => ({ body: id, messageId: id })));
  out.peeked = await peekAll(client);
  const afterPeek = await receiveAtLeast(receiver, 3);
  out.receivedAfterPeek = afterPeek.map(describe);
  for (const message of afterPeek) await receiver.completeMessage(message);

  // schedule: a far-future message is visible to peek as scheduled until cancelled;
  // a near-future one is delivered once due.
  const far = new Date(Date.now() + 3600 * 1000);
  const [farSeq] = await sender.scheduleMessages({ body: "far", messageId: "far" }, far);
  const soon = new Date(Date.now() + 2000);
  const [soonSeq] = await sender.scheduleMessages({ body: "soon", messageId: "soon" }, soon);
  out.scheduledSequenceNumbers = [farSeq.toString(), soonSeq.toString()];
  out.peekScheduled = await peekAll(client);
  out.beforeDue = (await receiver.receiveMessages(1, { maxWaitTimeInMs: 500 })).map(describe);
  await sender.cancelScheduledMessages([farSeq]);
  const due = await receiveAtLeast(receiver, 1, 10000);
  out.due = due.map(describe);
  out.dueAt = due.map((m) => m.scheduledEnqueueTimeUtc?.toISOString() ?? null);
  out.soonAt = soon.toISOString();
  for (const message of due) await receiver.completeMessage(message);
  out.afterCancel = await peekAll(client);

  await receiver.close();
  await sender.close();
  return out;
});
