"""Produce (API key 0), v3-11 served; v0-2 advertised (old librdkafka looks for them) and refused.

Each partition's records must be exactly one magic-2 batch; ``Partition.append_from_client``
validates it from its header and CRC and appends it without decoding the records (the record
timestamps are read only when Kafka's timestamp rules need them; see ``core.partition``). Records
refused by a timestamp check are listed in ``record_errors`` (v8+) by batch index, as Kafka does. ``acks=0``
gets no response at all; ``acks=1`` and ``acks=-1`` are answered once the batches are in the
log (this node is the whole ISR), and with ``log.flush.on.ack=true`` an ``acks=-1`` answer waits
until the written partitions are fsynced. Errors are per partition, as in Kafka.

Idempotent and transactional batches are checked against the partition's producer state (see
``kafkalite.broker.core.log.producer_state``): a retried duplicate is answered with its original base offset and
not written again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch
INVALID_PRODUCER_EPOCH. The first batch of a transaction in a partition is verified with the
transaction coordinator (KIP-890; unless ``transaction.partition.verification.enable`` is false):
a partition not added to the producer's ongoing transaction is refused with INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from v11, as Kafka answers); while the transaction's markers are being
written the answer is NOT_ENOUGH_REPLICAS, which every client retries (Kafka's translation of
CONCURRENT_TRANSACTIONS for Produce).

A write the disk refuses (full, a file size limit, read-only) leaves the log as it was and is
answered KAFKA_STORAGE_ERROR for that partition, which clients retry; appends work again once there
is room. Kafka instead takes the whole log directory offline until a restart; here reads go on,
and only a write that could not be undone stops that partition's appends until a restart.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from kafkalite.broker.core.log.group_commit import GroupCommit
from kafkalite.broker.core.partition import Partition, RecordValidationError
from kafkalite.broker.handlers.delayed import DelayedAnswer
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.compression import Compression
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import ProduceRequest, ProduceResponse
from kafkalite.protocol.messages.produce_response import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    TopicProduceResponse,
)

_MIN_SERVED_VERSION = 3

log = logging.getLogger("kafkalite.produce")


@handles(api_key=0, min_version=0, max_version=11)
def handle_produce(context: RequestContext, request: ProduceRequest) -> ProduceResponse | DelayedAnswer | None:
    version = context.api_version
    acks = request.acks
    cluster = context.cluster
    responses: list[TopicProduceResponse] = []
    now_ms = int(time.time() * 1000)
    flush = acks == -1 and cluster.flush_on_ack
    written: list[tuple[Partition, PartitionProduceResponse]] = []
    verify = cluster.verify_transaction if cluster.verify_transactions else None
    refusal = None if version >= _MIN_SERVED_VERSION and acks in (0, 1, -1) else _refusal(version, acks)
    topics = cluster.topics
    for topic_data in request.topic_data:
        partition_responses: list[PartitionProduceResponse] = []
        responses.append(TopicProduceResponse(topic_data.name, partition_responses))
        topic = topics.get(topic_data.name)
        partitions = () if topic is None else topic.partitions
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            result = PartitionProduceResponse(index, 0, -1)
            partition_responses.append(result)
            if refusal is not None:
                result.error_code, result.error_message = refusal
                continue
            partition = partitions[index] if 0 <= index < len(partitions) else None
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if topic is not None and topic.internal:
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                result.error_message = f"Cannot append to internal topic {topic.name}"
                continue
            records = partition_data.records
            if not isinstance(records, (bytes, bytearray, memoryview)) or len(records) == 0:  # decoded: a view
                result.error_code = ErrorCode.INVALID_RECORD
                result.error_message = "Produce requests must have exactly one record batch per partition"
                continue
            if version < 7 and len(records) > 21 and records[21] & 0x07 == Compression.ZSTD:
                result.error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
                continue
            try:
                appended = partition.append_from_client(records, now_ms, verify)
            except OSError as exc:  # the disk refused the write; the log is as it was before it
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                result.error_message = f"Cannot append to {partition}: {exc.strerror or exc}"
                result.log_start_offset = partition.log_start_offset
                continue
            except KafkaError as exc:
                result.error_code = exc.error_code
                if exc.error_code == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
                    result.error_code = ErrorCode.INVALID_TXN_STATE
                result.error_message = exc.message
                result.log_start_offset = partition.log_start_offset
                if isinstance(exc, RecordValidationError):
                    result.record_errors = [BatchIndexAndErrorMessage(batch_index=index, batch_index_error_message=text)
                                            for index, text in exc.record_errors]
                continue
            result.base_offset = appended.base_offset
            result.log_append_time_ms = appended.log_append_time
            result.log_start_offset = appended.log_start_offset
            if flush:
                written.append((partition, result))
    if acks == 0:
        return None
    if written:
        return _answer_when_durable(written, ProduceResponse(responses), cluster.log_manager.group_commit)
    return ProduceResponse(responses)


def _refusal(version: int, acks: int) -> tuple[ErrorCode, str | None] | None:
    """The error every partition of the request gets, when the request itself is refused."""
    if version < _MIN_SERVED_VERSION:
        return ErrorCode.UNSUPPORTED_VERSION, "Produce v0-2 (message formats 0 and 1) is not supported; use v3+"
    if acks not in (0, 1, -1):
        return ErrorCode.INVALID_REQUIRED_ACKS, None
    return None


def _answer_when_durable(written: list[tuple[Partition, PartitionProduceResponse]], response: ProduceResponse,
                         group_commit: GroupCommit) -> ProduceResponse | DelayedAnswer:
    """Answer once every partition written by this request is synced to disk.

    The syncs are the log room's group commit (``core/log/group_commit.py``): one round on its thread
    covers every request waiting at the time, and completes this answer from the round's end, in the
    same loop step (a ``DelayedAnswer``: no task). A partition whose sync fails is answered
    KAFKA_STORAGE_ERROR: its batch is in the log but not known durable, so it is not acknowledged (a
    retry of an idempotent batch is answered once a sync covers it).
    """
    answer = DelayedAnswer()
    waiting = [len(written) + 1]  # one more until every partition has asked (some may be told at once)

    def settled(partition: Partition, result: PartitionProduceResponse, failure: OSError | None) -> None:
        if failure is not None and not partition.deleted:  # a topic deleted meanwhile: as if never asked
            log.warning("%s: fsync failed, answering KAFKA_STORAGE_ERROR: %s", partition, failure)
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            result.error_message = f"Cannot make {partition} durable: {failure.strerror or failure}"
            result.base_offset = -1
        waiting[0] -= 1
        if waiting[0] == 0:
            answer.complete(response)

    for partition, result in written:
        if partition.deleted:
            waiting[0] -= 1
        else:
            group_commit.when_durable(partition.log, partial(settled, partition, result))
    waiting[0] -= 1
    return response if waiting[0] == 0 else answer
