"""Kafka's compression codecs: round trips, the exact framings other clients write, and hostile input.

kafka-python's ``kafka.codec`` is one reference writer/reader. It needs python-snappy and xxhash, which
are not installed; the ``kafka_codec`` fixture plugs in stand-ins built on cramjam and on our own
xxh32 (itself checked against published xxHash answers below).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import random
import struct
import types
import warnings
import zlib
from collections.abc import Iterator

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # kafka-python's import trips importlib.resources deprecations
    warnings.simplefilter("ignore", DeprecationWarning)

from kafkalite.protocol.compression import DEFAULT_MAX_OUTPUT, Compression, compress, decompress, xxh32
from kafkalite.protocol.exceptions import CorruptRecordError, ProtocolError
from tests.unit.kafka_python_codecs import plug_kafka_python_codecs

XERIAL_MAGIC = b"\x82SNAPPY\x00"
LZ4_MAGIC = b"\x04\x22\x4d\x18"


def sample(size: int, seed: int = 7) -> bytes:
    """Compressible but not trivial: random words with repeats, like a batch of JSON-ish records."""
    rng = random.Random(seed)
    words = [bytes(rng.getrandbits(8) for _ in range(rng.randint(2, 12))) for _ in range(300)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


PAYLOADS = {
    "empty": b"",
    "one-byte": b"x",
    "small": b"hello kafka " * 10,
    "random-200k": os.urandom(200_000),  # incompressible, crosses snappy and lz4 block boundaries
    "text-300k": sample(300_000),
}
CODECS = list(Compression)


@pytest.fixture
def kafka_codec(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """kafka-python's codec module with snappy and xxhash stand-ins plugged in."""
    yield plug_kafka_python_codecs(monkeypatch)


# --- enum and round trips --------------------------------------------------------------------------


def test_codec_ids_are_kafkas() -> None:
    assert [(codec.name, codec.value) for codec in Compression] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.name)
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec: Compression, name: str) -> None:
    data = PAYLOADS[name]
    for kind in (bytes, bytearray, memoryview):
        compressed = compress(codec, kind(data))
        assert isinstance(compressed, bytes)
        assert decompress(codec, memoryview(compressed)) == data
    if name == "text-300k" and codec is not Compression.NONE:
        assert len(compressed) < len(data) // 2


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD], ids=lambda c: c.name)
def test_compression_level_is_honoured_and_output_stays_readable(codec: Compression) -> None:
    data = PAYLOADS["text-300k"]
    fast = compress(codec, data, level=1)
    best = compress(codec, data, level=9)
    assert decompress(codec, fast) == decompress(codec, best) == data
    assert len(best) < len(fast)


def test_unknown_codec() -> None:
    with pytest.raises(ValueError):
        compress(5, b"data")
    for codec_id in (5, 6, 7, -1):
        with pytest.raises(CorruptRecordError):
            decompress(codec_id, b"data")


# --- gzip ------------------------------------------------------------------------------------------


def test_gzip_writes_a_plain_gzip_stream(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    written = compress(Compression.GZIP, data)
    assert written[:2] == b"\x1f\x8b"
    assert gzip.decompress(written) == data
    assert kafka_codec.gzip_decode(written) == data


def test_gzip_reads_other_writers(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    assert decompress(Compression.GZIP, gzip.compress(data, mtime=0)) == data
    assert decompress(Compression.GZIP, kafka_codec.gzip_encode(data)) == data
    # Concatenated members, which java.util.zip.GZIPInputStream reads as one stream.
    assert decompress(Compression.GZIP, gzip.compress(data[:1000]) + gzip.compress(data[1000:])) == data


def test_gzip_rejects_truncation_garbage_and_zlib() -> None:
    stream = compress(Compression.GZIP, PAYLOADS["text-300k"])
    for broken in (stream[:-1], stream[: len(stream) // 2], stream + b"junk", zlib.compress(b"not gzip"), b""):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.GZIP, broken)


# --- snappy ----------------------------------------------------------------------------------------


def parse_xerial(stream: bytes) -> tuple[tuple[bytes, int, int], list[bytes]]:
    header = struct.unpack_from(">8sii", stream)
    blocks, position = [], 16
    while position < len(stream):
        (length,) = struct.unpack_from(">i", stream, position)
        blocks.append(stream[position + 4 : position + 4 + length])
        position += 4 + length
    assert position == len(stream)
    return header, blocks


def test_snappy_writes_java_xerial_framing_with_32k_blocks() -> None:
    data = PAYLOADS["text-300k"]
    header, blocks = parse_xerial(compress(Compression.SNAPPY, data))
    assert header == (XERIAL_MAGIC, 1, 1)
    plain = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert [len(block) for block in plain] == [32768] * 9 + [300_000 - 9 * 32768]
    assert b"".join(plain) == data
    assert compress(Compression.SNAPPY, b"") == XERIAL_MAGIC + struct.pack(">ii", 1, 1)


def test_snappy_interoperates_with_kafka_python(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    assert kafka_codec.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(data)) == data  # xerial, Java-style
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them() -> None:
    data = PAYLOADS["text-300k"]
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(b""))) == b""


def test_snappy_reads_xerial_quirks() -> None:
    data = PAYLOADS["text-300k"]
    stream = compress(Compression.SNAPPY, data)
    # Version fields written little-endian (seen from Redpanda) are ignored, like xerial does.
    assert decompress(Compression.SNAPPY, XERIAL_MAGIC + struct.pack("<ii", 1, 1) + stream[16:]) == data
    # Concatenated streams, which SnappyInputStream accepts.
    assert decompress(Compression.SNAPPY, stream + stream) == data + data


def test_snappy_rejects_bad_streams() -> None:
    stream = compress(Compression.SNAPPY, PAYLOADS["text-300k"])
    header = stream[:16]
    cases = [
        stream[:-1],  # truncated block
        stream[:18],  # truncated block length
        header + struct.pack(">i", -5) + b"abc",  # negative block length
        header + struct.pack(">i", 1000) + b"abc",  # block length past the end
        header + struct.pack(">i", 3) + b"\xff\xff\xff",  # malformed preamble inside a block
        b"\xff\xff\xff\xff\xff\x01",  # raw block whose preamble runs over 5 bytes
        b"\x0a\x00",  # raw block claiming 10 bytes with a broken body
    ]
    for broken in cases:
        with pytest.raises(CorruptRecordError):
            decompress(Compression.SNAPPY, broken)


def test_snappy_lying_preamble_is_refused_before_allocation() -> None:
    # A raw block claiming 4 GiB in 6 bytes: refused without asking cramjam to allocate it.
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, b"\xff\xff\xff\xff\x0f\x00")
    # Claiming 1 MiB (plausible against the cap) in a 20-byte block: impossible for snappy.
    claim = bytearray()
    value = 1 << 20
    while value > 0x7F:
        claim.append((value & 0x7F) | 0x80)
        value >>= 7
    claim.append(value)
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, bytes(claim) + b"\x00" * 16)


