"""The admin endpoint of ``python -m sbemulator``: its line after the ready line, a CA kept in the data
directory across restarts, entities created over HTTPS surviving a restart, --no-admin, --tls-cert/--tls-key."""

from __future__ import annotations

import subprocess
import sys

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.management import ServiceBusAdministrationClient

from devhost.local_services import emulator_admin_connection_string
from sbemulator.admin.tls import generate_certificates
from tests.fixtures.process import REPO_ROOT, start_emulator_process

CONFIG = str(REPO_ROOT / "infra" / "servicebus.json")


def admin_connection_string(proc) -> str:
    return emulator_admin_connection_string(proc.connection_string, proc.admin_url)


def test_ca_is_kept_in_the_data_dir_and_admin_entities_survive_restart(tmp_path) -> None:
    data = tmp_path / "data"
    first = start_emulator_process("--config", CONFIG, "--data-dir", str(data))
    try:
        assert first.admin_url == f"https://127.0.0.1:{first.admin_port}"
        assert first.ca_path == str(data / "tls" / "ca.pem")
        ca_before = (data / "tls" / "ca.pem").read_bytes()
        with ServiceBusAdministrationClient.from_connection_string(
            admin_connection_string(first), connection_verify=first.ca_path
        ) as admin:
            admin.create_queue("made-over-https", max_delivery_count=8)
        with ServiceBusClient.from_connection_string(first.connection_string) as sb:
            with sb.get_queue_sender("made-over-https") as sender:
                sender.send_messages(ServiceBusMessage("kept"))
    finally:
        assert first.terminate() == 0

    second = start_emulator_process("--config", CONFIG, "--data-dir", str(data))
    try:
        assert (data / "tls" / "ca.pem").read_bytes() == ca_before
        with ServiceBusAdministrationClient.from_connection_string(
            admin_connection_string(second), connection_verify=second.ca_path
        ) as admin:
            assert admin.get_queue("made-over-https").max_delivery_count == 8
        with ServiceBusClient.from_connection_string(second.connection_string) as sb:
            with sb.get_queue_receiver("made-over-https", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE) as r:
                assert [str(m) for m in r.receive_messages(max_wait_time=5)] == ["kept"]
    finally:
        assert second.terminate() == 0


def test_no_admin_serves_only_amqp() -> None:
    proc = start_emulator_process("--config", CONFIG, "--in-memory", "--no-admin")
    try:
        assert proc.admin_port is None
    finally:
        assert proc.terminate() == 0


def test_user_supplied_certificate_is_served(tmp_path) -> None:
    ca, cert, key = generate_certificates()
    (tmp_path / "my-ca.pem").write_bytes(ca)
    (tmp_path / "chain.pem").write_bytes(cert + ca)
    (tmp_path / "key.pem").write_bytes(key)
    proc = start_emulator_process("--config", CONFIG, "--in-memory", "--tls-cert", str(tmp_path / "chain.pem"),
                                  "--tls-key", str(tmp_path / "key.pem"))
    try:
        assert proc.ca_path == str(tmp_path / "chain.pem")
        with ServiceBusAdministrationClient.from_connection_string(
            admin_connection_string(proc), connection_verify=str(tmp_path / "my-ca.pem")
        ) as admin:
            assert "leveling" in [q.name for q in admin.list_queues()]
    finally:
        assert proc.terminate() == 0


def test_tls_cert_without_key_is_a_usage_error(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sbemulator", "--config", CONFIG, "--in-memory", "--port", "0", "--admin-port", "0",
         "--tls-cert", str(tmp_path / "x.pem")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert "--tls-key" in result.stderr
