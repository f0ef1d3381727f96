"""Record batches (magic 2), legacy message sets (magic 0/1), control records and ``iter_batches``.

Interop runs both ways against kafka-python's record builders and readers. kafka-python needs
python-snappy and xxhash for snappy and magic-0 lz4; the autouse fixture plugs in stand-ins (cramjam,
and our xxh32, which test_compression.py checks against published answers).
"""

from __future__ import annotations

import struct
import warnings
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():  # kafka-python's import trips importlib.resources deprecations
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import _crc32c as kafka_python_pure_crc32c
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
    from kafka.record.util import decode_varint as kafka_python_decode_varint
    from kafka.record.util import encode_varint as kafka_python_encode_varint

from kafkalite.protocol.compression import Compression, compress, xxh32
from kafkalite.protocol.exceptions import CorruptRecordError, ProtocolError
from kafkalite.protocol.legacy_records import LegacyRecordBatch, build_legacy_message_set
from kafkalite.protocol.records import (
    RECORD_BATCH_OVERHEAD,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    build_end_transaction_marker,
    build_record_batch,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    iter_batches,
)
from tests.unit.kafka_python_codecs import plug_kafka_python_codecs

ALL_CODECS = list(Compression)
LEGACY_CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


@pytest.fixture(autouse=True)
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    plug_kafka_python_codecs(monkeypatch)
    yield


def sample_records(count: int = 20, *, base_offset: int = 0, headers: bool = True) -> list[Record]:
    """Compressible records with every shape: null key, null value, empty value, headers with null values."""
    records = []
    for index in range(count):
        key = None if index % 5 == 0 else f"key-{index % 3}".encode()
        value = None if index % 7 == 3 else (b"" if index % 7 == 4 else b'{"field": "value", "n": %d}' % index * 4)
        record_headers: tuple[tuple[str, bytes | None], ...] = ()
        if headers and index % 2:
            record_headers = (("trace-id", b"abc%d" % index), ("empty", None), ("ünïcode", b""))
        records.append(
            Record(base_offset + index, 1_700_000_000_000 + index * 3 - (index % 4) * 5, key, value, record_headers)
        )
    return records


def as_tuples(records: Iterable[Any]) -> list[tuple[object, ...]]:
    """Comparable view of kafka-python's or our records."""
    out: list[tuple[object, ...]] = []
    for record in records:
        headers = tuple((key, value) for key, value in record.headers) if record.headers else ()
        out.append((record.offset, record.timestamp, record.key, record.value, headers))
    return out


def rewrite_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return batch


# --- varints ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_known_encodings(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(2**63 - 1).hex() == "fe" + "ff" * 8 + "01"
    assert encode_varlong(-(2**63)).hex() == "ff" * 9 + "01"
    assert decode_varlong(bytes.fromhex("ff" * 9 + "01")) == (-(2**63), 10)


def test_varint_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)
    for broken, decoder in [
        ("ffffffff8f01", decode_varint),  # 6 bytes
        ("ff" * 10 + "01", decode_varlong),  # 11 bytes
        ("ff", decode_varint),  # runs off the end
        ("", decode_varlong),
    ]:
        with pytest.raises(CorruptRecordError):
            decoder(bytes.fromhex(broken))


