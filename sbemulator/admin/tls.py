"""TLS for the management endpoint: a local CA and a server certificate signed by it.

The administration SDKs always speak HTTPS, so the emulator needs a certificate they can be told to
trust. It makes its own CA on first start and keeps it (in the data directory, or a temporary one in
in-memory mode): users point ``connection_verify`` / ``NODE_EXTRA_CA_CERTS`` / ``REQUESTS_CA_BUNDLE``
at ``ca.pem`` once and it stays valid across restarts. The server certificate covers ``localhost``,
``127.0.0.1``, ``::1`` and the names the emulator is reached by (runtime/public.py); a user who needs
other names passes ``--public-host`` or supplies their own certificate and key.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

CA_FILE = "ca.pem"
CERT_FILE = "server.pem"
KEY_FILE = "server-key.pem"
_VALIDITY = datetime.timedelta(days=3650)


@dataclass(frozen=True)
class CertificatePaths:
    """``ca`` is what clients trust; ``cert`` (chain) and ``key`` are what the server presents."""

    ca: Path
    cert: Path
    key: Path


def ensure_certificates(directory: str | Path, hosts: tuple[str, ...] = ()) -> CertificatePaths:
    """Reuse the certificates in ``directory`` or create them (a CA, and a server certificate it signs)."""
    directory = Path(directory)
    paths = CertificatePaths(directory / CA_FILE, directory / CERT_FILE, directory / KEY_FILE)
    if paths.ca.exists() and paths.cert.exists() and paths.key.exists() and covers(paths.cert, hosts):
        return paths
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem, cert_pem, key_pem = generate_certificates(hosts)
    paths.key.touch(mode=0o600)
    paths.key.write_bytes(key_pem)
    paths.cert.write_bytes(cert_pem + ca_pem)
    paths.ca.write_bytes(ca_pem)
    return paths


def covers(cert_path: Path, hosts: tuple[str, ...]) -> bool:
    """Whether the kept server certificate names every one of ``hosts`` (a restart with a new
    ``--public-host`` or ``--host`` makes a new CA and certificate rather than serve a wrong name)."""
    if not hosts:
        return True
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    have = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    have |= {str(a) for a in names.get_values_for_type(x509.IPAddress)}
    return all(str(_normal(h)) in have for h in hosts)


def _normal(host: str) -> object:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return host


def generate_certificates(hosts: tuple[str, ...] = ()) -> tuple[bytes, bytes, bytes]:
    """(CA certificate, server certificate, server key), PEM. EC P-256 keys: fast to make, widely accepted."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sbemulator local CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for text in ("127.0.0.1", "::1", *hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(text)))
        except ValueError:
            names.append(x509.DNSName(text))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY - datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(_unique(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca_cert.public_bytes(pem), cert.public_bytes(pem), key_pem


def _unique(names: list) -> list:
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def server_context(cert: str | Path, key: str | Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    context.set_alpn_protocols(["http/1.1"])
    return context
