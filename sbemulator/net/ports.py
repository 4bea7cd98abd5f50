"""Port numbers every layer that listens agrees on, in a module light enough for the command line to
import before it knows whether it serves a management endpoint at all."""

from __future__ import annotations

DEFAULT_ADMIN_PORT = 5300  # the management endpoint's, as the official emulator's (HTTP and HTTPS)
