"""TxnOffsetCommit (API key 28), v0-4: stage a consumer group's offsets inside a producer's transaction.

The transaction coordinator checks the producer first: an unknown transactional id or another
producer id is INVALID_PRODUCER_ID_MAPPING, an old epoch INVALID_PRODUCER_EPOCH, a transaction
whose markers are being written CONCURRENT_TRANSACTIONS, and a transaction that did not add the
group with AddOffsetsToTxn INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v4), as Kafka's
verification answers. The group coordinator then checks the group as Kafka does for transactional
commits (v3+ generation and member, when given; unknown partitions; metadata size) and stages the
offsets: OffsetFetch does not see them (``require_stable`` gets UNSTABLE_OFFSET_COMMIT) until the
transaction commits; an abort drops them. Errors are per partition.
"""

from __future__ import annotations

from kafkalite.broker.core.group.coordinator import OffsetToCommit
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kafkalite.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

__all__ = ["handle_txn_offset_commit"]


@handles(api_key=28, min_version=0, max_version=4)
def handle_txn_offset_commit(context: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = context.api_version
    offsets = [OffsetToCommit(topic.name, partition.partition_index, partition.committed_offset,
                              partition.committed_leader_epoch if version >= 2 else -1, partition.committed_metadata)
               for topic in request.topics for partition in topic.partitions]
    error = context.cluster.transactions.verify_offsets(request.transactional_id, request.producer_id,
                                                        request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    elif error == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
        error = ErrorCode.INVALID_TXN_STATE
    if error:
        errors = {(item.topic, item.partition): error for item in offsets}
    else:
        errors = context.cluster.group_coordinator.stage_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, offsets,
            member_id=request.member_id if version >= 3 else "",
            group_instance_id=request.group_instance_id if version >= 3 else None,
            generation_id=request.generation_id if version >= 3 else -1,
            api_version=version)
    response = TxnOffsetCommitResponse()
    by_topic: dict[str, TxnOffsetCommitResponseTopic] = {}
    for (name, index), partition_error in errors.items():
        topic = by_topic.get(name)
        if topic is None:
            topic = by_topic[name] = TxnOffsetCommitResponseTopic(name=name)
            response.topics.append(topic)
        topic.partitions.append(TxnOffsetCommitResponsePartition(partition_index=index, error_code=partition_error))
    return response
