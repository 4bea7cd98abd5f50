"""Microsoft's Go SDK tests (azservicebus), unchanged, against a fresh sbemulator.

They read their namespace from the environment the SDK's test-resources template outputs: connection
strings (SAS; ``UseDevelopmentEmulator=true``: plain AMQP on 5672) and the endpoint for Entra ID
(TLS on 5671), all on the run's loopback address, where the relay listens on Service Bus's ports
(environment.py); DefaultAzureCredential gets its tokens from identity.py.
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
        # Entra ID's stand-in (identity.py): DefaultAzureCredential's managed identity, App Service style
        "IDENTITY_ENDPOINT": run.identity.url, "IDENTITY_HEADER": run.identity.header,
    }
    for variable, name in (("SERVICEBUS_CONNECTION_STRING_NO_MANAGE", "SBCONF_NOMANAGE_KEY"),
                           ("SERVICEBUS_CONNECTION_STRING_SEND_ONLY", "SBCONF_SEND_KEY"),
                           ("SERVICEBUS_CONNECTION_STRING_LISTEN_ONLY", "SBCONF_LISTEN_KEY")):
        env[variable] = cs(address, *RULES[name], True)
    return env


def run(module: Path, running: Running, go: str, timeout_s: int, out: Path, *args: str) -> list[Outcome]:
    """``go test -json`` over every package (one at a time: the machine may be small), its event stream
    kept in ``out`` (go-test.json)."""
    env = {**os.environ, **environment(running, running.address), "GOFLAGS": "-mod=mod"}
    cmd = [go, "test", "-json", "-count=1", "-p=1", f"-timeout={timeout_s}s", *args, "./..."]
    proc = subprocess.run(cmd, cwd=module, env=env, capture_output=True, text=True, timeout=timeout_s + 300,
                          check=False)
    out.mkdir(parents=True, exist_ok=True)
    (out / "go-test.json").write_text(proc.stdout + proc.stderr)
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
        if not name:
            continue
        key = (package, name.split("/", 1)[0])
        if event.get("Action") == "output":
            output.setdefault(key, []).append(event.get("Output", ""))
        if "/" in name:
            continue
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


def load(out: Path) -> list[Outcome]:
    """The outcomes of the run kept in ``out`` (``--report-only``)."""
    stream = out / "go-test.json"
    return parse(stream.read_text(), out) if stream.exists() else []
