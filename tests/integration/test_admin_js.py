"""@azure/service-bus's ServiceBusAdministrationClient (JavaScript) against the admin port.

Node trusts the emulator's CA through NODE_EXTRA_CA_CERTS; the connection string is the emulator's with
the admin port in its Endpoint. The script is kept here (run with ``node --input-type=module -e`` from
the repository root, so ``@azure/service-bus`` resolves to node_modules)."""

from __future__ import annotations

import json
import os
import subprocess

from sbemulator import Emulator
from tests.interop.node import NODE, REPO_ROOT, requires_js_sdk

pytestmark = requires_js_sdk

SCRIPT = r"""
import { ServiceBusAdministrationClient } from "@azure/service-bus";

const client = new ServiceBusAdministrationClient(process.env.SB_ADMIN_CONNECTION_STRING);
const out = {};
const created = await client.createQueue("js-queue", { lockDuration: "PT45S", maxDeliveryCount: 4 });
out.created = { name: created.name, lockDuration: created.lockDuration, maxDeliveryCount: created.maxDeliveryCount };
out.queues = [];
for await (const q of client.listQueues()) out.queues.push(q.name);
const queue = await client.getQueue("js-queue");
queue.maxDeliveryCount = 6;
await client.updateQueue(queue);
out.updated = (await client.getQueue("js-queue")).maxDeliveryCount;
out.exists = [await client.queueExists("js-queue"), await client.queueExists("no-such-queue")];
const rt = await client.getQueueRuntimeProperties("orders");
out.ordersRuntime = { active: rt.activeMessageCount, total: rt.totalMessageCount };
await client.createTopic("js-topic");
await client.createSubscription("js-topic", "js-sub");
await client.createRule("js-topic", "js-sub", "red", { sqlExpression: "color = 'red'" });
out.rules = [];
for await (const r of client.listRules("js-topic", "js-sub")) out.rules.push(r.name);
out.namespace = (await client.getNamespaceProperties()).name;
try {
  await client.createQueue("js-queue");
  out.conflict = "no error";
} catch (e) {
  out.conflict = { statusCode: e.statusCode, code: e.code };
}
await client.deleteQueue("js-queue");
out.afterDelete = await client.queueExists("js-queue");
console.log(JSON.stringify(out));
"""


def test_js_admin_client_creates_and_lists_entities(emulator: Emulator) -> None:
    from azure.servicebus import ServiceBusClient, ServiceBusMessage

    with ServiceBusClient.from_connection_string(emulator.connection_string) as sb:
        with sb.get_queue_sender("orders") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])

    assert emulator.admin_connection_string is not None and emulator.ca_path is not None
    env = {**os.environ, "SB_ADMIN_CONNECTION_STRING": emulator.admin_connection_string,
           "NODE_EXTRA_CA_CERTS": emulator.ca_path}
    proc = subprocess.run([NODE or "node", "--input-type=module", "-e", SCRIPT], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    assert out["created"] == {"name": "js-queue", "lockDuration": "PT45S", "maxDeliveryCount": 4}
    assert "js-queue" in out["queues"] and "orders" in out["queues"]
    assert out["updated"] == 6
    assert out["exists"] == [True, False]
    assert out["ordersRuntime"] == {"active": 2, "total": 2}
    assert out["rules"] == ["$Default", "red"]
    assert out["namespace"] == "sbemulatorns"
    assert out["conflict"]["statusCode"] == 409
    assert out["afterDelete"] is False


def test_js_admin_client_without_the_ca_refuses_the_certificate(emulator: Emulator) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NODE_EXTRA_CA_CERTS"}
    assert emulator.admin_connection_string is not None
    env["SB_ADMIN_CONNECTION_STRING"] = emulator.admin_connection_string
    script = ('import { ServiceBusAdministrationClient } from "@azure/service-bus";'
              "const c = new ServiceBusAdministrationClient(process.env.SB_ADMIN_CONNECTION_STRING,"
              " { retryOptions: { maxRetries: 0 } });"
              "try { await c.getNamespaceProperties(); console.log('trusted'); }"
              " catch (e) { console.log(e.code || e.name); }")
    proc = subprocess.run([NODE or "node", "--input-type=module", "-e", script], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert "trusted" not in proc.stdout
    assert "CERT" in proc.stdout.upper() or "SIGNED" in proc.stdout.upper(), proc.stdout + proc.stderr


DESCRIPTIONS_SCRIPT = r"""
import { ServiceBusAdministrationClient } from "@azure/service-bus";

const cs = process.env.SB_ADMIN_CONNECTION_STRING;
const client = new ServiceBusAdministrationClient(cs);
const out = {};
const q = await client.createQueue("js-defaults");
out.defaults = { maxDeliveryCount: q.maxDeliveryCount, ttl: q.defaultMessageTimeToLive,
                 window: q.duplicateDetectionHistoryTimeWindow, lock: q.lockDuration,
                 autoDelete: q.autoDeleteOnIdle, size: q.maxMessageSizeInKilobytes };
await client.createQueue("js-guarded", { authorizationRules: [
  { claimType: "SharedAccessKey", keyName: "reader", accessRights: ["Listen"],
    primaryKey: "cHJpbWFyeQ==", secondaryKey: "c2Vjb25kYXJ5" }] });
const guarded = await client.getQueue("js-guarded");
out.rules = guarded.authorizationRules.map((r) => [r.keyName, r.accessRights, r.primaryKey]);
try {
  await client.createQueue("js-big", { maxMessageSizeInKilobytes: 1024 });
  out.big = "no error";
} catch (e) {
  out.big = e.statusCode;
}
const old = new ServiceBusAdministrationClient(cs, { serviceVersion: "2017-04" });
try {
  await old.createQueue("js-sized", { maxMessageSizeInKilobytes: 256 });
  out.old = "no error";
} catch (e) {
  out.old = [e.statusCode, e.message];
}
out.oldSize = (await old.getQueue("js-defaults")).maxMessageSizeInKilobytes ?? null;
console.log(JSON.stringify(out));
"""


def test_js_admin_client_sees_service_bus_defaults_rules_sizes_and_versions(emulator: Emulator) -> None:
    """Issue #24 items 2, 8, 10 and 11 as @azure/service-bus sees them (serviceVersion 2021-05 and 2017-04)."""
    assert emulator.admin_connection_string is not None and emulator.ca_path is not None
    env = {**os.environ, "SB_ADMIN_CONNECTION_STRING": emulator.admin_connection_string,
           "NODE_EXTRA_CA_CERTS": emulator.ca_path}
    proc = subprocess.run([NODE or "node", "--input-type=module", "-e", DESCRIPTIONS_SCRIPT], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=90, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["defaults"] == {"maxDeliveryCount": 10, "ttl": "P10675199DT2H48M5.4775807S", "window": "PT10M",
                               "lock": "PT1M", "autoDelete": "P10675199DT2H48M5.4775807S", "size": 256}
    assert out["rules"] == [["reader", ["Listen"], "cHJpbWFyeQ=="]]
    assert out["big"] == 400
    assert out["old"][0] == 400 and "unsupported properties for api-version '2017-04'" in out["old"][1]
    assert out["oldSize"] is None
