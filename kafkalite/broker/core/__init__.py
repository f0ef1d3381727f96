"""Broker state with no sockets, in rooms.

``log/`` (partition logs, segments, indexes, producer state), ``topics`` and ``partition`` (topics and
their partitions), ``fetch_sessions``, ``coordinator_log`` (internal topics), ``group/`` (consumer groups
and committed offsets) and ``txn/`` (transactions). ``cluster`` is the composition root that builds them
and wires each to the collaborators it uses; nothing here imports it. ``docs/architecture.md`` follows a
request through these rooms.
"""
