"""The codec under hostile input: nothing but the protocol's own error type ever escapes.

Hypothesis drives four kinds of input, each from a valid starting point so the mutations reach deep
into the decoders: every request and response class at every version (a random valid message,
encoded, then mutated), whole request frames (the frames captured from real clients, mutated, then
parsed as the broker parses them: header, then body), magic-2 record batches (random records,
every codec, transactional and control batches, mutated; then framed, CRC-checked, decoded,
timestamp bounds read), legacy magic 0/1 message sets, and the codecs' decompressors fed garbage.

The only exception allowed out is ``ProtocolError`` (``CorruptRecordError`` is one). A message
that does decode must encode again, and decode from that encoding to an equal message.

Each test runs ``CODEC_FUZZ_EXAMPLES`` examples (default 150, a few seconds for the module);
``CODEC_FUZZ_EXAMPLES=250000 python -m pytest tests/unit/test_codec_fuzz.py -p no:cacheprovider`` is
the long run (about 10^6 inputs over the module's tests).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol import ProtocolError
from kafkalite.protocol.compression import Compression, decompress
from kafkalite.protocol.exceptions import CorruptRecordError
from kafkalite.protocol.framing import parse_request
from kafkalite.protocol.legacy_records import build_legacy_message_set
from kafkalite.protocol.message import Message
from kafkalite.protocol.messages import REQUESTS, RESPONSES
from kafkalite.protocol.records import (
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    build_end_transaction_marker,
    iter_batches,
)
from tests.unit.message_factory import build

EXAMPLES = int(os.environ.get("CODEC_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

MESSAGES: list[tuple[type[Message], int]] = [
    (cls, version)
    for registry in (REQUESTS, RESPONSES)
    for cls in registry.values()
    for version in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
]
FRAMES_DIR = Path(__file__).resolve().parents[1] / "frames"
REQUEST_FRAMES: list[bytes] = [
    bytes.fromhex(entry["frame"])
    for path in sorted(FRAMES_DIR.glob("*.jsonl"))
    for entry in map(json.loads, path.read_text(encoding="utf-8").splitlines())
    if entry["direction"] == "request"
]
_EDGES = (0, 1, 0x7F, 0x80, 0xFF)
_INTEGERS = (0, -1, 1, 0x7FFF, -0x8000, 0x7FFFFFFF, -0x80000000, 2**63 - 1, -(2**63))


# mutations ----------------------------------------------------------------------------------------

@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` after zero to four edits: bytes set, bit flips, integers at their extremes, cuts,
    insertions and repeated slices."""
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.integers(0, 6))
        where = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == 0 and out:
            out[where] = draw(st.sampled_from(_EDGES) | st.integers(0, 255))
        elif kind == 1 and out:
            out[where] ^= 1 << draw(st.integers(0, 7))
        elif kind == 2:
            width = draw(st.sampled_from((1, 2, 4, 8)))
            value = draw(st.sampled_from(_INTEGERS)) % (1 << (8 * width))
            out[where:where + width] = value.to_bytes(width, "big")
        elif kind == 3:
            del out[where:]
        elif kind == 4:
            out[where:where] = draw(st.binary(min_size=1, max_size=16))
        elif kind == 5 and out:
            piece = out[where:where + draw(st.integers(1, 24))]
            out[where:where] = piece * draw(st.integers(1, 6))
        elif kind == 6:
            out[where:where] = bytes([0xFF]) * draw(st.integers(1, 10))  # an unending varint, a -1 length
    return bytes(out)


def _decoded_again(cls: type[Message], message: Message, version: int) -> None:
    """A message that decoded encodes again, and that encoding decodes to the same message."""
    encoded = message.encode(version)
    assert cls.decode(encoded, version) == message


# messages -----------------------------------------------------------------------------------------

@FUZZ
@given(st.data())
def test_every_message_at_every_version_fails_only_with_protocol_error(data: st.DataObject) -> None:
    cls, version = data.draw(st.sampled_from(MESSAGES), label="message")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    valid = build(random.Random(seed), cls, version).encode(version)
    body = data.draw(mutated(valid), label="body")
    try:
        message = cls.decode(body, version)
    except ProtocolError:
        return
    _decoded_again(cls, message, version)