@settings(max_examples=300, deadline=None)
@given(value=st.integers(-(2**31), 2**31 - 1), prefix=st.binary(max_size=3))
def test_varint_property(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert 1 <= len(encoded) <= 5
    assert decode_varint(prefix + encoded + b"\x00", len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varlong(encoded) == (value, len(encoded))  # an int32 varint is a valid varlong
    reference = bytearray()
    kafka_python_encode_varint(value, reference.append)
    assert bytes(reference) == encoded


@settings(max_examples=300, deadline=None)
@given(value=st.integers(-(2**63), 2**63 - 1))
def test_varlong_property(value: int) -> None:
    encoded = encode_varlong(value)
    assert 1 <= len(encoded) <= 10
    assert decode_varlong(encoded) == (value, len(encoded))
    assert kafka_python_decode_varint(bytearray(encoded), 0) == (value, len(encoded))


# --- header and CRC --------------------------------------------------------------------------------


def test_crc_known_answers() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C check value
    assert zlib.crc32(b"123456789") == 0xCBF43926  # CRC-32 (IEEE) check value


def test_uncompressed_batch_is_byte_identical_to_kafka_python() -> None:
    records = sample_records(12)
    reference = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
        batch_size=1 << 20,
    )
    for record in records:
        reference.append(record.offset, record.timestamp, record.key, record.value, list(record.headers))
    ours = build_record_batch(records, producer_id=4242, producer_epoch=3, base_sequence=17, partition_leader_epoch=0)
    assert bytes(ours) == bytes(reference.build())


def test_fixed_batch_known_answer() -> None:
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, base_sequence=0)
    builder.append(timestamp=1_600_000_000_000, key=b"k", value=b"v", headers=[("h", b"1")])
    batch = builder.build()
    assert batch.hex() == (
        "0000000000000000"  # base offset
        "0000003e"  # batch length: 74 - 12
        "ffffffff"  # partition leader epoch
        "02"  # magic
        "c3e820c6"  # CRC-32C of what follows
        "0000"  # attributes
        "00000000"  # last offset delta
        "00000174876e8000"  # base timestamp
        "00000174876e8000"  # max timestamp
        "0000000000000001"  # producer id
        "0000"  # producer epoch
        "00000000"  # base sequence
        "00000001"  # records count
        "18"  # record length 12
        "000000"  # attributes, timestamp delta, offset delta
        "026b0276"  # key "k", value "v"
        "0202680231"  # one header "h" = "1"
    )
    # The CRC agrees with kafka-python's pure-Python CRC-32C, independent of the crc32c package.
    assert kafka_python_pure_crc32c.crc(bytes(batch[21:])) == 0xC3E820C6 == RecordBatch(batch).crc


def test_header_fields_match_kafka_python() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=99,
        producer_epoch=5,
        base_sequence=2**31 - 2,
        batch_size=1 << 20,
    )
    for offset in range(3):
        builder.append(offset, 1000 + offset * 10, b"k", b"v", [])
    raw = bytes(builder.build())
    ours, theirs = RecordBatch(raw), DefaultRecordBatch(raw)
    assert (ours.base_offset, ours.partition_leader_epoch, ours.magic, ours.crc) == (
        theirs.base_offset,
        theirs.leader_epoch,
        theirs.magic,
        theirs.crc,
    )
    assert (ours.attributes, ours.last_offset_delta, ours.base_timestamp, ours.max_timestamp) == (
        theirs.attributes,
        theirs.last_offset_delta,
        theirs.first_timestamp,
        theirs.max_timestamp,
    )
    assert (ours.producer_id, ours.producer_epoch, ours.base_sequence, ours.records_count) == (
        theirs.producer_id,
        theirs.producer_epoch,
        theirs.base_sequence,
        theirs.records_count,
    )
    assert ours.size == len(raw) and ours.batch_length == len(raw) - 12
    assert ours.is_transactional and not ours.is_control and not ours.has_delete_horizon
    assert ours.timestamp_type is TimestampType.CREATE_TIME and ours.compression is Compression.NONE
    assert ours.last_offset == 2 and ours.next_offset == 3
    assert ours.last_sequence == 0 == theirs.last_sequence  # wraps past int32 max to 0
    assert [record.sequence for record in ours.records()] == [2**31 - 2, 2**31 - 1, 0]
    ours.validate_crc()


def test_attribute_bits() -> None:
    batch = build_record_batch(sample_records(2), compression=Compression.ZSTD)
    batch[22] |= 0x40  # hasDeleteHorizonMs
    parsed = RecordBatch(rewrite_crc(batch))
    assert parsed.has_delete_horizon and parsed.compression is Compression.ZSTD
    for codec_id in (5, 6, 7):
        batch[22] = codec_id
        with pytest.raises(CorruptRecordError):
            _ = RecordBatch(batch).compression
        with pytest.raises(CorruptRecordError):
            list(RecordBatch(batch).records())


def test_batch_is_a_view_not_a_copy() -> None:
    blob = bytearray(build_record_batch(sample_records(3)) + build_record_batch(sample_records(3, base_offset=3)))
    batches = list(iter_batches(blob))
    assert all(batch.buffer.obj is blob for batch in batches)
    assert RecordBatch(blob).buffer.obj is blob


def test_flipping_any_covered_byte_fails_the_crc() -> None:
    for codec in (Compression.NONE, Compression.LZ4):
        batch = build_record_batch(sample_records(5), compression=codec)
        for position in range(17, len(batch)):
            corrupted = bytearray(batch)
            corrupted[position] ^= 0x01
            with pytest.raises(CorruptRecordError):
                RecordBatch(corrupted).validate_crc()


