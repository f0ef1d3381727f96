"""The two exceptions the codec raises for bad input.

Every decoding path in ``protocol`` turns malformed bytes into one of these; nothing else escapes.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A frame or message that does not follow the Kafka wire format (truncated, lying length, bad varint...)."""


class CorruptRecordError(ProtocolError):
    """A record batch or message set that fails its CRC or whose contents do not parse."""
