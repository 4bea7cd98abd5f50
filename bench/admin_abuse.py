"""Memory of the HTTPS management port under abusive clients, and after they leave.

Why: whoever reaches the port can try, and an emulator runs for days on a developer machine. Three
kinds of client, each ``--clients`` at once, on loopback, against an emulator process:

* ``unauthenticated``: a PUT announcing a ``--body-mb`` body without an Authorization header, then
  sending the body (the emulator must answer 401 from the head and never buffer the body);
* ``slow-head``: headers dripped a byte every 0.5 s (cut off at the head deadline);
* ``authenticated``: a valid SAS token and a full ``--body-mb`` body (bounded by MAX_BODY and by the
  connection cap: the one kind that may cost memory while it lasts).

RSS (VmRSS of the emulator process) is read when idle, while each kind holds its connections, and
after they closed. ``python -m bench.admin_abuse --clients 30 --body-mb 4``; figures in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import threading
import time
from pathlib import Path

from sbemulator.auth import sign
from sbemulator.runtime.launcher import start_emulator_process

TOPOLOGY = Path(__file__).resolve().parents[1] / "infra" / "servicebus.json"
TIMEOUT_S = 30.0  # no socket operation here waits longer


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def connect(port: int, ca: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def unauthenticated(sock: ssl.SSLSocket, body: bytes, port: int, key: str) -> None:
    sock.sendall(f"PUT /abuse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n".encode())
    try:
        sock.sendall(body)
    except (OSError, ssl.SSLError):
        pass  # refused and closed from the head: the body cannot even be sent


def authenticated(sock: ssl.SSLSocket, body: bytes, port: int, key: str) -> None:
    token = sign(f"https://127.0.0.1:{port}", "RootManageSharedAccessKey", key, int(time.time()) + 600)
    sock.sendall(f"PUT /abuse HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {token}\r\n"
                 f"Content-Type: application/atom+xml\r\nContent-Length: {len(body) + 1}\r\n\r\n".encode())
    sock.sendall(body)  # one byte short of the announced length: the server holds it and waits


def slow_head(sock: ssl.SSLSocket, body: bytes, port: int, key: str, stop: threading.Event | None = None) -> None:
    for byte in b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100:
        if stop is not None and stop.wait(0.5):
            return
        try:
            sock.sendall(bytes([byte]))
        except (OSError, ssl.SSLError):
            return


def run_kind(kind: str, clients: int, body: bytes, port: int, ca: str, key: str, pid: int) -> tuple[float, float]:
    """RSS while ``clients`` of this kind hold their connections, and after they closed."""
    socks = [connect(port, ca) for _ in range(clients)]
    stop = threading.Event()
    action = {"unauthenticated": unauthenticated, "authenticated": authenticated, "slow-head": slow_head}[kind]
    threads = []
    for sock in socks:
        args = (sock, body, port, key, stop) if kind == "slow-head" else (sock, body, port, key)
        threads.append(threading.Thread(target=action, args=args, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(3.0 if kind == "slow-head" else TIMEOUT_S)
    during = max(sample(pid, 3.0))  # the server may still be reading what was sent (a loaded machine)
    stop.set()
    for sock in socks:
        sock.close()
    for thread in threads:
        thread.join(TIMEOUT_S)
    return during, min(sample(pid, 5.0))  # settled: the lowest of the next seconds


def sample(pid: int, seconds: float, every: float = 0.25) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(rss_mb(pid))
        time.sleep(every)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--body-mb", type=float, default=4.0)
    args = parser.parse_args()
    body = b"x" * int(args.body_mb * 1024 * 1024 - 1)
    proc = start_emulator_process("--config", str(TOPOLOGY), "--in-memory")
    try:
        assert proc.admin_port is not None and proc.ca_path is not None
        time.sleep(1.0)
        cold = rss_mb(proc.pid)
        # Idle means after the port served a few ordinary clients (code paths imported, TLS state
        # warmed up once): what an abusive client could leave behind is measured against that.
        for _ in range(3):
            run_kind("unauthenticated", 2, b"x", proc.admin_port, proc.ca_path, "SAS_KEY_VALUE", proc.pid)
        idle = rss_mb(proc.pid)
        print(f"clients={args.clients} body={args.body_mb} MB; RSS at start {cold:.1f} MB, idle {idle:.1f} MB")
        for round_ in (1, 2):
            for kind in ("unauthenticated", "slow-head", "authenticated"):
                during, after = run_kind(kind, args.clients, body, proc.admin_port, proc.ca_path, "SAS_KEY_VALUE",
                                         proc.pid)
                print(f"round {round_} {kind:16s} during {during:6.1f} MB  after {after:6.1f} MB")
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