# --- lz4 -------------------------------------------------------------------------------------------


def test_xxh32_known_answers() -> None:
    # Published xxHash32 values (seed 0), covering the short path and the 16-byte-stripe path.
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("store_size", [False, True])
@pytest.mark.parametrize("block_size", [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX4MB])
@pytest.mark.parametrize("content_checksum", [False, True])
def test_xxh32_matches_lz4_frame_header_checksums(store_size: bool, block_size: int, content_checksum: bool) -> None:
    frame = lz4.frame.compress(
        b"abc" * 100, store_size=store_size, block_size=block_size, content_checksum=content_checksum
    )
    descriptor_end = 6 + (8 if store_size else 0)
    assert frame[descriptor_end] == (xxh32(frame[4:descriptor_end]) >> 8) & 0xFF


def test_lz4_writes_the_frame_java_and_librdkafka_write() -> None:
    frame = compress(Compression.LZ4, PAYLOADS["text-300k"])
    # FLG 0x60: version 01, independent blocks, no block checksum, no content size, no content
    # checksum, no dictionary. BD 0x40: 64 KiB blocks. HC 0x82 = (xxh32(b"\x60\x40") >> 8) & 0xFF.
    assert frame[:7] == LZ4_MAGIC + b"\x60\x40\x82"
    assert frame[-4:] == b"\x00\x00\x00\x00"  # EndMark, no content checksum after it
    # Every block is at most 64 KiB; walk them.
    position, blocks = 7, 0
    while True:
        (block_size,) = struct.unpack_from("<I", frame, position)
        position += 4
        if block_size == 0:
            break
        assert block_size & 0x7FFFFFFF <= 65536
        position += block_size & 0x7FFFFFFF
        blocks += 1
    assert position == len(frame) and blocks >= 5


@pytest.mark.parametrize(
    "options",
    [
        {"block_linked": False},  # kafka-python / lz4.frame default content size
        {"block_linked": False, "store_size": False},
        {"block_linked": True},  # lz4 CLI default
        {"content_checksum": True},
        {"block_checksum": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX1MB, "compression_level": 9},
    ],
    ids=repr,
)
def test_lz4_reads_every_frame_flavour(options: dict[str, object]) -> None:
    data = PAYLOADS["text-300k"]
    assert decompress(Compression.LZ4, lz4.frame.compress(data, **options)) == data


def test_lz4_interoperates_with_kafka_python(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    assert kafka_codec.lz4_decode(compress(Compression.LZ4, data)) == data
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode(data)) == data


def test_lz4_legacy_checksum_is_written_broken_and_read_both_ways(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    legacy = compress(Compression.LZ4, data, legacy_lz4=True)
    correct = compress(Compression.LZ4, data)
    assert legacy[:6] == correct[:6] and legacy[7:] == correct[7:]
    assert legacy[6] == (xxh32(legacy[:6]) >> 8) & 0xFF != correct[6]
    # Strict readers (magic 2) refuse it; legacy readers take both forms.
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, legacy)
    assert decompress(Compression.LZ4, legacy, legacy_lz4=True) == data
    assert decompress(Compression.LZ4, correct, legacy_lz4=True) == data
    # kafka-python's own magic-0 writer and reader agree with ours.
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode_old_kafka(data), legacy_lz4=True) == data
    assert kafka_codec.lz4_decode_old_kafka(legacy) == data


