// Scenario: a peek-locked message whose lock the emulator's manual clock moves past. The script
// receives the message, asks the emulator (POST /$admin/clock/advance, a SAS token with Manage, the
// emulator's CA) to move its clock past the lock, then completes: the JS SDK gets MessageLockLost
// from the emulator's answer. The message is then received again with its delivery counted.
// argv: <queue> <seconds to advance>; env: SB_ADMIN_URL, SB_CA_PATH, SB_KEY_NAME, SB_KEY
import crypto from "node:crypto";
import fs from "node:fs";
import https from "node:https";
import { run, describe, receiveAtLeast } from "./lib.mjs";

const [queue, seconds] = [process.argv[2] ?? "plain", Number(process.argv[3] ?? "61")];

function sasToken(uri, keyName, key, ttlSeconds = 300) {
  const encoded = encodeURIComponent(uri);
  const expiry = Math.floor(Date.now() / 1000) + ttlSeconds;
  const signature = crypto.createHmac("sha256", key).update(`${encoded}\n${expiry}`).digest("base64");
  return `SharedAccessSignature sr=${encoded}&sig=${encodeURIComponent(signature)}&se=${expiry}&skn=${keyName}`;
}

function advance(by) {
  const url = new URL("/$admin/clock/advance", process.env.SB_ADMIN_URL);
  const body = JSON.stringify({ seconds: by });
  const headers = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body),
    Authorization: sasToken(process.env.SB_ADMIN_URL, process.env.SB_KEY_NAME, process.env.SB_KEY) };
  return new Promise((resolve, reject) => {
    const request = https.request(url, { method: "POST", headers, ca: fs.readFileSync(process.env.SB_CA_PATH),
      timeout: 20000 }, (response) => {
      let text = "";
      response.on("data", (chunk) => { text += chunk; });
      response.on("end", () => response.statusCode === 200 ? resolve(JSON.parse(text))
        : reject(new Error(`advance: ${response.statusCode} ${text}`)));
    });
    request.on("timeout", () => request.destroy(new Error("advance: timed out")));
    request.on("error", reject);
    request.end(body);
  });
}

await run(async (client) => {
  const receiver = client.createReceiver(queue);
  const [first] = await receiveAtLeast(receiver, 1);
  const lockedUntil = first.lockedUntilUtc.getTime();
  const clock = await advance(seconds);
  let error = null;
  try {
    await receiver.completeMessage(first);
  } catch (err) {
    error = { name: err.name, code: err.code ?? null, retryable: err.retryable ?? null };
  }
  const [again] = await receiveAtLeast(receiver, 1);
  await receiver.completeMessage(again);
  await receiver.close();
  return { lockedUntil, clockMs: clock.nowMs, error, again: describe(again) };
});
