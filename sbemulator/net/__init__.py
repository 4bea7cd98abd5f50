"""Listening sockets that serve several protocols on one port, told apart by a connection's first bytes.

``sniff`` is the decision (pure, no I/O); ``listener`` accepts connections, looks at their first bytes
without consuming them and hands each to the protocol it speaks. Used by the management endpoint
(plain HTTP beside HTTPS) and the runtime (AMQP, AMQP over TLS, HTTPS and WebSockets on one port).
Imports nothing of the emulator's other layers.
"""