# --- in-place rewrites -----------------------------------------------------------------------------


def test_set_base_offset_and_partition_leader_epoch_keep_the_crc() -> None:
    original = build_record_batch(sample_records(4))
    batch = bytearray(original)
    parsed = RecordBatch(batch)
    crc_before = parsed.crc
    parsed.set_base_offset(1_000_000)
    parsed.set_partition_leader_epoch(7)
    assert batch[:8] == struct.pack(">q", 1_000_000) and batch[12:16] == struct.pack(">i", 7)
    assert (parsed.base_offset, parsed.last_offset, parsed.next_offset, parsed.size) == (
        1_000_000, 1_000_003, 1_000_004, len(batch))  # what the append answers and the log records
    assert batch[16:] == original[16:]  # nothing else moved
    reparsed = RecordBatch(batch)
    reparsed.validate_crc()
    assert reparsed.crc == crc_before and reparsed.partition_leader_epoch == 7
    assert [record.offset for record in reparsed.records()] == [1_000_000 + index for index in range(4)]
    assert [record.offset for record in DefaultRecordBatch(bytes(batch))] == [1_000_000 + index for index in range(4)]


def test_set_log_append_time_recomputes_the_crc() -> None:
    batch = build_record_batch(sample_records(4), compression=Compression.GZIP)
    parsed = RecordBatch(batch)
    parsed.set_log_append_time(1_234_567)
    reparsed = RecordBatch(batch)
    reparsed.validate_crc()
    assert reparsed.timestamp_type is TimestampType.LOG_APPEND_TIME and reparsed.max_timestamp == 1_234_567
    assert reparsed.compression is Compression.GZIP
    assert {record.timestamp for record in reparsed.records()} == {1_234_567}
    theirs = DefaultRecordBatch(bytes(batch))
    assert theirs.validate_crc() and {record.timestamp for record in theirs} == {1_234_567}


def test_rewrites_need_a_writable_buffer() -> None:
    parsed = RecordBatch(bytes(build_record_batch(sample_records(1))))
    for rewrite in (parsed.set_base_offset, parsed.set_partition_leader_epoch, parsed.set_log_append_time):
        with pytest.raises(TypeError):
            rewrite(5)


# --- interop, magic 2 ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda codec: codec.name)
def test_kafka_python_batches_are_read(codec: Compression) -> None:
    records = sample_records(40)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=7,
        producer_epoch=1,
        base_sequence=100,
        batch_size=1 << 20,
    )
    for record in records:
        builder.append(record.offset, record.timestamp, record.key, record.value, list(record.headers))
    raw = bytes(builder.build())
    (batch,) = iter_batches(raw)
    assert isinstance(batch, RecordBatch)
    assert batch.compression is codec  # kafka-python sends uncompressed when that is smaller; not here
    batch.validate_crc()
    decoded = list(batch.records())
    assert as_tuples(decoded) == as_tuples(records)
    assert [record.sequence for record in decoded] == list(range(100, 140))


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda codec: codec.name)
def test_our_batches_are_read_by_kafka_python(codec: Compression) -> None:
    first, second = sample_records(30), sample_records(10, base_offset=30)
    blob = bytes(
        build_record_batch(first, compression=codec, producer_id=3, producer_epoch=0, base_sequence=0)
        + build_record_batch(
            second, compression=codec, is_transactional=True, producer_id=3, producer_epoch=0, base_sequence=30
        )
    )
    theirs = list(MemoryRecords(blob))
    assert len(theirs) == 2
    assert all(batch.validate_crc() and batch.compression_type == codec for batch in theirs)
    assert theirs[1].is_transactional
    assert as_tuples([record for batch in theirs for record in batch]) == as_tuples(first + second)


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(magic, codec) for magic in (0, 1, 2) for codec in ALL_CODECS if magic == 2 or codec is not Compression.ZSTD],
    ids=lambda value: getattr(value, "name", f"v{value}"),
)
def test_memory_records_builder_output_is_read(magic: int, codec: Compression) -> None:
    records = sample_records(25, headers=magic == 2)
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 20, offset=500)
    for record in records:
        builder.append(record.timestamp, record.key, record.value, list(record.headers) if magic == 2 else None)
    builder.close()
    batches = list(iter_batches(builder.buffer()))
    assert len(batches) == (25 if magic < 2 and codec is Compression.NONE else 1)
    for batch in batches:
        batch.validate_crc()
        assert batch.magic == magic and batch.compression is codec
    expected = [
        Record(500 + index, record.timestamp if magic else -1, record.key, record.value, record.headers)
        for index, record in enumerate(records)
    ]
    assert as_tuples(record for batch in batches for record in batch.records()) == as_tuples(expected)


