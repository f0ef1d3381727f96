"""ListPartitionReassignments (API key 46), v0: the reassignments in progress, which on a cluster of
one broker are none.

AlterPartitionReassignments never starts one (the only valid target is the current replica list),
so the answer is always an empty list, whether the request names topics or asks for all (null),
as Kafka's controller answers when nothing is being reassigned.
"""

from __future__ import annotations

from kafkalite.broker.handlers.registry import RequestContext, handles
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

__all__ = ["handle_list_partition_reassignments"]


@handles(api_key=46, min_version=0, max_version=0)
def handle_list_partition_reassignments(context: RequestContext, request: ListPartitionReassignmentsRequest
                                        ) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, topics=[])
