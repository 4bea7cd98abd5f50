"""HTTPS management plane: the Service Bus Atom API, an ARM subset, health and test support.

``AdminServer`` runs on the emulator's event loop next to the AMQP server and shares its broker and
SAS validator. See docs/management.md for what clients must be told (port, CA certificate).

May import: the broker through ``sbemulator.broker.api.AdminBroker`` and its public modules (errors,
model, views, entity kinds; never a broker private), ``sbemulator.gateway.deliveries`` (to build a
message as a client would), ``sbemulator.amqp``, ``sbemulator.config``, ``sbemulator.descriptions``,
``sbemulator.auth``, ``sbemulator.scheduling`` (a purge is a job: the runtime's driver runs it, given
as ``jobs``). Must not import the runtime.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from pathlib import Path
from typing import Any

from sbemulator.auth import SasValidator
from sbemulator.broker.api import AdminBroker
from sbemulator.net.ports import DEFAULT_ADMIN_PORT
from sbemulator.scheduling import JobRunner

from .app import AdminApp
from .backend import Namespace
from .control import Controls
from .http import HttpLimits, HttpServer, Upgrade
from .tls import CertificatePaths, ensure_certificates, server_context

__all__ = ["DEFAULT_ADMIN_PORT", "AdminApp", "AdminServer", "CertificatePaths", "Controls", "HttpLimits",
           "Namespace", "ensure_certificates"]


class AdminServer:
    """The HTTPS endpoint. ``cert_dir`` holds the generated CA and server certificate (created on first
    start, reused after); ``tls_cert``/``tls_key`` replace them with the user's own. ``websocket`` takes
    over connections that ask for a WebSocket (AMQP over WebSockets, sbemulator/runtime/websocket.py).
    ``like``: another namespace's endpoint whose CA, certificate and TLS context this one shares, so that
    every namespace of one emulator chains to one CA (docs/emulator.md, "Several namespaces").
    ``cert_hosts``: the names and addresses beyond loopback the generated certificate covers."""

    def __init__(
        self,
        broker: AdminBroker,
        validator: SasValidator,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_ADMIN_PORT,
        cert_dir: str | Path | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
        commit: Any = None,
        jobs: JobRunner | None = None,
        websocket: Upgrade | None = None,
        controls: Controls | None = None,
        like: AdminServer | None = None,
        limits: HttpLimits | None = None,
        cert_hosts: tuple[str, ...] | None = None,
    ) -> None:
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("--tls-cert and --tls-key go together")
        self._temp_dir: str | None = None
        self.certificates: CertificatePaths
        self.ssl_context: ssl.SSLContext
        if like is not None:  # another namespace's endpoint: the same CA, certificate and TLS context
            self.certificates = like.certificates
        elif tls_cert is not None and tls_key is not None:
            self.certificates = CertificatePaths(Path(tls_cert), Path(tls_cert), Path(tls_key))
        else:
            if cert_dir is None:
                self._temp_dir = tempfile.mkdtemp(prefix="sbemulator-tls-")
                cert_dir = self._temp_dir
            extra = cert_hosts if cert_hosts is not None else (
                () if host in ("127.0.0.1", "0.0.0.0", "::", "localhost", "::1") else (host,))
            self.certificates = ensure_certificates(cert_dir, extra)
        # Entity times (created, updated, accessed) on the broker's clock, like its messages' times.
        self.namespace = Namespace(broker, broker.config.name, clock=lambda: broker.now_ms() / 1000, commit=commit,
                                   jobs=jobs)
        self.controls = controls or Controls(clock=lambda: broker.now_ms() / 1000)
        self.app = AdminApp(self.namespace, validator, controls=self.controls)
        # Loading the key and chain is most of what an endpoint costs to make (~10 ms): a namespace
        # added per test shares the first one's context (one SSLContext serves any number of servers).
        self.ssl_context = like.ssl_context if like is not None else server_context(
            self.certificates.cert, self.certificates.key)
        if limits is None and like is not None:
            limits = like.limits  # another namespace's endpoint: the same bounds
        self.http: HttpServer = HttpServer(self.app, host, port, self.ssl_context, websocket=websocket,
                                           admit=self.app.admit, limits=limits)

    @property
    def port(self) -> int:
        return self.http.port

    @property
    def limits(self) -> HttpLimits:
        return self.http.limits

    @property
    def ca_path(self) -> Path:
        return self.certificates.ca

    def url(self, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}"

    async def start(self) -> None:
        await self.http.start()

    async def stop(self) -> None:
        await self.http.stop()

    def cleanup(self) -> None:
        """Remove the temporary certificate directory of an in-memory emulator (after stop)."""
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
