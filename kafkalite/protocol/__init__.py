"""Sans-io codec for the Apache Kafka wire protocol.

Bytes in, typed messages out, and back. Nothing here touches sockets, asyncio, ``broker`` or ``client``.
"""

from kafkalite.protocol.exceptions import CorruptRecordError, ProtocolError

__all__ = ["CorruptRecordError", "ProtocolError"]
