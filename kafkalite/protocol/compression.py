"""Kafka's four compression codecs, byte-compatible with Java, librdkafka and kafka-python.

A compressed record batch (magic 2) or wrapper message (magic 0/1) carries one compressed stream. This
module turns such a stream into bytes and back; it knows nothing about records.

=====  ============================================================================================
codec  wire format
=====  ============================================================================================
gzip   an ordinary gzip stream (RFC 1952). Concatenated members are read, as ``GZIPInputStream`` does.
snappy Java writes xerial-snappy *stream framing* (``SnappyOutputStream``): a 16-byte header
       ``\\x82SNAPPY\\x00``, int32 version 1, int32 compatible-version 1, then blocks of int32 big-endian
       compressed length + one raw snappy block, each block holding at most 32 KiB of input.
       librdkafka and some other writers send one raw snappy block with no framing. Reading detects
       the header; writing always frames, like Java.
lz4    the LZ4 *frame* format with 64 KiB independent blocks, no content size and no content checksum
       (what Java's ``KafkaLZ4BlockOutputStream`` and librdkafka write). Kafka 0.8-0.9 computed the
       frame header checksum (the HC byte) over the magic number as well as the descriptor; that
       broken checksum is still what magic 0 messages carry. ``legacy_lz4=True`` writes it and reads
       either variant.
zstd   a standard zstd frame. Streaming writers (Java, librdkafka) omit the content size, so reading
       always streams.
=====  ============================================================================================

Decompression never trusts the input: output is capped by ``max_output`` (a decompression bomb raises
:class:`~protocol.exceptions.CorruptRecordError` instead of eating memory), sizes declared inside a
stream are checked before anything is allocated for them, truncated streams and trailing garbage are
errors, and whatever a codec library raises is wrapped in ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum
from typing import TYPE_CHECKING, Final

from kafkalite.protocol.exceptions import CorruptRecordError, ProtocolError

if TYPE_CHECKING:  # each codec's library (zlib for gzip too) is imported by the first batch that uses the codec
    import cramjam

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "Compression",
    "compress",
    "decompress",
    "xxh32",
]

Buffer = bytes | bytearray | memoryview

DEFAULT_MAX_OUTPUT: Final = 256 * 1024 * 1024
"""Default cap on the size of one decompressed stream (256 MiB)."""


class Compression(IntEnum):
    """Compression codec ids, as stored in bits 0-2 of a batch's (or wrapper message's) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# --------------------------------------------------------------------------------------------------
# xxHash32, needed only for the LZ4 frame header checksum (a handful of bytes), so pure Python is fine.

_PRIME32_1: Final = 2654435761
_PRIME32_2: Final = 2246822519
_PRIME32_3: Final = 3266489917
_PRIME32_4: Final = 668265263
_PRIME32_5: Final = 374761393
_MASK32: Final = 0xFFFFFFFF


def _rotl32(value: int, count: int) -> int:
    return ((value << count) | (value >> (32 - count))) & _MASK32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """Return the 32-bit xxHash of ``data``.

    Implemented from the xxHash specification; used for LZ4 frame header checksums, so speed does not
    matter. Exposed so tests can check it against known answers.
    """
    view = memoryview(data).cast("B")
    length = len(view)
    position = 0
    if length >= 16:
        v1 = (seed + _PRIME32_1 + _PRIME32_2) & _MASK32
        v2 = (seed + _PRIME32_2) & _MASK32
        v3 = seed & _MASK32
        v4 = (seed - _PRIME32_1) & _MASK32
        while position + 16 <= length:
            lane1, lane2, lane3, lane4 = struct.unpack_from("<4I", view, position)
            v1 = _rotl32((v1 + lane1 * _PRIME32_2) & _MASK32, 13) * _PRIME32_1 & _MASK32
            v2 = _rotl32((v2 + lane2 * _PRIME32_2) & _MASK32, 13) * _PRIME32_1 & _MASK32
            v3 = _rotl32((v3 + lane3 * _PRIME32_2) & _MASK32, 13) * _PRIME32_1 & _MASK32
            v4 = _rotl32((v4 + lane4 * _PRIME32_2) & _MASK32, 13) * _PRIME32_1 & _MASK32
            position += 16
        digest = (_rotl32(v1, 1) + _rotl32(v2, 7) + _rotl32(v3, 12) + _rotl32(v4, 18)) & _MASK32
    else:
        digest = (seed + _PRIME32_5) & _MASK32
    digest = (digest + length) & _MASK32
    while position + 4 <= length:
        (word,) = struct.unpack_from("<I", view, position)
        digest = _rotl32((digest + word * _PRIME32_3) & _MASK32, 17) * _PRIME32_4 & _MASK32
        position += 4
    while position < length:
        digest = _rotl32((digest + view[position] * _PRIME32_5) & _MASK32, 11) * _PRIME32_1 & _MASK32
        position += 1
    digest ^= digest >> 15
    digest = digest * _PRIME32_2 & _MASK32
    digest ^= digest >> 13
    digest = digest * _PRIME32_3 & _MASK32
    digest ^= digest >> 16
    return digest