# --- interop, legacy -------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda codec: codec.name)
def test_our_legacy_message_sets_are_read_by_kafka_python(magic: int, codec: Compression) -> None:
    records = sample_records(15, base_offset=1000, headers=False)
    blob = bytes(build_legacy_message_set(records, magic=magic, compression=codec))
    theirs = list(MemoryRecords(blob))
    assert all(batch.validate_crc() and batch.magic == magic for batch in theirs)
    assert len(theirs) == (15 if codec is Compression.NONE else 1)
    decoded = [record for batch in theirs for record in batch]
    assert all(record.validate_crc() for record in decoded)
    expected = [(r.offset, r.timestamp if magic else None, r.key, r.value, ()) for r in records]
    assert as_tuples(decoded) == expected
    ours = [record for batch in iter_batches(blob) for record in batch.records()]
    assert as_tuples(ours) == [(o, -1 if t is None else t, k, v, h) for o, t, k, v, h in expected]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda codec: codec.name)
def test_kafka_python_legacy_builder_is_read(magic: int, codec: Compression) -> None:
    records = sample_records(10, headers=False)
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for record in records:
        builder.append(record.offset, record.timestamp, record.key, record.value)
    raw = bytes(builder.build())
    entries = list(iter_batches(raw))
    assert all(isinstance(entry, LegacyRecordBatch) for entry in entries)
    for entry in entries:
        entry.validate_crc()
    decoded = [record for entry in entries for record in entry.records()]
    assert as_tuples(decoded) == [(r.offset, r.timestamp if magic else -1, r.key, r.value, ()) for r in records]
    if codec is Compression.NONE:  # plain messages are byte-identical
        assert bytes(build_legacy_message_set(records, magic=magic)) == raw


def test_legacy_lz4_checksum_follows_the_magic() -> None:
    records = sample_records(5, headers=False)
    for magic, broken in ((0, True), (1, False)):
        (entry,) = iter_batches(build_legacy_message_set(records, magic=magic, compression=Compression.LZ4))
        assert isinstance(entry, LegacyRecordBatch) and entry.value is not None
        frame = entry.value.tobytes()
        correct = (xxh32(frame[4:6]) >> 8) & 0xFF
        assert (frame[6] != correct) is broken


# --- legacy semantics ------------------------------------------------------------------------------


