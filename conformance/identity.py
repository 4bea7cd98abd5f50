"""A stand-in for Entra ID (managed identity, App Service's protocol) that issues the namespace's SAS tokens.

Microsoft's Go tests sign in with azidentity's DefaultAzureCredential. Entra ID cannot run here, so the
runner mocks it the one way DefaultAzureCredential allows without a network sign-in: the managed
identity endpoint an App Service names in ``IDENTITY_ENDPOINT`` / ``IDENTITY_HEADER``. Its "access
token" is a SAS token of RootManageSharedAccessKey for the whole namespace, which is what the emulator
verifies: the SDK hands it to $cbs (labelled ``jwt``) and to the management API (``Bearer``), so every
test that uses a credential talks to the emulator with real, checked signatures.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sbemulator.auth import sign

LIFETIME_S = 3600


class IdentityEndpoint:
    def __init__(self, resource: str, key_name: str, key: str) -> None:
        self.header = secrets.token_hex(16)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.headers.get("X-IDENTITY-HEADER") != outer.header:
                    self.send_response(401)
                    self.end_headers()
                    return
                expiry = int(time.time()) + LIFETIME_S
                body = json.dumps({"access_token": sign(resource, key_name, key, expiry),
                                   "expires_on": str(expiry), "resource": "https://servicebus.azure.net",
                                   "token_type": "Bearer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/msi/token"
        self._thread = threading.Thread(target=self._server.serve_forever, name="conformance-identity",
                                        daemon=True)

    def start(self) -> IdentityEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
