"""The generated certificates: a CA that verifies the server certificate for the loopback names only,
kept and reused from its directory."""

from __future__ import annotations

import ipaddress
import ssl

import pytest
from cryptography import x509

from sbemulator.admin.tls import ensure_certificates, generate_certificates, server_context


def test_server_certificate_names_and_chain() -> None:
    ca_pem, cert_pem, _ = generate_certificates(("sbemulator.local", "10.1.2.3"))
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "sbemulator.local"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"), ipaddress.ip_address("10.1.2.3")}


def test_certificates_are_created_once_and_reused(tmp_path) -> None:
    first = ensure_certificates(tmp_path / "tls")
    content = first.ca.read_bytes()
    assert (first.key.stat().st_mode & 0o077) == 0  # the key is private to its owner
    second = ensure_certificates(tmp_path / "tls")
    assert second == first and second.ca.read_bytes() == content


@pytest.mark.parametrize(("hostname", "ok"), [("127.0.0.1", True), ("localhost", True), ("example.com", False)])
def test_clients_trusting_the_ca_accept_only_loopback_names(tmp_path, hostname: str, ok: bool) -> None:
    paths = ensure_certificates(tmp_path)
    server = server_context(paths.cert, paths.key)
    client = ssl.create_default_context(cafile=str(paths.ca))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    s = server.wrap_bio(incoming, outgoing, server_side=True)
    c = client.wrap_bio(c_in, c_out, server_hostname=hostname)

    def pump() -> None:
        incoming.write(c_out.read())
        c_in.write(outgoing.read())

    def step(obj) -> bool:
        try:
            obj.do_handshake()
            return True
        except ssl.SSLWantReadError:
            return False

    done_c = done_s = False
    try:
        for _ in range(10):
            done_c = done_c or step(c)
            pump()
            done_s = done_s or step(s)
            pump()
            if done_c and done_s:
                break
        assert ok and done_c
    except ssl.SSLCertVerificationError:
        assert not ok
