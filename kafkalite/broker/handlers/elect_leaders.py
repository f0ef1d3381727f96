"""ElectLeaders (API key 43), v0-2: Kafka's answer on a cluster of one broker.

Every partition already has its preferred leader, this node, and is led by it, so no election is
ever needed. As Kafka's controller answers: each named partition that exists gets
ELECTION_NOT_NEEDED ("Leader election not needed for topic partition."), a topic or partition
that does not exist UNKNOWN_TOPIC_OR_PARTITION with Kafka's message; a request that names no
partitions (null) asks for every partition and is answered with every topic and no partition
result, since Kafka leaves out the partitions that needed no election. The election type (v1+,
preferred or unclean) changes nothing; an unknown one is INVALID_REQUEST for the whole request.
``timeout_ms`` is not needed: the answer is immediate.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from kafkalite.protocol.messages.elect_leaders_response import PartitionResult, ReplicaElectionResult

__all__ = ["handle_elect_leaders"]

PREFERRED, UNCLEAN = 0, 1
_NOT_NEEDED = "Leader election not needed for topic partition."


@handles(api_key=43, min_version=0, max_version=2)
def handle_elect_leaders(context: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    topics = context.cluster.topics
    if context.api_version >= 1 and request.election_type not in (PREFERRED, UNCLEAN):
        return ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[])
    results = []
    if request.topic_partitions is None:
        results = [ReplicaElectionResult(topic=topic.name, partition_result=[]) for topic in topics]
    else:
        for requested in request.topic_partitions:
            result = ReplicaElectionResult(topic=requested.topic, partition_result=[])
            topic = topics.get(requested.topic)
            for index in requested.partitions:
                if topic is None:
                    code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {requested.topic}"
                elif not 0 <= index < len(topic.partitions):
                    code, message = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"No such partition as {requested.topic}-{index}")
                else:
                    code, message = ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED
                result.partition_result.append(PartitionResult(partition_id=index, error_code=code,
                                                               error_message=message))
            results.append(result)
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=results)