@FUZZ
@given(st.data())
def test_request_frames_from_real_clients_fail_only_with_protocol_error(data: st.DataObject) -> None:
    frame = data.draw(mutated(data.draw(st.sampled_from(REQUEST_FRAMES), label="frame")), label="mutated")
    try:
        request = parse_request(frame)
        cls = REQUESTS.get(request.api_key)
        if cls is None:
            return
        message = cls.decode_from(request.body, request.api_version)
    except ProtocolError:
        return
    _decoded_again(cls, message, request.api_version)


@FUZZ
@given(st.binary(max_size=300), st.sampled_from(MESSAGES))
def test_random_bytes_fail_only_with_protocol_error(body: bytes, case: tuple[type[Message], int]) -> None:
    cls, version = case
    try:
        cls.decode(body, version)
    except ProtocolError:
        pass


# record batches -----------------------------------------------------------------------------------

_KEYS = st.none() | st.binary(max_size=24)
_HEADERS = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=2)
_RECORD = st.tuples(st.integers(-1, 2**42), _KEYS, st.none() | st.binary(max_size=64), _HEADERS)


@st.composite
def record_batches(draw: st.DrawFn) -> bytes:
    """One or two valid magic-2 batches: data (any codec, idempotent or transactional) or a marker."""
    out = bytearray()
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()) and draw(st.booleans()):
            marker = EndTransactionMarker(draw(st.sampled_from((ControlRecordType.COMMIT, ControlRecordType.ABORT))),
                                          draw(st.integers(0, 2**31 - 1)))
            out += build_end_transaction_marker(marker, producer_id=draw(st.integers(0, 2**40)),
                                                producer_epoch=draw(st.integers(0, 2**15 - 1)), timestamp=1)
            continue
        producer_id = draw(st.integers(-1, 2**40))
        builder = RecordBatchBuilder(compression=draw(st.sampled_from(list(Compression))),
                                     base_offset=draw(st.integers(0, 2**40)), producer_id=producer_id,
                                     producer_epoch=0 if producer_id >= 0 else -1,
                                     base_sequence=draw(st.integers(0, 2**31 - 1)) if producer_id >= 0 else -1,
                                     is_transactional=producer_id >= 0 and draw(st.booleans()))
        for timestamp, key, value, headers in draw(st.lists(_RECORD, min_size=1, max_size=5)):
            builder.append(timestamp=timestamp, key=key, value=value, headers=headers)
        out += builder.build()
    return bytes(out)


def _read_everything(data: bytes) -> None:
    """What the broker and the client do with a records blob: frame, check the CRC, read the records
    and the timestamp bounds, and the marker of a control batch."""
    for batch in iter_batches(data):
        try:
            batch.validate_crc()
        except CorruptRecordError:
            pass
        records: list[Record] = list(batch.records(max_output=1 << 20))
        for record in records:
            assert isinstance(record.offset, int)
        if isinstance(batch, RecordBatch):
            batch.timestamp_bounds(max_output=1 << 20)
            if batch.is_control:
                batch.end_transaction_marker()


@FUZZ
@given(st.data())
def test_record_batches_fail_only_with_corrupt_record_error(data: st.DataObject) -> None:
    blob = data.draw(mutated(data.draw(record_batches(), label="batches")), label="mutated")
    try:
        _read_everything(blob)
    except ProtocolError:
        pass


@FUZZ
@given(st.data())
def test_legacy_message_sets_fail_only_with_corrupt_record_error(data: st.DataObject) -> None:
    magic = data.draw(st.sampled_from((0, 1)))
    codec = data.draw(st.sampled_from([Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]))
    records = [Record(offset=index, timestamp=max(timestamp, 0), key=key, value=value, headers=())
               for index, (timestamp, key, value, _) in enumerate(data.draw(st.lists(_RECORD, min_size=1,
                                                                                      max_size=4)))]
    valid = build_legacy_message_set(records, magic=magic, compression=codec)
    blob = data.draw(mutated(bytes(valid)), label="mutated")
    try:
        _read_everything(blob)
    except ProtocolError:
        pass


@FUZZ
@given(st.sampled_from(list(Compression)), st.binary(max_size=400), st.booleans())
def test_decompressors_fail_only_with_corrupt_record_error(codec: Compression, data: bytes, legacy: bool) -> None:
    try:
        decompress(codec, data, max_output=1 << 20, legacy_lz4=legacy)
    except ProtocolError:
        pass
