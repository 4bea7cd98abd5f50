"""Code every role of the pipeline shares: settings, the message contract, clients, telemetry,
rate limiting and the session-lock leader election."""
