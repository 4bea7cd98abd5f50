"""The process around the layers: the asyncio server, embedding, the child-process launcher, the CLI.

``server`` owns sockets and the event loop and hands each connection's bytes to a
``sbemulator.gateway.Gateway``; ``emulator`` builds a broker, a store, the AMQP server and the admin
endpoint and runs them on a thread (``Emulator``); ``launcher`` runs ``python -m sbemulator`` as a
child process and waits for its ``ready`` line; ``cli`` is that command. ``jobs`` is the driver of the
cooperative scheduler (``sbemulator.scheduling``): long work runs a slice per event-loop callback, jobs in
turn, each slice committed; ``background`` holds the server's own jobs (the broker's due timers, a deleted
entity's messages freed, the store's folds).

May import every other layer of the package; nothing in the package imports it except the root's
re-exports (``sbemulator.Emulator``, ``python -m sbemulator``) and the pytest plugin.
"""
