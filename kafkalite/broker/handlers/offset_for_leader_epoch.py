"""OffsetForLeaderEpoch (API key 23), v0-4: the end offset of a leader epoch.

Consumers (librdkafka, Java) use it to validate their position after a leader change. This
broker has led every partition since offset 0 with epoch 0 only, so epoch 0 ends at the log end
offset, and any other epoch is unknown (-1, -1), as Kafka's leader epoch cache answers.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkalite.protocol.messages.offset_for_leader_epoch_response import EpochEndOffset, OffsetForLeaderTopicResult

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@handles(api_key=23, min_version=0, max_version=4)
def handle_offset_for_leader_epoch(context: RequestContext,
                                   request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = context.cluster.topics
    response = OffsetForLeaderEpochResponse()
    for topic_request in request.topics:
        topic_result = OffsetForLeaderTopicResult(topic=topic_request.topic)
        response.topics.append(topic_result)
        for partition_request in topic_request.partitions:
            result = EpochEndOffset(partition=partition_request.partition,
                                    leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_OFFSET)
            topic_result.partitions.append(result)
            partition = topics.partition(topic_request.topic, partition_request.partition)
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            result.error_code = partition.check_leader_epoch(partition_request.current_leader_epoch)
            if result.error_code:
                continue
            if partition_request.leader_epoch == partition.leader_epoch:
                result.leader_epoch = partition.leader_epoch
                result.end_offset = partition.log_end_offset
    return response
