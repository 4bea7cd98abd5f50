"""The process around the layers: the asyncio server, embedding, the child-process launcher, the CLI.

``composition`` is the one place a namespace is wired: from a ``NamespaceOptions`` it builds the
store, the broker, the SAS validator and the AMQP server, then starts the admin and WebSocket
listeners; ``namespace_group`` holds the namespaces of one emulator (start, add, remove, stop, one
clock). ``server`` owns sockets and the event loop and hands each connection's bytes to a
``sbemulator.gateway.Gateway``; ``emulator`` runs a namespace group on a thread (``Emulator``);
``cli`` is ``python -m sbemulator``, which fills the same options from its flags; ``launcher`` runs
that command as a child process and waits for its ``ready`` line.

May import every other layer of the package; nothing in the package imports it except the root's
re-exports (``sbemulator.Emulator``, ``python -m sbemulator``) and the pytest plugin.
"""