def test_lz4_legacy_checksum_with_a_content_size() -> None:
    # librdkafka's "break framing" hashes magic .. content size; such frames must read back.
    data = PAYLOADS["text-300k"]
    frame = bytearray(lz4.frame.compress(data, store_size=True, block_linked=False))
    frame[14] = (xxh32(frame[:14]) >> 8) & 0xFF
    assert decompress(Compression.LZ4, bytes(frame), legacy_lz4=True) == data
    frame[14] ^= 0x55  # neither correct nor broken-legacy
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(frame), legacy_lz4=True)


@pytest.mark.parametrize("legacy", [False, True])
def test_lz4_rejects_bad_frames(legacy: bool) -> None:
    frame = compress(Compression.LZ4, PAYLOADS["text-300k"], legacy_lz4=legacy)
    second = compress(Compression.LZ4, b"second frame", legacy_lz4=legacy)
    for broken in (frame[:-1], frame[:5], frame[: len(frame) // 2], frame + b"junk", b"garbage!", b""):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.LZ4, broken, legacy_lz4=legacy)
    assert decompress(Compression.LZ4, frame + second, legacy_lz4=legacy) == PAYLOADS["text-300k"] + b"second frame"


# --- zstd ------------------------------------------------------------------------------------------


def test_zstd_reads_streamed_frames_without_content_size(kafka_codec: types.ModuleType) -> None:
    data = PAYLOADS["text-300k"]
    streamer = zstandard.ZstdCompressor().compressobj()
    streamed = streamer.compress(data) + streamer.flush()
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Compression.ZSTD, streamed) == data
    no_size = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(data)
    assert decompress(Compression.ZSTD, no_size) == data
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(data)) == data
    assert kafka_codec.zstd_decode(compress(Compression.ZSTD, data)) == data
    assert decompress(Compression.ZSTD, streamed + no_size) == data + data


def test_zstd_rejects_bad_frames() -> None:
    frame = compress(Compression.ZSTD, PAYLOADS["text-300k"])
    for broken in (frame[:-1], frame[:10], frame + b"junk", b"garbage!", b""):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.ZSTD, broken)


def test_zstd_lying_content_size_is_not_trusted() -> None:
    # A frame header claiming 1 TiB, followed by a tiny body.
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=False).compress(b"tiny"))
    descriptor = frame[4]
    assert descriptor & 0xC0 == 0  # no content size field yet
    # Rebuild the header with an 8-byte content size field: FCS flag 3, single segment off.
    header = bytes(frame[:4]) + bytes([(descriptor & 0x3F) | 0xC0]) + bytes(frame[5:6])
    lying = header + struct.pack("<Q", 1 << 40) + bytes(frame[6:])
    with pytest.raises(CorruptRecordError):
        decompress(Compression.ZSTD, lying)


# --- hostile input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda codec: codec.name)
def test_decompression_bomb_is_capped(codec: Compression) -> None:
    zeros = bytes(8 * 1024 * 1024)
    bomb = compress(codec, zeros)
    assert len(bomb) < len(zeros) // 20
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, bomb, max_output=1024 * 1024)
    assert decompress(codec, bomb, max_output=len(zeros)) == zeros  # an exact fit is fine
    with pytest.raises(CorruptRecordError):
        decompress(codec, bomb, max_output=len(zeros) - 1)


def test_uncompressed_input_respects_the_cap_too() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.NONE, b"12345", max_output=4)
    assert DEFAULT_MAX_OUTPUT == 256 * 1024 * 1024


@pytest.mark.parametrize("codec", CODECS, ids=lambda codec: codec.name)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=200))
def test_garbage_raises_only_corrupt_record_error(codec: Compression, garbage: bytes) -> None:
    for legacy in (False, True):
        with contextlib.suppress(CorruptRecordError):
            decompress(codec, garbage, legacy_lz4=legacy, max_output=1 << 20)


VALID_STREAMS = {codec: compress(codec, sample(5000, seed=3)) for codec in CODECS[1:]}
VALID_STREAMS_PLUS = {
    **{codec.name: (codec, stream) for codec, stream in VALID_STREAMS.items()},
    "SNAPPY-raw": (Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(sample(5000, seed=3)))),
    "LZ4-legacy": (Compression.LZ4, compress(Compression.LZ4, sample(5000, seed=3), legacy_lz4=True)),
}


@pytest.mark.parametrize("name", VALID_STREAMS_PLUS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_streams_raise_only_corrupt_record_error(name: str, data: st.DataObject) -> None:
    codec, stream = VALID_STREAMS_PLUS[name]
    mutated = bytearray(stream)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(mutated) - 1))
        mutated[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(mutated)))
    try:
        decompress(codec, bytes(mutated[:cut]), legacy_lz4=True, max_output=1 << 20)
    except ProtocolError as exc:
        assert isinstance(exc, CorruptRecordError)