def legacy_message(
    offset: int, value: bytes | None, *, magic: int = 1, attributes: int = 0, timestamp: int = 5
) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic else b"")
    body += struct.pack(">i", -1) + (struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_legacy_wrapper_offsets_and_log_append_time() -> None:
    inner = b"".join(legacy_message(relative, b"v%d" % relative, timestamp=100 + relative) for relative in range(3))
    payload = compress(Compression.GZIP, inner)
    # magic 1: the wrapper carries the absolute offset of the last inner message.
    (wrapper,) = iter_batches(legacy_message(52, payload, attributes=1))
    assert [record.offset for record in wrapper.records()] == [50, 51, 52]
    assert [record.timestamp for record in wrapper.records()] == [100, 101, 102]
    # A wrapper offset of 0 (producers leaving offsets to the broker) keeps the inner offsets.
    (wrapper,) = iter_batches(legacy_message(0, payload, attributes=1))
    assert [record.offset for record in wrapper.records()] == [0, 1, 2]
    # LogAppendTime on the wrapper gives its timestamp to every inner message.
    (wrapper,) = iter_batches(legacy_message(52, payload, attributes=1 | 0x08, timestamp=999))
    assert wrapper.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [record.timestamp for record in wrapper.records()] == [999, 999, 999]
    # magic 0: inner offsets are absolute.
    inner_v0 = b"".join(legacy_message(offset, b"x", magic=0) for offset in (70, 71))
    (wrapper,) = iter_batches(legacy_message(71, compress(Compression.GZIP, inner_v0), magic=0, attributes=1))
    assert wrapper.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE
    assert [(record.offset, record.timestamp) for record in wrapper.records()] == [(70, -1), (71, -1)]


def test_legacy_build_with_log_append_time_and_offsets() -> None:
    records = [Record(10, 1, b"a", b"1"), Record(12, 3, None, b"2"), Record(13, 2, b"c", None)]
    blob = build_legacy_message_set(
        records,
        magic=1,
        compression=Compression.SNAPPY,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=777,
    )
    (wrapper,) = iter_batches(blob)
    assert isinstance(wrapper, LegacyRecordBatch)
    assert wrapper.offset == wrapper.last_offset == 13 and wrapper.timestamp == 777
    assert [(r.offset, r.timestamp, r.key, r.value) for r in wrapper.records()] == [
        (10, 777, b"a", b"1"),
        (12, 777, None, b"2"),
        (13, 777, b"c", None),
    ]
    created = LegacyRecordBatch(build_legacy_message_set(records, magic=1, compression=Compression.GZIP))
    assert created.timestamp == 3  # CreateTime wrapper: max inner timestamp
    for bad in (
        dict(magic=1, compression=Compression.ZSTD),
        dict(magic=0, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1),
        dict(magic=2),
    ):
        with pytest.raises(ValueError):
            build_legacy_message_set(records, **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        build_legacy_message_set(list(reversed(records)), magic=1)
    with pytest.raises(ValueError):
        build_legacy_message_set([], magic=1)


def test_legacy_invalid_wrappers() -> None:
    plain = legacy_message(0, b"x")
    nested = legacy_message(0, compress(Compression.GZIP, plain), attributes=1)
    cases = {
        "nested compression": legacy_message(0, compress(Compression.GZIP, nested), attributes=1),
        "inner magic differs": legacy_message(
            0, compress(Compression.GZIP, legacy_message(0, b"x", magic=0)), attributes=1
        ),
        "empty inner set": legacy_message(0, compress(Compression.GZIP, b""), attributes=1),
        "null wrapper value": legacy_message(0, None, attributes=1),
        "zstd wrapper": legacy_message(0, compress(Compression.ZSTD, plain), attributes=4),
        "inner crc": legacy_message(0, compress(Compression.GZIP, plain[:-1] + b"y"), attributes=1),
        "partial inner": legacy_message(0, compress(Compression.GZIP, plain + plain[:20]), attributes=1),
    }
    for name, entry in cases.items():
        with pytest.raises(CorruptRecordError):
            (wrapper,) = iter_batches(entry)
            list(wrapper.records())
            pytest.fail(name)


def test_legacy_crc_and_framing() -> None:
    entry = bytearray(legacy_message(3, b"value"))
    LegacyRecordBatch(entry).validate_crc()
    for position in range(16, len(entry)):
        corrupted = bytearray(entry)
        corrupted[position] ^= 0x10
        with pytest.raises(CorruptRecordError):
            parsed = LegacyRecordBatch(corrupted)  # framing may already fail
            parsed.validate_crc()
    value_length_at = len(entry) - len(b"value") - 4
    lying_value = entry[:value_length_at] + struct.pack(">i", 99) + entry[value_length_at + 4 :]
    with pytest.raises(CorruptRecordError):  # value length past the end of the message
        LegacyRecordBatch(lying_value)
    with pytest.raises(CorruptRecordError):  # bytes after the value
        LegacyRecordBatch(entry[:8] + struct.pack(">i", len(entry) - 11) + entry[12:] + b"!")
    with pytest.raises(CorruptRecordError):  # message size below the magic-1 minimum
        LegacyRecordBatch(struct.pack(">qi", 0, 20) + entry[12:])
    with pytest.raises(CorruptRecordError):  # truncated
        LegacyRecordBatch(entry[:-1])


# --- control records -------------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_end_transaction_marker_round_trip(control_type: ControlRecordType) -> None:
    marker = EndTransactionMarker(control_type, coordinator_epoch=42)
    raw = build_end_transaction_marker(marker, producer_id=9, producer_epoch=2, timestamp=5000, base_offset=77)
    batch = RecordBatch(raw)
    batch.validate_crc()
    assert batch.is_control and batch.is_transactional and batch.compression is Compression.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert (batch.base_sequence, batch.records_count, batch.producer_id, batch.producer_epoch) == (-1, 1, 9, 2)
    assert batch.end_transaction_marker() == marker
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, control_type) and record.value == struct.pack(">hi", 0, 42)
    (theirs,) = DefaultRecordBatch(bytes(raw))
    assert theirs.type == control_type and theirs.version == 0


def control_batch(key: bytes, value: bytes | None) -> bytearray:
    builder = RecordBatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    builder.append(timestamp=0, key=key, value=value)
    return builder.build()


def test_control_records_tolerate_what_kafka_tolerates() -> None:
    unknown = RecordBatch(control_batch(struct.pack(">hh", 0, 99), b""))
    assert unknown.end_transaction_marker() is None
    assert ControlRecordType.from_key(struct.pack(">hh", 0, 99)) is ControlRecordType.UNKNOWN
    assert ControlRecordType.from_key(struct.pack(">hh", 3, 5)) is ControlRecordType.KRAFT_VERSION
    newer = RecordBatch(control_batch(struct.pack(">hh", 1, 1), struct.pack(">hi", 3, 11) + b"future fields"))
    assert newer.end_transaction_marker() == EndTransactionMarker(ControlRecordType.COMMIT, 11)
    assert RecordBatch(build_record_batch(sample_records(1))).end_transaction_marker() is None
    for key, value in ((b"\x00", b""), (struct.pack(">hh", -1, 0), b""), (struct.pack(">hh", 0, 0), b"\x00\x00")):
        with pytest.raises(CorruptRecordError):
            RecordBatch(control_batch(key, value)).end_transaction_marker()
    with pytest.raises(ValueError):
        EndTransactionMarker(ControlRecordType.LEADER_CHANGE, 0)


# --- framing, truncation and malformed records ------------------------------------------------------


def test_iter_batches_stops_quietly_at_a_partial_trailing_batch() -> None:
    first = build_record_batch(sample_records(3), compression=Compression.LZ4)
    second = build_record_batch(sample_records(3, base_offset=3))
    legacy = build_legacy_message_set(sample_records(2, base_offset=6, headers=False), magic=1)
    blob = bytes(first + second + legacy)
    batches = list(iter_batches(blob))
    assert [batch.magic for batch in batches] == [2, 2, 1, 1]
    ends, position = [], 0
    for batch in batches:
        position += batch.size
        ends.append(position)
    assert ends[-1] == len(blob)
    for cut in range(len(blob) + 1):
        complete = sum(1 for end in ends if end <= cut)
        assert len(list(iter_batches(memoryview(blob)[:cut]))) == complete


def test_truncated_batch_is_corrupt_when_parsed_directly() -> None:
    batch = build_record_batch(sample_records(3))
    for cut in (0, 11, 60, len(batch) - 1):
        with pytest.raises(CorruptRecordError):
            RecordBatch(batch[:cut])


def test_lengths_below_the_minimum_and_unknown_magic_are_corrupt() -> None:
    batch = build_record_batch(sample_records(1))
    for length in (-1, 0, 13):
        with pytest.raises(CorruptRecordError):
            list(iter_batches(batch[:8] + struct.pack(">i", length) + batch[12:]))
    short_v2 = batch[:8] + struct.pack(">i", 30) + batch[12:]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(short_v2))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(batch[:16] + b"\x03" + batch[17:]))


