"""Microsoft's Go SDK tests (azservicebus), unchanged, against a fresh sbemulator.

They read their namespace from the environment the SDK's test-resources template outputs: connection
strings (SAS; ``UseDevelopmentEmulator=true`` makes the SDK speak plain AMQP to the given host:port and
HTTPS to the same host:port, which the relay splits by the first byte) and endpoints for Entra ID.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .environment import RULES, Running
from .results import Outcome


def environment(run: Running, address: str) -> dict[str, str]:
    emu = run.emulator
    cs = run.connection_string
    env = {
        "SERVICEBUS_ENDPOINT": address,
        "SERVICEBUS_ENDPOINT_PREMIUM": "",
        "SERVICEBUS_CONNECTION_STRING": cs(address, emu.key_name, emu.key, True),
        "SERVICEBUS_CONNECTION_STRING_PREMIUM": "",
        "SSL_CERT_FILE": str(run.bundle),
        "AZURE_RECORD_MODE": "live",
    }
    for variable, name in (("SERVICEBUS_CONNECTION_STRING_NO_MANAGE", "SBCONF_NOMANAGE_KEY"),
                           ("SERVICEBUS_CONNECTION_STRING_SEND_ONLY", "SBCONF_SEND_KEY"),
                           ("SERVICEBUS_CONNECTION_STRING_LISTEN_ONLY", "SBCONF_LISTEN_KEY")):
        env[variable] = cs(address, *RULES[name], True)
    return env


def run(module: Path, running: Running, go: str, timeout_s: int) -> list[Outcome]:
    port = running.relay.sniff("127.0.0.1")
    env = {**os.environ, **environment(running, f"127.0.0.1:{port}"), "GOFLAGS": "-mod=mod"}
    cmd = [go, "test", "-json", "-count=1", "-p=1", f"-timeout={timeout_s}s", "./..."]
    proc = subprocess.run(cmd, cwd=module, env=env, capture_output=True, text=True, timeout=timeout_s + 300,
                          check=False)
    return parse(proc.stdout, module)


def parse(stream: str, module: Path) -> list[Outcome]:
    outcomes: dict[tuple[str, str], str] = {}
    output: dict[tuple[str, str], list[str]] = {}
    for line in stream.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        name, package = event.get("Test"), event.get("Package", "")
        if not name or "/" in name:
            continue
        key = (package, name)
        if event.get("Action") == "output":
            output.setdefault(key, []).append(event.get("Output", ""))
        elif event.get("Action") in ("pass", "fail", "skip"):
            outcomes[key] = event["Action"]
    prefix = "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
    results = []
    for (package, name), action in outcomes.items():
        group = package.removeprefix(prefix).lstrip("/") or "azservicebus"
        text = "".join(output.get((package, name), []))
        results.append(Outcome("go", group, name, {"pass": "passed", "fail": "failed", "skip": "skipped"}[action],
                               text[-3000:]))
    return results