# --------------------------------------------------------------------------------------------------
# gzip

_GZIP_WBITS: Final = 16 + 15  # gzip header and trailer, a 32 KiB window (zlib.MAX_WBITS)
_GZIP_MAGIC: Final = b"\x1f\x8b"


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    import zlib

    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: Buffer, max_output: int) -> bytes:
    import zlib

    remaining: Buffer = data
    pieces: list[bytes] = []
    total = 0
    while True:
        decompressor = zlib.decompressobj(_GZIP_WBITS)
        # zlib grows its output as it goes, so asking for one byte past the cap allocates no more
        # than what the stream really produces, and tells a bomb from a stream that fits exactly.
        piece = decompressor.decompress(remaining, max_output - total + 1)
        total += len(piece)
        if total > max_output:
            raise CorruptRecordError(f"gzip stream decompresses to more than {max_output} bytes")
        pieces.append(piece)
        if not decompressor.eof:
            raise CorruptRecordError("gzip stream is truncated")
        remaining = decompressor.unused_data
        if not remaining:
            return b"".join(pieces)
        if remaining[:2] != _GZIP_MAGIC:
            raise CorruptRecordError(f"{len(remaining)} bytes of trailing garbage after the gzip stream")


# --------------------------------------------------------------------------------------------------
# snappy (xerial stream framing, or one raw block)

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_VERSION: Final = 1
_XERIAL_COMPATIBLE_VERSION: Final = 1
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # uncompressed bytes per block, as SnappyOutputStream writes
_INT32: Final = struct.Struct(">i")
# The densest snappy element is a 3-byte copy of 64 bytes, so a raw block can never expand by more
# than 64/3. A preamble claiming more is a lie, caught before the codec allocates for it.
_SNAPPY_MAX_EXPANSION: Final = 22


def _snappy_compress(data: Buffer) -> bytes:
    import cramjam

    view = memoryview(data).cast("B")
    pieces: list[bytes | cramjam.Buffer] = [
        _XERIAL_HEADER.pack(_XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPATIBLE_VERSION)
    ]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        pieces.append(_INT32.pack(len(block)))
        pieces.append(block)
    return b"".join(pieces)


def _snappy_block_length(block: memoryview) -> int:
    """Read the uncompressed length a raw snappy block declares (an unsigned varint of at most 32 bits)."""
    result = 0
    for index in range(min(5, len(block))):
        byte = block[index]
        result |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if result > _MASK32:
                break
            return result
    raise CorruptRecordError("snappy block has a malformed length preamble")


def _snappy_decompress_block(block: memoryview, budget: int) -> cramjam.Buffer:
    declared = _snappy_block_length(block)
    if declared > budget:
        raise CorruptRecordError(f"snappy stream decompresses to more than the allowed {budget} bytes")
    if declared > _SNAPPY_MAX_EXPANSION * len(block):
        raise CorruptRecordError(f"snappy block of {len(block)} bytes cannot hold {declared} bytes")
    import cramjam

    output = cramjam.snappy.decompress_raw(block)
    if len(output) != declared:
        raise CorruptRecordError("snappy block length does not match its contents")
    return output


def _snappy_decompress(data: Buffer, max_output: int) -> bytes:
    view = memoryview(data).cast("B")
    if len(view) < _XERIAL_HEADER.size or view[:8].tobytes() != _XERIAL_MAGIC:
        return bytes(_snappy_decompress_block(view, max_output))
    # The version fields are not checked: xerial itself ignores them, and some writers (Redpanda)
    # are known to store them little-endian.
    position = _XERIAL_HEADER.size
    pieces: list[cramjam.Buffer] = []
    total = 0
    end = len(view)
    while position < end:
        if view[position : position + 8].tobytes() == _XERIAL_MAGIC:
            # Concatenated streams: SnappyInputStream accepts a new header where a block could start.
            position += _XERIAL_HEADER.size
            continue
        if position + 4 > end:
            raise CorruptRecordError("xerial snappy stream is truncated in a block length")
        (block_length,) = _INT32.unpack_from(view, position)
        position += 4
        if block_length < 0 or position + block_length > end:
            raise CorruptRecordError(f"xerial snappy block length {block_length} does not fit the stream")
        piece = _snappy_decompress_block(view[position : position + block_length], max_output - total)
        total += len(piece)
        pieces.append(piece)
        position += block_length
    return b"".join(pieces)