def malformed_batch(record_bytes: bytes, records_count: int = 1) -> bytearray:
    """A valid-CRC uncompressed batch whose records area is ``record_bytes``."""
    batch = build_record_batch([Record(0, 0, None, None)])
    batch = bytearray(batch[:RECORD_BATCH_OVERHEAD] + record_bytes)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, records_count)
    return rewrite_crc(batch)


def record_bytes(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return encode_varint(len(body)) + body


NULL = encode_varint(-1)
ZERO = encode_varint(0)


@pytest.mark.parametrize(
    ("name", "records_area", "count"),
    [
        ("count too large", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, ZERO), 2),
        ("negative count", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, ZERO), -1),
        ("key length -2", record_bytes(b"\x00", ZERO, ZERO, encode_varint(-2), NULL, ZERO), 1),
        ("value past record", record_bytes(b"\x00", ZERO, ZERO, NULL, encode_varint(50), ZERO), 1),
        ("header count -1", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, encode_varint(-1)), 1),
        ("header count huge", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, encode_varint(1000)), 1),
        ("null header key", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, encode_varint(1), NULL, NULL), 1),
        ("6-byte varint", record_bytes(b"\x00", ZERO, bytes.fromhex("ffffffff8f01"), NULL, NULL, ZERO), 1),
        ("11-byte varlong", record_bytes(b"\x00", bytes.fromhex("ff" * 10 + "01"), ZERO, NULL, NULL, ZERO), 1),
        ("length lies short", encode_varint(3) + b"\x00" + ZERO + ZERO + NULL + NULL + ZERO, 1),
        ("length lies long", encode_varint(7) + b"\x00" + ZERO + ZERO + NULL + NULL + ZERO + b"\x00", 1),
        ("negative length", encode_varint(-3) + b"\x00" * 6, 1),
        ("bytes left over", record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, ZERO) + b"\x00" * 7, 1),
        ("runs off the end", encode_varint(6) + b"\x00" + ZERO + ZERO + NULL + NULL + b"\x80", 1),
    ],
)
def test_malformed_records_are_corrupt(name: str, records_area: bytes, count: int) -> None:
    batch = RecordBatch(malformed_batch(records_area, count))
    batch.validate_crc()  # the CRC is fine; the contents are not
    with pytest.raises(CorruptRecordError):
        list(batch.records())


