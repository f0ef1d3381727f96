"""Stand-ins that let kafka-python's codec module run without python-snappy or xxhash installed.

kafka-python's snappy and legacy (magic 0) lz4 paths import ``snappy`` and ``xxhash``; the tests
plug in equivalents built on cramjam and on our own ``xxh32`` (checked against published values).
"""

from __future__ import annotations

import struct
import types

import cramjam
import kafka.codec
import pytest

from kafkalite.protocol.compression import xxh32


class _Xxh32:
    def __init__(self, data: bytes) -> None:
        self._value = xxh32(data)

    def digest(self) -> bytes:
        return struct.pack(">I", self._value)


def plug_kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Patch kafka-python's codec module for the test; return it."""
    snappy = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", snappy)
    monkeypatch.setattr(kafka.codec, "xxhash", types.SimpleNamespace(xxh32=_Xxh32))
    return kafka.codec
