"""The JavaScript ServiceBusAdministrationClient on a full or failing store (tests/integration/
test_store_faults_admin.py has the rest): a queue the store cannot write is refused with 403, which the
SDK reports as ``QuotaExceededError``, or 503, ``ServerBusyError`` (its ``getErrorCode``, as the .NET
client's ``ServiceBusFailureReason.QuotaExceeded`` / ``ServiceBusy``), and it is not created."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.servicebus.management import ServiceBusAdministrationClient

from sbemulator import Emulator
from tests.integration.test_store_faults import FULL, Faults, data_dir, emu, faults  # noqa: F401 (fixtures)
from tests.interop.node import requires_js_sdk, run_js

pytestmark = requires_js_sdk
BUSY = "disk I/O error"


@pytest.fixture
def admin(emu: Emulator) -> Iterator[ServiceBusAdministrationClient]:  # noqa: F811
    assert emu.admin_connection_string is not None
    with ServiceBusAdministrationClient.from_connection_string(
        emu.admin_connection_string, connection_verify=emu.ca_path
    ) as client:
        yield client


def test_the_javascript_admin_client_sees_quota_exceeded_and_server_busy(
    emu: Emulator, faults: Faults, admin: ServiceBusAdministrationClient  # noqa: F811
) -> None:
    assert emu.admin_connection_string is not None
    env = {"NODE_EXTRA_CA_CERTS": str(emu.ca_path)}
    faults.fail(sqlite3.OperationalError(FULL))
    full = run_js("admin_store_refusal.mjs", emu.admin_connection_string, "js-refused", extra_env=env)
    faults.fail(sqlite3.OperationalError(BUSY))
    busy = run_js("admin_store_refusal.mjs", emu.admin_connection_string, "js-refused", extra_env=env)
    faults.fail(None)
    assert full["code"] == "QuotaExceededError" and full["statusCode"] == 403, full
    assert FULL in full["message"]
    assert busy["code"] == "ServerBusyError" and busy["statusCode"] == 503, busy
    with pytest.raises(ResourceNotFoundError):
        admin.get_queue("js-refused")
