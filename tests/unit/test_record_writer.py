"""The producer's batch writer: byte-identical to the general builder, readable by the decoder."""

from __future__ import annotations

import pytest

from kafkalite.protocol.compression import Compression
from kafkalite.protocol.record_writer import RecordBatchWriter, estimate_record_size, stamp_producer_state
from kafkalite.protocol.records import RecordBatch, RecordBatchBuilder

BASE_TIME = 1_700_000_000_000
RECORDS = [
    (BASE_TIME, None, b"v0", None),
    (BASE_TIME + 3, b"key", None, [("h", b"x"), ("empty", None)]),
    (BASE_TIME - 7, b"k" * 300, b"v" * 20000, None),  # timestamp before the base, lengths past the table
    (BASE_TIME + 100_000, b"", b"", [("ünïcode", b"\x00\xff")]),
]


def test_append_matches_the_general_builder_byte_for_byte() -> None:
    writer = RecordBatchWriter()
    builder = RecordBatchBuilder(producer_id=7, producer_epoch=2, base_sequence=40, is_transactional=True)
    for timestamp, key, value, headers in RECORDS:
        writer.append(timestamp, key, value, headers)
        builder.append(timestamp=timestamp, key=key, value=value, headers=headers or ())
    built = writer.build(producer_id=7, producer_epoch=2, base_sequence=40, is_transactional=True)
    assert built == builder.build()


@pytest.mark.parametrize("compression", list(Compression))
def test_batches_decode_with_every_codec(compression: Compression) -> None:
    writer = RecordBatchWriter()
    for timestamp, key, value, headers in RECORDS:
        writer.append(timestamp, key, value, headers)
    batch = RecordBatch(writer.build(compression=compression))
    batch.validate_crc()
    assert batch.compression is compression
    records = list(batch.records())
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (index, timestamp, key, value) for index, (timestamp, key, value, _) in enumerate(RECORDS)]
    assert records[1].headers == (("h", b"x"), ("empty", None))
    assert batch.max_timestamp == BASE_TIME + 100_000


def test_append_values_equals_one_append_per_value_and_stops_at_the_limit() -> None:
    values = [b"a" * 100, None, b"", b"b" * 50] * 50
    one_by_one = RecordBatchWriter()
    for value in values:
        one_by_one.append(BASE_TIME, None, value)
    many = RecordBatchWriter()
    assert many.append_values(BASE_TIME, values) == len(values)
    assert many.build() == one_by_one.build()

    limited = RecordBatchWriter()
    taken = limited.append_values(BASE_TIME, values, limit=1000)
    assert 0 < taken < len(values)
    assert limited.size_in_bytes <= 1000
    rest = RecordBatchWriter()
    assert rest.append_values(BASE_TIME, [b"x" * 5000], limit=1000) == 1  # an empty batch takes one record


def test_append_values_with_keys() -> None:
    writer = RecordBatchWriter()
    assert writer.append_values(BASE_TIME, [b"1", b"2"], keys=[b"a", None]) == 2
    records = list(RecordBatch(writer.build()).records())
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (None, b"2")]


def test_stamping_producer_state_keeps_the_crc_valid() -> None:
    writer = RecordBatchWriter()
    writer.append(BASE_TIME, b"k", b"v")
    built = writer.build(compression=Compression.GZIP, producer_id=1, producer_epoch=0, base_sequence=0)
    stamp_producer_state(built, 99, 3, 12)
    batch = RecordBatch(built)
    batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 3, 12)


def test_estimate_is_an_upper_bound() -> None:
    for timestamp, key, value, headers in RECORDS:
        writer = RecordBatchWriter()
        writer.append(timestamp, key, value, headers)
        assert writer.size_in_bytes - 61 <= estimate_record_size(key, value, headers)


def test_an_empty_batch_cannot_be_built() -> None:
    with pytest.raises(ValueError):
        RecordBatchWriter().build()