def test_malformed_records_control_sample_is_valid() -> None:
    batch = RecordBatch(malformed_batch(record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, ZERO)))
    assert [(r.key, r.value, r.headers) for r in batch.records()] == [(None, None, ())]


def test_invalid_utf8_header_key_is_replaced_like_java() -> None:
    area = record_bytes(b"\x00", ZERO, ZERO, NULL, NULL, encode_varint(1), encode_varint(2), b"\xff\xfe", NULL)
    (record,) = RecordBatch(malformed_batch(area)).records()
    assert record.headers == (("\ufffd\ufffd", None),)


def test_decompression_bomb_inside_a_batch_is_capped() -> None:
    bomb = [Record(0, 0, None, bytes(4 * 1024 * 1024))]
    batch = RecordBatch(build_record_batch(bomb, compression=Compression.ZSTD))
    assert batch.size < 10_000
    with pytest.raises(CorruptRecordError):
        list(batch.records(max_output=1024 * 1024))
    assert next(batch.records()).value == bytes(4 * 1024 * 1024)


def test_builder_validation() -> None:
    with pytest.raises(ValueError):
        RecordBatchBuilder().build()
    with pytest.raises(ValueError):
        RecordBatchBuilder(is_transactional=True)
    builder = RecordBatchBuilder()
    builder.append(timestamp=0, key=None, value=b"a", offset_delta=5)
    with pytest.raises(ValueError):
        builder.append(timestamp=0, key=None, value=b"b", offset_delta=5)
    builder.append(timestamp=0, key=None, value=b"c")
    assert [record.offset for record in RecordBatch(builder.build()).records()] == [5, 6]


def test_builder_log_append_time() -> None:
    raw = build_record_batch(
        sample_records(3),
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=42,
        compression=Compression.SNAPPY,
    )
    batch = RecordBatch(raw)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME and batch.max_timestamp == 42
    assert {record.timestamp for record in batch.records()} == {42}
    assert {record.timestamp for record in DefaultRecordBatch(bytes(raw))} == {42}


# --- properties --------------------------------------------------------------------------------------

header_keys = st.text(max_size=8)
nullable_bytes = st.none() | st.binary(max_size=40)
record_strategy = st.tuples(
    st.integers(-(2**40), 2**40),  # timestamp
    nullable_bytes,
    nullable_bytes,
    st.lists(st.tuples(header_keys, nullable_bytes), max_size=3),
    st.integers(1, 3),  # offset gap
)


@settings(max_examples=60, deadline=None)
@given(
    specs=st.lists(record_strategy, min_size=1, max_size=12),
    codec=st.sampled_from(ALL_CODECS),
    base_offset=st.integers(0, 2**40),
)
def test_random_records_round_trip(
    specs: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Compression,
    base_offset: int,
) -> None:
    records, offset = [], base_offset
    for timestamp, key, value, headers, gap in specs:
        records.append(Record(offset, timestamp, key, value, tuple(headers)))
        offset += gap
    raw = build_record_batch(records, compression=codec)
    (batch,) = iter_batches(raw)
    batch.validate_crc()
    assert list(batch.records()) == records
    assert as_tuples(DefaultRecordBatch(bytes(raw))) == as_tuples(records)


