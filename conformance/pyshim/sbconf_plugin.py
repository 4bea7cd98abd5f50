"""pytest plugin for azure-servicebus's live tests against sbemulator (loaded with ``-p sbconf_plugin``).

It maps the tests' surroundings and nothing they assert:

* ``servicebus_preparer`` is replaced by sbconf_preparer before the tests import it (entities through
  the emulator's management API instead of Azure Resource Manager);
* the namespace host ``<name>.servicebus.windows.net`` resolves to the loopback address where the
  runner listens on 5671 (AMQP over TLS) and 443 (HTTPS, WebSockets), as a hosts file would: the tests
  build that host name themselves;
* the SDK trusts the emulator's CA: ``certifi.where()`` (the SDK's default CA file for AMQP over TLS)
  names a bundle of the public roots and that CA;
* the uamqp transport is left out (the tests then run on pyamqp, the SDK's default): uamqp's C
  library resolves host names itself, so it cannot be pointed at a local emulator under the real
  host name; it is deprecated;
* ``test_proxy`` (the recording proxy's fixture) does nothing: these are live runs.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

import certifi
import pytest
import sbconf_preparer  # type: ignore[import-not-found]  # on PYTHONPATH at run time

sys.modules["uamqp"] = None  # type: ignore[assignment]  # import uamqp -> ImportError: not available
_BUNDLE = os.environ["SSL_CERT_FILE"]
certifi.where = lambda: _BUNDLE

sys.modules["servicebus_preparer"] = sbconf_preparer

_SUFFIX = os.environ.get("SERVICEBUS_ENDPOINT_SUFFIX", ".servicebus.windows.net")
_ADDRESS = os.environ["SBCONF_ADDRESS"]
_getaddrinfo = socket.getaddrinfo


def _resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(host, bytes):
        host = host.decode()
    if isinstance(host, str) and host.lower().endswith(_SUFFIX):
        host = _ADDRESS
    return _getaddrinfo(host, *args, **kwargs)


socket.getaddrinfo = _resolve


@pytest.fixture(scope="session")
def test_proxy() -> None:
    """Live mode: no recording proxy."""