# --------------------------------------------------------------------------------------------------
# lz4 (frame format)

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE: Final = 0x08
_LZ4_FLG_DICTIONARY_ID: Final = 0x01
# Output requested from the lz4 binding per call: it allocates the whole request up front, so ask
# for moderate steps rather than for the entire budget at once.
_LZ4_OUTPUT_STEP: Final = 1024 * 1024


def _lz4_header_checksum(header: memoryview) -> int:
    return (xxh32(header) >> 8) & 0xFF


def _lz4_compress(data: Buffer, level: int | None, legacy: bool) -> bytes:
    import lz4.frame

    frame: bytes = lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if not legacy:
        return frame
    # Without a content size the descriptor is FLG, BD; the HC byte follows at offset 6. The broken
    # checksum of Kafka 0.8-0.9 hashes the magic number too.
    broken = bytearray(frame)
    broken[6] = _lz4_header_checksum(memoryview(frame)[:6])
    return bytes(broken)


def _lz4_repaired_header(view: memoryview) -> bytes | None:
    """Check a frame header for the correct or the legacy (broken) HC byte.

    Returns ``None`` when the header is already correct, or the header with the HC byte repaired, to be
    fed to the decoder in place of the original bytes. Raises when the byte matches neither.
    """
    if len(view) < 7 or view[:4].tobytes() != _LZ4_MAGIC:
        raise CorruptRecordError("lz4 frame does not start with the frame magic number")
    flags = view[4]
    checksum_position = 6
    if flags & _LZ4_FLG_CONTENT_SIZE:
        checksum_position += 8
    if flags & _LZ4_FLG_DICTIONARY_ID:
        checksum_position += 4
    if len(view) <= checksum_position:
        raise CorruptRecordError("lz4 frame header is truncated")
    stored = view[checksum_position]
    correct = _lz4_header_checksum(view[4:checksum_position])
    if stored == correct:
        return None
    if stored != _lz4_header_checksum(view[:checksum_position]):
        raise CorruptRecordError("lz4 frame header checksum matches neither the correct nor the legacy form")
    return bytes(view[:checksum_position]) + bytes((correct,))


def _lz4_decompress(data: Buffer, max_output: int, legacy: bool) -> bytes:
    import lz4.frame

    view = memoryview(data).cast("B")
    end = len(view)
    position = 0
    pieces: list[bytes] = []
    total = 0
    while True:  # one iteration per frame; Kafka writes one, the format allows several
        if view[position : position + 4].tobytes() != _LZ4_MAGIC:
            if position == 0:
                raise CorruptRecordError("lz4 stream does not start with the frame magic number")
            raise CorruptRecordError(f"{end - position} bytes of trailing garbage after the lz4 frame")
        context = lz4.frame.create_decompression_context()
        if legacy:
            repaired = _lz4_repaired_header(view[position:])
            if repaired is not None:
                _, consumed, _ = lz4.frame.decompress_chunk(context, repaired, max_length=1)
                if consumed != len(repaired):
                    raise CorruptRecordError("lz4 frame header was not accepted")
                position += consumed
        end_of_frame = False
        while not end_of_frame:
            if position >= end:
                raise CorruptRecordError("lz4 frame is truncated")
            request = min(max_output - total + 1, _LZ4_OUTPUT_STEP)
            piece, consumed, end_of_frame = lz4.frame.decompress_chunk(context, view[position:], max_length=request)
            if not consumed and not piece and not end_of_frame:
                raise CorruptRecordError("lz4 decoder made no progress")
            position += consumed
            total += len(piece)
            if total > max_output:
                raise CorruptRecordError(f"lz4 stream decompresses to more than {max_output} bytes")
            pieces.append(piece)
        if position == end:
            return b"".join(pieces)


# --------------------------------------------------------------------------------------------------
# zstd

