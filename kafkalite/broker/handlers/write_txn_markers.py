"""WriteTxnMarkers (API key 27), v0-1: write COMMIT/ABORT markers into partitions directly.

In Kafka the transaction coordinator sends this to partition leaders; here the coordinator writes
its markers itself, so the request only comes from admin tools aborting a *hanging* transaction
(``kafka-transactions.sh abort``, KIP-664): each listed partition gets the marker for the producer
id and epoch given, which closes that producer's open transaction there and lets the last stable
offset move on. Per partition, as Kafka's log answers: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_PRODUCER_EPOCH for an epoch older than the producer's, TRANSACTION_COORDINATOR_FENCED for a
coordinator epoch older than that of the producer's last marker (this broker's coordinator writes
epoch 0).
"""

from __future__ import annotations

import time

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkalite.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
)

__all__ = ["handle_write_txn_markers"]


@handles(api_key=27, min_version=0, max_version=1)
def handle_write_txn_markers(context: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    topics = context.cluster.topics
    now_ms = int(time.time() * 1000)
    response = WriteTxnMarkersResponse()
    for marker in request.markers:
        marker_result = WritableTxnMarkerResult(producer_id=marker.producer_id)
        response.markers.append(marker_result)
        for topic in marker.topics:
            topic_result = WritableTxnMarkerTopicResult(name=topic.name)
            marker_result.topics.append(topic_result)
            for index in topic.partition_indexes:
                error = ErrorCode.NONE
                partition = topics.partition(topic.name, index)
                if partition is None:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        partition.append_marker(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                                marker.coordinator_epoch, now_ms)
                    except KafkaError as exc:
                        error = exc.error_code
                topic_result.partitions.append(WritableTxnMarkerPartitionResult(partition_index=index,
                                                                                error_code=error))
    return response
