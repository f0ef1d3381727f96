"""DescribeQuorum (API key 55), v0-2: the KRaft quorum of a single combined node.

Kafka answers this for the metadata log, ``__cluster_metadata`` partition 0; a request must name
exactly that one partition, anything else gets UNKNOWN_TOPIC_OR_PARTITION for each partition it
names, as Kafka's Raft client answers. This node is the quorum's leader and only voter, with no
observers. kafkalite keeps no metadata log (topics and configs are files in the data directory),
so the leader epoch is 1 and the high watermark and the voter's log end offset are 0; its last
fetch and caught-up times are now, as Kafka reports them for the leader itself. v1 adds those
times; v2 the voter's directory id (the zero UUID, as a quorum without KIP-853 directory ids has)
and the node's endpoints: this broker's advertised listeners, since it has no controller listener.
"""

from __future__ import annotations

import time

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from kafkalite.protocol.messages.describe_quorum_response import (
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)

__all__ = ["METADATA_TOPIC", "handle_describe_quorum"]

METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1
_UNKNOWN = "This server does not host this topic-partition."


@handles(api_key=55, min_version=0, max_version=2)
def handle_describe_quorum(context: RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse:
    cluster = context.cluster
    topics = request.topics
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC or [
            partition.partition_index for partition in topics[0].partitions] != [0]:
        return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None, nodes=[], topics=[
            TopicData(topic_name=topic.topic_name, partitions=[
                PartitionData(partition_index=partition.partition_index,
                              error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message=_UNKNOWN,
                              current_voters=[], observers=[])
                for partition in topic.partitions])
            for topic in topics])
    now_ms = int(time.time() * 1000)
    voter = ReplicaState(replica_id=cluster.node_id, log_end_offset=0, last_fetch_timestamp=now_ms,
                         last_caught_up_timestamp=now_ms)
    partition = PartitionData(partition_index=0, error_code=ErrorCode.NONE, error_message=None,
                              leader_id=cluster.node_id, leader_epoch=LEADER_EPOCH, high_watermark=0,
                              current_voters=[voter], observers=[])
    nodes = [Node(node_id=cluster.node_id, listeners=[Listener(name=endpoint.name, host=endpoint.host,
                                                               port=endpoint.port)
                                                      for endpoint in cluster.endpoints])]
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message=None, nodes=nodes,
                                  topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[partition])])