# A zstd block holds at most 128 KiB and costs at least 4 bytes (an RLE block), so each input byte
# can yield at most 32 KiB. Feeding input in slices no larger than (budget left / this) keeps the
# output of any one call near the budget, however the stream is built.
_ZSTD_MAX_EXPANSION: Final = 32 * 1024
_ZSTD_MIN_INPUT_SLICE: Final = 64
_ZSTD_MAX_INPUT_SLICE: Final = 1024 * 1024


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3 if level is None else level)
    return compressor.compress(data)


def _zstd_decompress(data: Buffer, max_output: int) -> bytes:
    import zstandard

    view = memoryview(data).cast("B")
    end = len(view)
    if end == 0:
        raise CorruptRecordError("zstd stream is empty")
    position = 0
    pieces: list[bytes] = []
    total = 0
    decompressor = zstandard.ZstdDecompressor()
    while position < end:  # one iteration per frame
        frame = decompressor.decompressobj()
        while not frame.eof:
            if position >= end:
                raise CorruptRecordError("zstd frame is truncated")
            budget_left = max_output - total
            slice_size = max(_ZSTD_MIN_INPUT_SLICE, min(_ZSTD_MAX_INPUT_SLICE, budget_left // _ZSTD_MAX_EXPANSION))
            chunk = view[position : position + slice_size]
            piece = frame.decompress(chunk)
            total += len(piece)
            if total > max_output:
                raise CorruptRecordError(f"zstd stream decompresses to more than {max_output} bytes")
            pieces.append(piece)
            # At the end of a frame the decoder hands back what it did not read.
            position += len(chunk) - len(frame.unused_data) if frame.eof else len(chunk)
    return b"".join(pieces)


# --------------------------------------------------------------------------------------------------
# Public entry points


def compress(codec: Compression | int, data: Buffer, *, legacy_lz4: bool = False, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's producers do for ``codec``.

    ``legacy_lz4`` writes the broken LZ4 header checksum that magic 0 messages carry (Kafka 0.8-0.9).
    ``level`` is the codec's compression level (Kafka's ``compression.<codec>.level``); ``None`` picks
    the library default (gzip 6, lz4 fast mode, zstd 3). ``Compression.NONE`` returns the bytes as they are.

    Raises ``ValueError`` for a codec id that is not one of :class:`Compression`.
    """
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        return _gzip_compress(data, level)
    if codec is Compression.SNAPPY:
        return _snappy_compress(data)
    if codec is Compression.LZ4:
        return _lz4_compress(data, level, legacy_lz4)
    return _zstd_compress(data, level)


def decompress(
    codec: Compression | int,
    data: Buffer,
    *,
    legacy_lz4: bool = False,
    max_output: int = DEFAULT_MAX_OUTPUT,
) -> bytes:
    """Decompress one stream written by any Kafka client for ``codec``.

    Snappy accepts xerial framing and raw blocks. LZ4 accepts only the correct header checksum unless
    ``legacy_lz4`` is set, in which case the broken Kafka 0.8-0.9 checksum is accepted too. Concatenated
    gzip members, LZ4 frames, zstd frames and xerial streams are decoded one after the other.

    Raises :class:`CorruptRecordError` for an unknown codec id, a malformed, truncated or trailing-garbage
    stream, or one whose output would exceed ``max_output`` bytes. No other exception escapes.
    """
    try:
        codec = Compression(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec {codec}") from None
    try:
        decoder = _DECODERS[codec]
        return decoder(data, max_output, legacy_lz4)
    except ProtocolError:
        raise
    except Exception as exc:  # codec libraries raise assorted types; the contract is ProtocolError only
        raise CorruptRecordError(f"{codec.name.lower()} stream is corrupt: {exc}") from exc


def _copy_uncompressed(data: Buffer, max_output: int, legacy: bool) -> bytes:
    if len(data) > max_output:
        raise CorruptRecordError(f"uncompressed data is longer than {max_output} bytes")
    return bytes(data)


_DECODERS: Final[dict[Compression, Callable[[Buffer, int, bool], bytes]]] = {
    Compression.NONE: _copy_uncompressed,
    Compression.GZIP: lambda data, max_output, legacy: _gzip_decompress(data, max_output),
    Compression.SNAPPY: lambda data, max_output, legacy: _snappy_decompress(data, max_output),
    Compression.LZ4: _lz4_decompress,
    Compression.ZSTD: lambda data, max_output, legacy: _zstd_decompress(data, max_output),
}
