"""A fresh sbemulator for a suite, the relay in front of it and the certificates the SDKs trust."""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import certifi

from sbemulator import Emulator
from sbemulator.admin.tls import generate_certificates

from .identity import IdentityEndpoint
from .relay import Relay

HERE = Path(__file__).resolve().parent
NAMESPACE = "sbemulatorns"
HOST_SUFFIX = ".servicebus.windows.net"
# The topology's rules (conformance/topology.json): name, key.
RULES = {
    "SBCONF_NOMANAGE_KEY": ("NoManage", "Tm9NYW5hZ2VLZXlOb01hbmFnZUtleU5vTWFuYWdlS2V5MDE="),
    "SBCONF_SEND_KEY": ("SendOnly", "U2VuZE9ubHlLZXlTZW5kT25seUtleVNlbmRPbmx5S2V5MDE="),
    "SBCONF_LISTEN_KEY": ("ListenOnly", "TGlzdGVuT25seUtleUxpc3Rlbk9ubHlLZXlMaXN0ZW4wMQ=="),
}


@dataclass
class Running:
    emulator: Emulator
    relay: Relay
    identity: IdentityEndpoint
    address: str      # the loopback address the SDKs reach Service Bus's ports on
    bundle: Path      # public roots and the run's CA (SSL_CERT_FILE)

    def connection_string(self, host: str, key_name: str, key: str, emulator: bool) -> str:
        text = f"Endpoint=sb://{host}/;SharedAccessKeyName={key_name};SharedAccessKey={key}"
        return text + (";UseDevelopmentEmulator=true" if emulator else "")


def certificates(directory: Path, address: str) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for the emulator's HTTPS port and the relay's TLS: valid for the
    run's loopback address and for ``*.servicebus.windows.net`` (the host names the Python tests build);
    the bundle is the public roots plus that CA (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, certifi)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, cert, key = directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    ca_pem, cert_pem, key_pem = generate_certificates((f"*{HOST_SUFFIX}", address))
    key.write_bytes(key_pem)
    cert.write_bytes(cert_pem + ca_pem)
    ca.write_bytes(ca_pem)
    bundle = directory / "bundle.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes() + b"\n" + ca.read_bytes())
    return bundle, cert, key


@contextmanager
def emulator(cache: Path) -> Iterator[Running]:
    """A fresh emulator (in memory), Service Bus's ports 5672, 5671 and 443 on a loopback address of the
    run's own (all forwarded to the emulator's one port), and the identity endpoint."""
    address = loopback_alias()
    cache.mkdir(parents=True, exist_ok=True)
    tls = Path(tempfile.mkdtemp(prefix="tls-", dir=cache))  # a run's own: runs side by side do not share a CA
    bundle, cert, key = certificates(tls, address)
    with Emulator(config=str(HERE / "topology.json"), in_memory=True, tls_cert=cert, tls_key=key,
                  hostnames=(f"{NAMESPACE}{HOST_SUFFIX}",)) as emu:
        assert emu.admin_port is not None
        relay = Relay("127.0.0.1")
        identity = IdentityEndpoint(f"sb://{address}/", emu.key_name, emu.key).start()
        try:
            # Every port to the emulator's one AMQP port, which tells AMQP, AMQP over TLS, HTTPS and
            # WebSockets (ws, wss) apart by their first bytes: the relay only maps Service Bus's fixed
            # port numbers onto it, the way a client that builds every address from one host sees it.
            for port in (5672, 5671, 443):
                relay.forward(address, port, emu.port)
            yield Running(emu, relay, identity, address, bundle)
        finally:
            identity.stop()
            relay.stop()
            shutil.rmtree(tls, ignore_errors=True)


def loopback_alias() -> str:
    """A loopback address of the run's own (all of 127/8 is loopback on Linux), so Service Bus's fixed
    ports (5672, 5671, 443) are free there while other programs hold them on 127.0.0.1."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"

