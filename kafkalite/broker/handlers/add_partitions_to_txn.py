"""AddPartitionsToTxn (API key 24), v0-3: add partitions to a producer's ongoing transaction.

The client's form (one transactional id per request). Every partition must exist: otherwise those
get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, and nothing is added. Then
the transaction coordinator answers for all of them at once: INVALID_PRODUCER_ID_MAPPING for an
unknown transactional id or another producer id, PRODUCER_FENCED for an old epoch
(INVALID_PRODUCER_EPOCH before v2, as Kafka answers), CONCURRENT_TRANSACTIONS while the previous
transaction's markers are being written. Adding to an Empty or completed transaction starts a new
one. Not implemented: v4-5, the batched broker-to-broker form with ``verify_only`` (this broker
verifies transactional produce requests with its own coordinator, without a request).
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kafkalite.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnTopicResult,
)

__all__ = ["handle_add_partitions_to_txn"]


@handles(api_key=24, min_version=0, max_version=3)
def handle_add_partitions_to_txn(context: RequestContext,
                                 request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    topics = context.cluster.topics
    wanted: list[tuple[str, int]] = []
    missing: set[tuple[str, int]] = set()
    for topic in request.v3_and_below_topics:
        for index in topic.partitions:
            wanted.append((topic.name, index))
            if topics.partition(topic.name, index) is None:
                missing.add((topic.name, index))
    errors: dict[tuple[str, int], ErrorCode]
    if missing:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
    else:
        error = context.cluster.transactions.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, wanted)
        if error == ErrorCode.PRODUCER_FENCED and context.api_version < 2:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        errors = dict.fromkeys(wanted, error)
    response = AddPartitionsToTxnResponse()
    by_topic: dict[str, AddPartitionsToTxnTopicResult] = {}
    for (name, index), error in errors.items():
        result = by_topic.get(name)
        if result is None:
            result = by_topic[name] = AddPartitionsToTxnTopicResult(name=name)
            response.results_by_topic_v3_and_below.append(result)
        result.results_by_partition.append(AddPartitionsToTxnPartitionResult(partition_index=index,
                                                                             partition_error_code=error))
    return response
