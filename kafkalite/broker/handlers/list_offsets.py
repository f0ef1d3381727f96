"""ListOffsets (API key 2), v1-10: an offset by timestamp, or the earliest/latest/max-timestamp one.

Special timestamps: -1 latest (the high watermark, or the last stable offset for read_committed),
-2 earliest (the log start offset), -3 the record with the largest timestamp (v7+), -4 earliest
local (v8+; the same as earliest: there is no tiered storage), -5 latest tiered (v9+; nothing is
tiered, so offset -1). A timestamp >= 0 finds the first record at or after it through the time
index; none gives offset -1. v0 (``max_num_offsets``) is not served, as in Kafka 4. Batches are
stored without decoding their records, so a client may have stored one whose records do not
decode; a lookup that must read it answers CORRUPT_MESSAGE for that partition.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkalite.protocol.messages.list_offsets_response import ListOffsetsPartitionResponse, ListOffsetsTopicResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
_READ_COMMITTED = 1


@handles(api_key=2, min_version=1, max_version=10)
def handle_list_offsets(context: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = context.cluster.topics
    read_committed = request.isolation_level == _READ_COMMITTED
    response = ListOffsetsResponse()
    for topic_request in request.topics:
        topic_response = ListOffsetsTopicResponse(name=topic_request.name)
        response.topics.append(topic_response)
        for partition_request in topic_request.partitions:
            result = ListOffsetsPartitionResponse(partition_index=partition_request.partition_index,
                                                  timestamp=-1, offset=-1, leader_epoch=-1)
            topic_response.partitions.append(result)
            partition = topics.partition(topic_request.name, partition_request.partition_index)
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            result.error_code = partition.check_leader_epoch(partition_request.current_leader_epoch)
            if result.error_code:
                continue
            timestamp = partition_request.timestamp
            found: tuple[int, int] | None
            if timestamp == LATEST:
                found = (partition.last_stable_offset if read_committed else partition.high_watermark, -1)
            elif timestamp in (EARLIEST, EARLIEST_LOCAL):
                found = (partition.log_start_offset, -1)
            elif timestamp == LATEST_TIERED or (timestamp < 0 and timestamp != MAX_TIMESTAMP):
                found = None
            else:
                try:  # reads the records of stored batches, which a client may have stored corrupt
                    found = partition.log.max_timestamp() if timestamp == MAX_TIMESTAMP else \
                        partition.log.offset_for_timestamp(timestamp)
                except KafkaError as exc:
                    result.error_code = exc.error_code
                    continue
                if (found is not None and timestamp != MAX_TIMESTAMP and read_committed
                        and found[0] >= partition.last_stable_offset):
                    found = None
            if found is not None:
                result.offset, result.timestamp = found
                result.leader_epoch = partition.leader_epoch
    return response
