// Scenario: session receivers on a session-enabled queue. argv: <queue> <named|next>
//   named: acceptSession, ordered receive, session state set/get and its persistence across
//          receivers, exclusive session locks, renewSessionLock, sending without a session id.
//   next:  acceptNextSession picks the session that has messages, and then the next one.
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [queue = "sessions", mode = "named"] = process.argv.slice(2);

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { name: err?.name ?? null, code: err?.code ?? null, message: String(err?.message ?? err) };
  }
}

async function named(client) {
  const out = {};
  const sender = client.createSender(queue);
  await sender.sendMessages([
    { body: "a-1", messageId: "a-1", sessionId: "s-a" },
    { body: "b-1", messageId: "b-1", sessionId: "s-b" },
    { body: "a-2", messageId: "a-2", sessionId: "s-a" },
    { body: "a-3", messageId: "a-3", sessionId: "s-a" },
  ]);
  // A session queue refuses messages without a session id.
  out.sendWithoutSession = await errorOf(sender.sendMessages({ body: "no-session", messageId: "x" }));
  await sender.close();

  const a = await client.acceptSession(queue, "s-a");
  out.acceptedSessionId = a.sessionId;
  out.lockedUntil = a.sessionLockedUntilUtc?.toISOString() ?? null;
  out.stateBefore = (await a.getSessionState()) ?? null;
  const fromA = await receiveAtLeast(a, 3);
  out.sessionA = fromA.map(describe);
  await a.setSessionState({ step: 2, owner: "js" });
  out.stateAfterSet = await a.getSessionState();
  // A second receiver cannot take a session that is locked.
  out.secondAccept = await errorOf(client.acceptSession(queue, "s-a"));
  for (const message of fromA) await a.completeMessage(message);
  out.renewedUntil = (await a.renewSessionLock()).toISOString();
  await a.close();

  const b = await client.acceptSession(queue, "s-b");
  out.sessionB = (await receiveAtLeast(b, 1)).map(describe);
  await b.close(); // unsettled: the lock is released with the session

  // State outlives the receiver that set it.
  const again = await client.acceptSession(queue, "s-a");
  out.stateInNewReceiver = await again.getSessionState();
  out.emptyAfterComplete = (await again.receiveMessages(1, { maxWaitTimeInMs: 500 })).map(describe);
  await again.close();
  return out;
}

async function next(client) {
  const out = {};
  const sender = client.createSender(queue);
  await sender.sendMessages({ body: "n-1", messageId: "n-1", sessionId: "s-first" });
  await sender.sendMessages({ body: "n-2", messageId: "n-2", sessionId: "s-second" });
  await sender.close();
  // Bounded, so a broker that never answers fails this scenario quickly instead of at the CBS timeout.
  const first = await client.acceptNextSession(queue, { abortSignal: AbortSignal.timeout(15000) });
  const second = await client.acceptNextSession(queue, { abortSignal: AbortSignal.timeout(15000) });
  out.sessionIds = [first.sessionId, second.sessionId];
  out.messages = [];
  for (const receiver of [first, second]) {
    const got = await receiveAtLeast(receiver, 1);
    for (const message of got) await receiver.completeMessage(message);
    out.messages.push(got.map(describe));
    await receiver.close();
  }
  return out;
}

await run(mode === "next" ? next : named);
