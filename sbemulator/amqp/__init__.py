"""AMQP 1.0 without I/O and without Service Bus: bytes in, events out, frames back.

``types`` and ``codec`` (the type system and its encoding), ``performatives`` (composites, their field
types checked on decoding), ``framing`` (protocol headers, the frame header and the one frame reader),
``hotframes`` (the per-message frames written and read without the generic codec), ``states`` (the
connection, session and link state tables), ``windows`` (session windows and link credit),
``endpoints`` (sessions and links), ``events`` (what the application is told), ``errors`` (conditions),
``connection`` (the state machine that ties them together, with its parts ``link_endpoints``,
``flow_control`` and ``transfers``), ``message`` (message sections) and ``transactions`` (the coordinator
and transaction types of part 4).

May import: the standard library, and ``sbemulator.scheduling`` for its ``Slices`` (when a disposition's
range or a batch is worked in slices, how much input waits behind one). Must not import anything else of
``sbemulator``.
"""