@settings(max_examples=80, deadline=None)
@given(
    codec=st.sampled_from(ALL_CODECS),
    mutations=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 10_000),
)
def test_mutated_batches_raise_only_corrupt_record_error(
    codec: Compression, mutations: list[tuple[int, int]], cut: int
) -> None:
    """Flip bytes (then fix the CRC so the parser is reached) and truncate: only ProtocolErrors escape."""
    batch = build_record_batch(sample_records(6), compression=codec)
    for position, byte in mutations:
        batch[position % len(batch)] = byte
    rewrite_crc(batch)
    blob = bytes(batch[: cut % (len(batch) + 1)]) + bytes(batch)
    try:
        for parsed in iter_batches(blob):
            for _ in parsed.records(max_output=1 << 20):
                pass
            if isinstance(parsed, RecordBatch):
                parsed.end_transaction_marker()
    except ProtocolError as exc:
        assert isinstance(exc, CorruptRecordError)


@settings(max_examples=60, deadline=None)
@given(
    codec=st.sampled_from(LEGACY_CODECS),
    magic=st.sampled_from([0, 1]),
    mutations=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_mutated_legacy_sets_raise_only_corrupt_record_error(
    codec: Compression, magic: int, mutations: list[tuple[int, int]]
) -> None:
    blob = bytearray(build_legacy_message_set(sample_records(6, headers=False), magic=magic, compression=codec))
    for position, byte in mutations:
        blob[position % len(blob)] = byte
    try:
        for parsed in iter_batches(bytes(blob)):
            list(parsed.records(max_output=1 << 20))
    except ProtocolError as exc:
        assert isinstance(exc, CorruptRecordError)


# timestamps as Kafka's log validator reads them ----------------------------------------------------

@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
@pytest.mark.parametrize(("timestamps", "bounds"), [
    ([5, 3, 9], (3, 9)),
    ([-1, -1], (-1, -1)),  # no timestamps: Kafka's max is -1 and nothing is checked
    ([-1, 7, -1], (7, 7)),
    ([-5, -7], (-7, -1)),  # below -1: checked, but the max starts at -1
    ([1_700_000_000_000, 1_700_000_000_000 + 10**9, 1_699_000_000_000], (1_699_000_000_000, 1_701_000_000_000)),
])
def test_timestamp_bounds(compression: Compression, timestamps: list[int], bounds: tuple[int, int]) -> None:
    builder = RecordBatchBuilder(compression=compression)
    for index, timestamp in enumerate(timestamps):
        builder.append(timestamp=timestamp, key=b"k" * (index * 70), value=b"v" * 200)  # 1- and 2-byte lengths
    batch = RecordBatch(builder.build())
    assert batch.timestamp_bounds() == bounds
    assert batch.max_timestamp == bounds[1]  # the builder writes Kafka's max too


def test_timestamp_bounds_of_log_append_time_and_of_malformed_records() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=42)
    builder.append(timestamp=7, key=None, value=b"v")
    assert RecordBatch(builder.build()).timestamp_bounds() == (42, 42)
    plain = RecordBatchBuilder()
    plain.append(timestamp=7, key=None, value=b"v")
    data = plain.build()
    struct.pack_into(">i", data, 57, 2)  # claims two records
    with pytest.raises(CorruptRecordError):
        RecordBatch(data).timestamp_bounds()
    truncated = plain.build()
    truncated[61] = 0x7E  # a record length running past the end
    with pytest.raises(CorruptRecordError):
        RecordBatch(truncated).timestamp_bounds()


def test_set_max_timestamp_switches_the_type_and_recomputes_the_crc() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=42)
    builder.append(timestamp=7, key=None, value=b"v")
    batch = RecordBatch(builder.build())
    batch.set_max_timestamp(TimestampType.CREATE_TIME, 9)
    reparsed = RecordBatch(batch.buffer)
    reparsed.validate_crc()
    assert (reparsed.timestamp_type, reparsed.max_timestamp) == (TimestampType.CREATE_TIME, 9)
    crc = reparsed.crc
    reparsed.set_max_timestamp(TimestampType.CREATE_TIME, 9)  # already so: nothing written
    assert RecordBatch(batch.buffer).crc == crc
