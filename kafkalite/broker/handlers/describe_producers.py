"""DescribeProducers (API key 61), v0: the active producers of partitions (KIP-664).

For each partition: every producer id with state there, its epoch, last sequence, the timestamp of
its last batch, the coordinator epoch of its last marker (-1 if none) and the first offset of its
open transaction (-1 if none). An invalid topic name is INVALID_TOPIC_EXCEPTION, an unknown topic
or partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from kafkalite.broker.core.topics import validate_topic_name
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from kafkalite.protocol.messages.describe_producers_response import PartitionResponse, ProducerState, TopicResponse

__all__ = ["handle_describe_producers"]


@handles(api_key=61, min_version=0, max_version=0)
def handle_describe_producers(context: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = context.cluster.topics
    response = DescribeProducersResponse()
    for topic_request in request.topics:
        topic_response = TopicResponse(name=topic_request.name)
        response.topics.append(topic_response)
        topic_error: KafkaError | None = None
        try:
            validate_topic_name(topic_request.name)
        except KafkaError as exc:
            topic_error = exc
        for index in topic_request.partition_indexes:
            result = PartitionResponse(partition_index=index)
            topic_response.partitions.append(result)
            if topic_error is not None:
                result.error_code, result.error_message = topic_error.error_code, topic_error.message
                continue
            partition = topics.partition(topic_request.name, index)
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            for entry in sorted(partition.producer_state.producers.values(), key=lambda e: e.producer_id):
                result.active_producers.append(ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.txn_first_offset,
                ))
    return response
