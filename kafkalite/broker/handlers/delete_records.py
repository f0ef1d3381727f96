"""DeleteRecords (API key 21), v0-2: move partitions' log start offset forward (the admin "purge").

Each partition's offset becomes its new log start offset, -1 meaning the high watermark; records
below it are no longer served and whole segments below it are removed by the log. An offset at
or below the current log start offset changes nothing. ``low_watermark`` in the answer is the log
start offset afterwards (the single replica's, so no waiting is needed). Errors per partition, as
Kafka answers: UNKNOWN_TOPIC_OR_PARTITION; OFFSET_OUT_OF_RANGE for an offset above the high
watermark or below -1; POLICY_VIOLATION when the topic's ``cleanup.policy`` does not include
``delete``; INVALID_TOPIC_EXCEPTION for the internal topics. A failed partition reports
``low_watermark`` -1. Not implemented: ``timeout_ms`` (the deletion is immediate).
"""

from __future__ import annotations

from kafkalite.broker.core.topics import INTERNAL_TOPICS
from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from kafkalite.protocol.messages.delete_records_response import DeleteRecordsPartitionResult, DeleteRecordsTopicResult

__all__ = ["handle_delete_records"]

HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


@handles(api_key=21, min_version=0, max_version=2)
def handle_delete_records(context: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = context.cluster.topics
    response = DeleteRecordsResponse()
    for topic_request in request.topics:
        topic_result = DeleteRecordsTopicResult(name=topic_request.name)
        response.topics.append(topic_result)
        for partition_request in topic_request.partitions:
            result = DeleteRecordsPartitionResult(partition_index=partition_request.partition_index,
                                                  low_watermark=INVALID_LOW_WATERMARK, error_code=ErrorCode.NONE)
            topic_result.partitions.append(result)
            partition = topics.partition(topic_request.name, partition_request.partition_index)
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif topic_request.name in INTERNAL_TOPICS:
                result.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif "delete" not in _policies(partition.topic_config("cleanup.policy")):
                result.error_code = ErrorCode.POLICY_VIOLATION
            else:
                high_watermark = partition.high_watermark
                offset = high_watermark if partition_request.offset == HIGH_WATERMARK else partition_request.offset
                if offset < 0 or offset > high_watermark:
                    result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    continue
                if offset > partition.log_start_offset:
                    partition.log.delete_records_before(offset)
                result.low_watermark = partition.log_start_offset
    return response


def _policies(cleanup_policy: str) -> list[str]:
    return [policy.strip() for policy in cleanup_policy.split(",")]
